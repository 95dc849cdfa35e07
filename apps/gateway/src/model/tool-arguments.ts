import { errorFields } from './model.errors';
import type { MalformedToolCall, ToolCall } from './model.types';

const RAW_ARGUMENTS_LIMIT = 2000;

/**
 * Turns the argument text a model streamed into an object. Anything else (broken JSON, an array,
 * a string) is reported as malformed so the loop can tell the model, instead of crashing the turn.
 */
export function parseToolArguments(id: string, name: string, raw: string): ToolCall | MalformedToolCall {
  const text = raw.trim();
  // Some servers send nothing at all for a call without parameters.
  if (text === '') return { id, name, arguments: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return malformed(id, name, raw, `the arguments are not valid JSON (${describeJsonError(error, text)})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return malformed(id, name, raw, `the arguments must be a JSON object, not ${Array.isArray(parsed) ? 'an array' : parsed === null ? 'null' : typeof parsed}`);
  }
  return { id, name, arguments: parsed as Record<string, unknown> };
}

export function isMalformed(call: ToolCall | MalformedToolCall): call is MalformedToolCall {
  return 'reason' in call;
}

function malformed(id: string, name: string, raw: string, reason: string): MalformedToolCall {
  return { id, name, rawArguments: raw.length > RAW_ARGUMENTS_LIMIT ? `${raw.slice(0, RAW_ARGUMENTS_LIMIT)}…` : raw, reason };
}

/**
 * Describes a JSON.parse failure by kind and line/column. Node's messages may quote the text
 * itself, which is never repeated: it can be long, and for files it is not ours to show.
 */
export function describeJsonError(error: unknown, text: string): string {
  const message = errorFields(error).message ?? '';
  const positioned = /^(.*?) in JSON at position (\d+)/.exec(message);
  if (positioned) {
    const position = Number(positioned[2]);
    const before = text.slice(0, position);
    const line = before.split('\n').length;
    const column = position - before.lastIndexOf('\n');
    return `${lowerFirst(positioned[1] ?? 'syntax error')} at line ${line}, column ${column}`;
  }
  const token = /^Unexpected token (.+?), /.exec(message);
  if (token) return `unexpected token ${token[1]}`;
  if (/end of JSON/i.test(message)) return 'it ends too early';
  return 'syntax error';
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
