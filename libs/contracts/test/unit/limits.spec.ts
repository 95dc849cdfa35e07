import type { z } from 'zod';
import { CreateSessionRequest, StartSubagentRequest } from '../../src/api/sessions';
import { PublishPolicyRequest } from '../../src/api/projects';
import { PolicyDryRunRequest } from '../../src/api/policy-dry-run';
import { ApplyDiffRequest, CreateSandboxRequest, ExecRequest, ProposeEditRequest, ProposeWriteRequest, SandboxLimits } from '../../src/exec-host';
import { checkText, formatBytes, Limits, TOOL_ARGUMENT_LIMITS, tooLargeMessage, toolArgumentsOverLimit, utf8Bytes, type LimitName } from '../../src/limits';

/**
 * Every text field bounded by a limit, with the rest of a valid message around it. The table below
 * is generated from this list × each way of reaching a size (ASCII and multi-byte characters).
 */
const FIELDS: { schema: z.ZodType; name: string; field: string; limit: LimitName; base: Record<string, unknown> }[] = [
  { schema: CreateSessionRequest, name: 'CreateSessionRequest', field: 'instruction', limit: 'instructionBytes', base: { projectId: '00000000-0000-4000-8000-000000000000' } },
  {
    schema: CreateSessionRequest,
    name: 'CreateSessionRequest',
    field: 'startingPatch',
    limit: 'startingPatchBytes',
    base: { projectId: '00000000-0000-4000-8000-000000000000', instruction: 'fix it' },
  },
  { schema: StartSubagentRequest, name: 'StartSubagentRequest', field: 'instruction', limit: 'instructionBytes', base: { agent: 'explore' } },
  { schema: PublishPolicyRequest, name: 'PublishPolicyRequest', field: 'sourceText', limit: 'policySourceBytes', base: {} },
  { schema: PolicyDryRunRequest, name: 'PolicyDryRunRequest', field: 'sourceText', limit: 'policySourceBytes', base: {} },
  { schema: ExecRequest, name: 'ExecRequest', field: 'command', limit: 'commandBytes', base: {} },
  { schema: CreateSandboxRequest, name: 'CreateSandboxRequest', field: 'uncommittedPatch', limit: 'startingPatchBytes', base: { sessionId: 'sess-1', repository: { source: '/srv/repo' } } },
  { schema: ProposeWriteRequest, name: 'ProposeWriteRequest', field: 'content', limit: 'fileWriteBytes', base: { path: 'src/a.ts' } },
  { schema: ProposeEditRequest, name: 'ProposeEditRequest', field: 'old_string', limit: 'fileWriteBytes', base: { path: 'src/a.ts', new_string: 'b' } },
  { schema: ProposeEditRequest, name: 'ProposeEditRequest', field: 'new_string', limit: 'fileWriteBytes', base: { path: 'src/a.ts', old_string: 'a' } },
  { schema: ApplyDiffRequest, name: 'ApplyDiffRequest', field: 'diff', limit: 'applyDiffBytes', base: {} },
];

/** Text of exactly `bytes` UTF-8 bytes built from a character of `width` bytes (ASCII padding for the rest). */
function textOf(bytes: number, width: 1 | 2 | 3 | 4): string {
  const char = { 1: 'x', 2: 'é', 3: '€', 4: '😀' }[width];
  const n = Math.floor(bytes / width);
  return char.repeat(n) + 'x'.repeat(bytes - n * width);
}

const WIDTHS = [1, 2, 3, 4] as const;
const table = FIELDS.flatMap((f) =>
  WIDTHS.flatMap((w) => [
    { ...f, width: w, delta: 0 },
    { ...f, width: w, delta: 1 },
  ]),
);

