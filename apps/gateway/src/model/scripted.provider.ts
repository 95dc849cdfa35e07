import { readFile, stat } from 'node:fs/promises';
import { z } from 'zod';
import { ModelError, errorFields } from './model.errors';
import type { ModelProvider, ModelRequest, ToolCall, TurnResult } from './model.types';
import { describeJsonError } from './tool-arguments';

/**
 * The scripted model: replays a JSON file, one turn per request, so the demo and tests run the
 * whole platform deterministically without a real model. The file format is a published
 * contract (DESIGN.md, "The scripted model"); outside test suites depend on it.
 */

export const EXHAUSTED_TEXT = 'script exhausted';

/** What the scripted model answers to a compaction request, which never consumes a scripted turn. */
export const COMPACTION_TEXT = 'Summary of the earlier turns: they were replayed from a script and are kept in the session record.';

const MAX_SCRIPT_BYTES = 10 * 1024 * 1024;
const MAX_REPEAT = 1_000_000;

const ScriptToolCall = z.strictObject({
  name: z.string().min(1, 'a tool call needs a tool name'),
  arguments: z.record(z.string(), z.unknown()).default({}),
});

const ScriptTurn = z
  .strictObject({
    repeat: z.number().int('repeat must be a whole number').min(1, 'repeat must be at least 1').max(MAX_REPEAT, `repeat must be at most ${MAX_REPEAT}`).optional(),
    text: z.string().optional(),
    tool_calls: z.array(ScriptToolCall).min(1, 'list at least one tool call, or leave "tool_calls" out').optional(),
  })
  .refine((turn) => turn.text !== undefined || turn.tool_calls !== undefined, { message: 'a turn needs "text", "tool_calls" or both' });

// Loose at the top so a script can carry a description or other notes beside its turns.
export const ModelScript = z.looseObject({ turns: z.array(ScriptTurn) });
export type ModelScript = z.infer<typeof ModelScript>;
type ScriptTurn = z.infer<typeof ScriptTurn>;

/** Reads and validates a script file; every problem names the file and what is wrong with it. */
export async function loadModelScript(path: string): Promise<ModelScript> {
  const invalid = (what: string) => new ModelError('model_script_invalid', `The model script ${path} ${what}.`);
  let raw: string;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw invalid('is not a regular file');
    if (info.size > MAX_SCRIPT_BYTES) throw invalid(`is ${info.size} bytes, more than the ${MAX_SCRIPT_BYTES} bytes a script may have`);
    raw = await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof ModelError) throw error;
    const code = errorFields(error).code ?? '';
    throw invalid(code === 'ENOENT' ? 'does not exist' : code === 'EACCES' ? 'cannot be read (permission denied)' : `cannot be read (${code || 'unknown error'})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    throw invalid(`is not valid JSON (${describeJsonError(error, raw)})`);
  }
  return parseModelScript(json, path);
}

export function parseModelScript(json: unknown, path: string): ModelScript {
  const parsed = ModelScript.safeParse(json);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.slice(0, 5).map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
  const more = parsed.error.issues.length > 5 ? ` (and ${parsed.error.issues.length - 5} more)` : '';
  throw new ModelError('model_script_invalid', `The model script ${path} is invalid: ${problems.join('; ')}${more}.`);
}

function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'the file';
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`)).join('');
}

export class ScriptedProvider implements ModelProvider {
  readonly ref: string;
  private turnIndex = 0;
  private iteration = 0;
  /** Position in the expanded script, for deterministic tool-call ids. */
  private position = 0;

  constructor(
    private readonly script: ModelScript,
    scriptPath: string,
  ) {
    this.ref = `scripted:${scriptPath}`;
  }

  async complete(request: ModelRequest): Promise<TurnResult> {
    if (request.signal.aborted) throw new ModelError('model_aborted', 'The request to the scripted model was cancelled.');
    if (request.purpose === 'compaction') return this.answer(request, { text: COMPACTION_TEXT, toolCalls: [], stopReason: 'end_turn' });
    // A request without tools is the final summary turn (L3): it takes the next text turn, skipping tool turns.
    const textOnly = request.tools.length === 0;
    for (;;) {
      const next = this.take();
      if (!next) return this.answer(request, { text: EXHAUSTED_TEXT, toolCalls: [], stopReason: 'end_turn' });
      if (textOnly && next.turn.tool_calls) continue;
      return this.answer(request, render(next.turn, next.iteration, next.position));
    }
  }

  private take(): { turn: ScriptTurn; iteration: number; position: number } | undefined {
    const turn = this.script.turns[this.turnIndex];
    if (!turn) return undefined;
    const iteration = this.iteration;
    const position = this.position++;
    if (++this.iteration >= (turn.repeat ?? 1)) {
      this.turnIndex++;
      this.iteration = 0;
    }
    return { turn, iteration, position };
  }

  private answer(request: ModelRequest, result: TurnResult): TurnResult {
    if (result.text) request.onTextDelta?.(result.text);
    return result;
  }
}

function render(turn: ScriptTurn, iteration: number, position: number): TurnResult {
  // `{{i}}` is replaced only in repeated turns, so a single turn can still carry the literal text.
  const fill = turn.repeat !== undefined ? (s: string) => s.split('{{i}}').join(String(iteration)) : (s: string) => s;
  const toolCalls: ToolCall[] = (turn.tool_calls ?? []).map((call, k) => ({
    id: `scripted_${position}_${k}`,
    name: call.name,
    arguments: substitute(call.arguments, fill) as Record<string, unknown>,
  }));
  return {
    ...(turn.text !== undefined ? { text: fill(turn.text) } : {}),
    toolCalls,
    stopReason: toolCalls.length > 0 ? 'tool_use' : 'end_turn',
  };
}

function substitute(value: unknown, fill: (s: string) => string): unknown {
  if (typeof value === 'string') return fill(value);
  if (Array.isArray(value)) return value.map((v) => substitute(v, fill));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, fill)]));
  }
  return value;
}
