import { z } from 'zod';

const KiB = 1024;
const MiB = 1024 * 1024;

/**
 * The one set of size limits of the platform (S2, S4, G02). The gateway's schemas and body parser,
 * the exec-host's schemas and body parser and the CLI's checks before an upload all read them from
 * here, so a value is refused up front, by the first part that sees it, with the same sentence, and
 * never accepted by one part (or offered to a person for approval) only to be refused by the next.
 *
 * Sizes are UTF-8 bytes of the text as it is sent, not characters.
 */
export const Limits = {
  /** A shell command (Bash tool call, exec-host exec). Below the kernel's 128 KiB cap on one argument. */
  commandBytes: 64 * KiB,
  /** The developer's instruction for a session or a subagent. */
  instructionBytes: 256 * KiB,
  /** The developer's uncommitted work uploaded as the starting patch (`git diff HEAD --binary`). */
  startingPatchBytes: 50 * MiB,
  /** The content of one file write (Write tool call, propose-write), and each string of an Edit. */
  fileWriteBytes: 10 * MiB,
  /** An approved diff applied to the working copy (a write's diff is at most about twice its content). */
  applyDiffBytes: 24 * MiB,
  /** One command's output, each stream: the highest outputCapBytes a sandbox may be given. */
  toolOutputBytes: 16 * MiB,
  /** A policy document's YAML source. */
  policySourceBytes: 1_000_000,
  /**
   * The body of any gateway request but a session start: a policy document at its limit, JSON-encoded
   * (each newline, tab, quote or backslash takes two bytes), with room for the envelope.
   */
  requestBodyBytes: 4 * MiB,
  /**
   * The body of a session start (POST /api/v1/sessions), and of the exec-host's control channel:
   * the largest starting patch JSON-encoded (at most twice its size for a text or `--binary` patch),
   * plus the instruction and the developer's agent files.
   */
  sessionRequestBodyBytes: 128 * MiB,
} as const;
export type LimitName = keyof typeof Limits;

/** What each limit bounds, in the words of its sentence: singular for "The X is …", plural for "Xs are limited to …". */
const SUBJECTS: Record<LimitName, { one: string; many: string }> = {
  commandBytes: { one: 'command', many: 'commands' },
  instructionBytes: { one: 'instruction', many: 'instructions' },
  startingPatchBytes: { one: 'starting patch (your uncommitted changes)', many: 'starting patches' },
  fileWriteBytes: { one: 'file content', many: 'file writes' },
  applyDiffBytes: { one: 'diff', many: 'diffs to apply' },
  toolOutputBytes: { one: 'output cap', many: 'output caps' },
  policySourceBytes: { one: 'policy document', many: 'policy documents' },
  requestBodyBytes: { one: 'request body', many: 'request bodies' },
  sessionRequestBodyBytes: { one: 'session request (starting patch included)', many: 'session requests' },
};

/** A size for people: "812 bytes", "64 KB", "1.0 MB" (1 KB = 1024 bytes). */
export function formatBytes(n: number): string {
  if (n < KiB) return `${n} bytes`;
  if (n < MiB) return n % KiB === 0 ? `${n / KiB} KB` : `${(n / KiB).toFixed(1)} KB`;
  return n % MiB === 0 ? `${n / MiB} MB` : `${(n / MiB).toFixed(1)} MB`;
}

/** UTF-8 length without Buffer (the console uses these schemas too). Cheap when the answer is plain. */
export function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** The sentence for a value over a limit: "The command is 1.0 MB; commands are limited to 64 KB." */
export function tooLargeMessage(limit: LimitName, bytes: number): string {
  const max = Limits[limit];
  const s = SUBJECTS[limit];
  const size = formatBytes(bytes);
  const cap = formatBytes(max);
  // Just over the limit both round alike; then the exact byte counts say it.
  return size.replace('.0 ', ' ') === cap ? `The ${s.one} is ${bytes} bytes; ${s.many} are limited to ${cap} (${max} bytes).` : `The ${s.one} is ${size}; ${s.many} are limited to ${cap}.`;
}

/** The sentence when `bytes` is over `limit`, else null. */
export function checkSize(limit: LimitName, bytes: number): string | null {
  return bytes > Limits[limit] ? tooLargeMessage(limit, bytes) : null;
}

/** The sentence when the text `value` is over `limit`, else null. */
export function checkText(limit: LimitName, value: string): string | null {
  // A string is at least as many bytes as UTF-16 units and at most three times as many.
  if (value.length * 3 <= Limits[limit]) return null;
  return checkSize(limit, utf8Bytes(value));
}

/** A string schema bounded by a limit, whose refusal is the limit's sentence. */
export function limitedText(limit: LimitName): z.ZodString {
  return z.string().superRefine((value, ctx) => {
    const message = checkText(limit, value);
    if (message) ctx.addIssue({ code: 'custom', message, params: { limit, max: Limits[limit] } });
  });
}

/**
 * Limits on the arguments of tool calls, declared once: the gateway refuses a call over one before
 * policy or any person sees it (no approval is created for a command nobody could run).
 */
export const TOOL_ARGUMENT_LIMITS: Readonly<Record<string, Readonly<Record<string, LimitName>>>> = {
  Bash: { command: 'commandBytes' },
  Write: { content: 'fileWriteBytes' },
  Edit: { old_string: 'fileWriteBytes', new_string: 'fileWriteBytes' },
  Task: { instruction: 'instructionBytes' },
};

/** The sentence for the first argument of a tool call that is over its limit, else null. */
export function toolArgumentsOverLimit(name: string, args: Record<string, unknown>): { argument: string; limit: LimitName; message: string } | null {
  const limits = TOOL_ARGUMENT_LIMITS[name];
  if (!limits) return null;
  for (const [argument, limit] of Object.entries(limits)) {
    const value = args[argument];
    if (typeof value !== 'string') continue;
    const message = checkText(limit, value);
    if (message) return { argument, limit, message };
  }
  return null;
}