describe('Limits: one set of size limits, refused with a sentence', () => {
  it(`covers every text limit with at least one schema field (${FIELDS.length} fields, ${table.length} cells)`, () => {
    const covered = new Set(FIELDS.map((f) => f.limit));
    const text = (Object.keys(Limits) as LimitName[]).filter((l) => !['toolOutputBytes', 'requestBodyBytes', 'sessionRequestBodyBytes'].includes(l));
    expect(text.filter((l) => !covered.has(l))).toEqual([]);
  });

  it.each(table)('$name $field: $delta byte(s) over $limit with $width-byte characters', ({ schema, field, limit, base, width, delta }) => {
    const bytes = Limits[limit] + delta;
    const value = textOf(bytes, width);
    expect(utf8Bytes(value)).toBe(bytes);
    const result = schema.safeParse({ ...base, [field]: value });
    if (delta === 0) {
      expect(result.error?.issues ?? []).toEqual([]);
    } else {
      expect(result.success).toBe(false);
      const issue = result.error!.issues.find((i) => i.path.join('.') === field);
      expect(issue?.message).toBe(tooLargeMessage(limit, bytes));
    }
  });

  it.each(Object.entries(TOOL_ARGUMENT_LIMITS).flatMap(([tool, args]) => Object.entries(args).flatMap(([arg, limit]) => [0, 1].map((delta) => ({ tool, arg, limit, delta })))))(
    'tool call $tool $arg: $delta byte(s) over $limit',
    ({ tool, arg, limit, delta }) => {
      const value = textOf(Limits[limit] + delta, 3);
      const over = toolArgumentsOverLimit(tool, { [arg]: value });
      if (delta === 0) expect(over).toBeNull();
      else expect(over).toEqual({ argument: arg, limit, message: tooLargeMessage(limit, Limits[limit] + 1) });
    },
  );

  it('bounds the output cap of a sandbox by the tool output limit', () => {
    expect(SandboxLimits.shape.outputCapBytes.safeParse(Limits.toolOutputBytes).success).toBe(true);
    expect(SandboxLimits.shape.outputCapBytes.safeParse(Limits.toolOutputBytes + 1).success).toBe(false);
  });

  it('says sizes as a person reads them, and exact byte counts where both would round alike', () => {
    expect(tooLargeMessage('commandBytes', 1024 * 1024)).toBe('The command is 1 MB; commands are limited to 64 KB.');
    expect(tooLargeMessage('commandBytes', 1_100_000)).toBe('The command is 1.0 MB; commands are limited to 64 KB.');
    expect(tooLargeMessage('commandBytes', 64 * 1024 + 1)).toBe('The command is 65537 bytes; commands are limited to 64 KB (65536 bytes).');
    expect(formatBytes(812)).toBe('812 bytes');
    expect(formatBytes(1536)).toBe('1.5 KB');
    for (const limit of Object.keys(Limits) as LimitName[]) expect(tooLargeMessage(limit, Limits[limit] * 2)).toMatch(/^The [^;]+ is [\d.]+ (bytes|KB|MB); [^.]+ are limited to [\d.]+ (KB|MB)\.$/);
  });

  it('counts UTF-8 bytes as Buffer does, lone surrogates included', () => {
    for (const s of ['', 'abc', 'é€😀', '\ud800x', 'x\udc00', '😀'.repeat(100)]) expect(utf8Bytes(s)).toBe(Buffer.byteLength(s, 'utf8'));
    expect(checkText('commandBytes', 'x'.repeat(Limits.commandBytes))).toBeNull();
  });

  it('lets the largest legitimate session start through the body limit: the patch JSON-encoded (a newline or tab is two bytes) and the instruction', () => {
    const envelope = 8 * 1024 * 1024;
    expect(Limits.sessionRequestBodyBytes).toBeGreaterThanOrEqual(2 * Limits.startingPatchBytes + 2 * Limits.instructionBytes + envelope);
    // Every other body: a policy document at its limit, JSON-encoded, and the rest of the request.
    expect(Limits.requestBodyBytes).toBeGreaterThanOrEqual(2 * Limits.policySourceBytes + 64 * 1024);
    // A command is one argument of bash -c: below the kernel's 128 KiB cap (MAX_ARG_STRLEN).
    expect(Limits.commandBytes).toBeLessThan(128 * 1024);
  });
});
