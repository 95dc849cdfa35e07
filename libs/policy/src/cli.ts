import { stringify } from 'yaml';
import { issueLine } from './check';
import { decide } from './decide';
import type { Decision } from './decision';
import { defaultPolicy, parsePolicy, PolicyValidationError, recommendedPolicy, type Policy } from './schema';
import { isPolicyEngineReady } from './shell/parser';

export interface PolicyCliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  readFile: (p: string) => string;
  /** All of standard input (for `explain --batch`). */
  readStdin?: () => string;
}

const USAGE = [
  'Usage:',
  '  lemni policy init [--recommended]           print a complete policy document',
  '  lemni policy check FILE                     validate a policy document',
  '  lemni policy explain FILE [--json] -- COMMAND   show the decision for a shell command',
  '  lemni policy explain FILE --json --batch        one decision per line for the commands on stdin',
  '                                              (one command per line, or JSON lines with a "command")',
].join('\n');

const EXIT_OK = 0;
const EXIT_INVALID = 1;
const EXIT_USAGE = 2;

function usage(io: PolicyCliIo, problem: string): number {
  io.stderr(`${problem}\n${USAGE}\n`);
  return EXIT_USAGE;
}

function document(policy: Policy, recommended: boolean): string {
  const header = [
    '# Lemniscate project policy (version 1). Reference: docs/policy-reference.md',
    recommended
      ? '# Recommended: the usual build, test, lint and format commands are free; network tools and publishing are forbidden.'
      : '# Default: no command is free (P2); every command and every change goes to a person.',
  ].join('\n');
  return `${header}\n${stringify(policy, { lineWidth: 0 })}`;
}

/** Loads and validates a policy file, writing what is wrong to stderr. */
function load(file: string, io: PolicyCliIo): Policy | null {
  let text: string;
  try {
    text = io.readFile(file);
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? ` (${String((error as { code: unknown }).code)})` : '';
    io.stderr(`Cannot read ${file}${code}.\n`);
    return null;
  }
  try {
    return parsePolicy(text);
  } catch (error) {
    if (!(error instanceof PolicyValidationError)) throw error;
    io.stderr(`${file} is not a valid policy:\n`);
    for (const issue of error.issues) io.stderr(`  ${issueLine(issue)}\n`);
    return null;
  }
}

function decisionJson(d: Decision): { effect: string; rule: string; reason: string; thirdParty: unknown[] } {
  return { effect: d.effect, rule: d.rule, reason: d.reason, thirdParty: d.thirdParty ?? [] };
}

/** The command of one line of batch input: the line itself, or the `command` of a JSON object. */
function batchCommand(line: string): { command: string } | { error: string } {
  if (!line.trimStart().startsWith('{')) return { command: line };
  try {
    const value: unknown = JSON.parse(line);
    const command = typeof value === 'object' && value !== null ? (value as { command?: unknown }).command : undefined;
    return typeof command === 'string' ? { command } : { error: 'the JSON object has no "command" text' };
  } catch {
    return { error: 'the line starts with { but is not a JSON object' };
  }
}

/**
 * `explain FILE --json --batch`: one decision per line of standard input, in order, each as a JSON
 * line with the command it answers. Blank lines are skipped; a JSONL line that cannot be read gets
 * an `error` line, and the exit code is 1.
 */
function explainBatch(rest: string[], io: PolicyCliIo): number {
  const files = rest.filter((o) => o !== '--json' && o !== '--batch');
  const unknown = files.find((o) => o.startsWith('-'));
  if (unknown !== undefined) return usage(io, `Unknown option for policy explain: ${unknown}`);
  if (!rest.includes('--json')) return usage(io, 'policy explain --batch writes JSON lines: add --json.');
  if (files.length !== 1) return usage(io, 'policy explain --batch takes exactly one FILE and reads the commands on stdin.');
  if (!io.readStdin) return usage(io, 'policy explain --batch needs standard input.');
  if (!isPolicyEngineReady()) {
    io.stderr('The policy engine is not initialised.\n');
    return EXIT_INVALID;
  }
  const policy = load(files[0] as string, io);
  if (!policy) return EXIT_INVALID;
  let code = EXIT_OK;
  const out: string[] = [];
  io.readStdin()
    .split('\n')
    .forEach((raw, index) => {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (line.trim() === '') return;
      const parsed = batchCommand(line);
      if ('error' in parsed) {
        code = EXIT_INVALID;
        out.push(JSON.stringify({ line: index + 1, error: parsed.error }));
        return;
      }
      const d = decide({ name: 'Bash', arguments: { command: parsed.command } }, policy);
      out.push(JSON.stringify({ command: parsed.command, ...decisionJson(d) }));
    });
  if (out.length > 0) io.stdout(`${out.join('\n')}\n`);
  return code;
}

/**
 * `lemni policy …`. `args` start after the word `policy`. Returns the exit code. `explain` decides
 * a shell command, so `initPolicyEngine()` must have resolved before it runs.
 */
export function runPolicyCommand(args: string[], io: PolicyCliIo): number {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'init': {
      const unknown = rest.find((a) => a !== '--recommended');
      if (unknown !== undefined) return usage(io, `Unknown option for policy init: ${unknown}`);
      const recommended = rest.includes('--recommended');
      io.stdout(document(recommended ? recommendedPolicy : defaultPolicy, recommended));
      return EXIT_OK;
    }
    case 'check': {
      if (rest.length !== 1 || (rest[0] as string).startsWith('-')) return usage(io, 'policy check takes exactly one FILE.');
      const file = rest[0] as string;
      const policy = load(file, io);
      if (!policy) return EXIT_INVALID;
      io.stdout(
        `OK: ${file} is a valid policy (version ${policy.version}, ${policy.commands.free.length} free, ${policy.commands.readOnly.length} read-only and ${policy.commands.forbidden.length} forbidden command rules).\n`,
      );
      return EXIT_OK;
    }
    case 'explain': {
      if (rest.includes('--batch') && !rest.includes('--')) return explainBatch(rest, io);
      const dashes = rest.indexOf('--');
      if (dashes < 0) return usage(io, 'policy explain needs the command after `--`.');
      const options = rest.slice(0, dashes);
      const commandWords = rest.slice(dashes + 1);
      const json = options.includes('--json');
      const files = options.filter((o) => o !== '--json');
      const unknown = files.find((o) => o.startsWith('-'));
      if (unknown !== undefined) return usage(io, `Unknown option for policy explain: ${unknown}`);
      if (files.length !== 1) return usage(io, 'policy explain takes exactly one FILE before `--`.');
      if (commandWords.length === 0) return usage(io, 'policy explain needs a COMMAND after `--`.');
      if (!isPolicyEngineReady()) {
        io.stderr('The policy engine is not initialised.\n');
        return EXIT_INVALID;
      }
      const policy = load(files[0] as string, io);
      if (!policy) return EXIT_INVALID;
      const command = commandWords.join(' ');
      const d = decide({ name: 'Bash', arguments: { command } }, policy);
      if (json) {
        io.stdout(`${JSON.stringify(decisionJson(d))}\n`);
      } else {
        io.stdout(`${d.effect}  ${d.rule}\n${d.reason}\n`);
        for (const f of d.thirdParty ?? []) io.stdout(`  third-party file: ${f.path} (${f.class})\n`);
      }
      return EXIT_OK;
    }
    case undefined:
      return usage(io, 'Missing policy command.');
    default:
      return usage(io, `Unknown policy command: ${sub}`);
  }
}
