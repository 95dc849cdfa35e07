import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { buildCli } from '../../support/run-bin';

const repo = path.resolve(__dirname, '../../../../..');
const bin = path.join(repo, 'apps/cli/bin/lemni.js');
let dir: string;

function lemni(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  return lemniWithInput('', ...args);
}

function lemniWithInput(input: string, ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 30_000, input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function file(name: string, content: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

beforeAll(() => {
  // The bin runs the compiled CLI, as an installed `lemni` would.
  buildCli();
  dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-policy-cli-'));
}, 180_000);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('lemni policy (through the real bin)', () => {
  it('init prints a complete policy document that check accepts', () => {
    const init = lemni('policy', 'init');
    expect(init.code).toBe(0);
    const doc = parse(init.stdout) as { version: number; commands: { free: string[] }; sandbox: object; execution: object };
    expect(doc.version).toBe(1);
    expect(doc.commands.free).toEqual([]);
    expect(doc.sandbox).toBeDefined();
    expect(doc.execution).toBeDefined();
    const check = lemni('policy', 'check', file('default.yaml', init.stdout));
    expect(check.code).toBe(0);
    expect(check.stdout.trim().split('\n')).toHaveLength(1);
    expect(check.stdout).toMatch(/^OK: /);
  });

  it('init --recommended makes the usual commands free', () => {
    const init = lemni('policy', 'init', '--recommended');
    expect(init.code).toBe(0);
    const free = (parse(init.stdout) as { commands: { free: (string | { command: string })[] } }).commands.free;
    expect(free.map((r) => (typeof r === 'string' ? r : r.command))).toContain('npm test');
  });

  it('check exits 1 and names each problem of an invalid policy', () => {
    const r = lemni('policy', 'check', file('bad.yaml', 'version: 1\ncommands:\n  free: [npm test, pytest, go test, ""]\n  default: maybe\n'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('commands.free[3]: empty command');
    expect(r.stderr).toContain('commands.default: must be one of allow, ask, deny');
    expect(r.stdout).toBe('');
  });

  it('check exits 1 with a sentence on a YAML alias bomb, not an unexpected error', () => {
    const bomb = ['version: 1', 'a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g'].entries()) bomb.push(`${name}: &${name} [${Array(9).fill(`*${'abcdef'[i]}`).join(', ')}]`);
    const r = lemni('policy', 'check', file('bomb.yaml', `${bomb.join('\n')}\n`));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/aliases \(\*name\) expand to more than 100 copies/);
    expect(r.stderr).not.toMatch(/unexpected/i);
  });

  it('check exits 1 on a file it cannot read', () => {
    const r = lemni('policy', 'check', path.join(dir, 'missing.yaml'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Cannot read');
  });

  it('explain --json prints exactly one decision object', () => {
    const policy = file('explain.yaml', 'version: 1\n');
    const r = lemni('policy', 'explain', policy, '--json', '--', 'curl x');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      effect: 'deny',
      rule: 'commands.forbidden[0]',
      reason: '`curl` is forbidden by the project policy (commands.forbidden[0]).',
      thirdParty: [],
    });
  });

  it('explain reports third-party files and accepts --json after the file', () => {
    const policy = file('approve.yaml', 'version: 1\nthirdPartyFiles: { mode: approve }\n');
    const r = lemni('policy', 'explain', policy, '--json', '--', 'echo x > package.json');
    expect(JSON.parse(r.stdout)).toMatchObject({ effect: 'ask', rule: 'thirdPartyFiles.manifests', thirdParty: [{ path: 'package.json', class: 'manifests' }] });
  });

  it('explain prints the effect, the rule and the reason for a person', () => {
    const policy = file('free.yaml', 'version: 1\ncommands: { free: [npm test] }\n');
    const r = lemni('policy', 'explain', policy, '--', 'npm', 'test', '--', '--ci');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('allow  commands.free[0]\n`npm test -- --ci` is free under the project policy (commands.free[0]).\n');
  });

  it('explain exits 1 on an invalid policy and 2 without a command', () => {
    expect(lemni('policy', 'explain', file('v2.yaml', 'version: 2\n'), '--', 'ls').code).toBe(1);
    const usage = lemni('policy', 'explain', file('ok.yaml', 'version: 1\n'));
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--');
  });

  it('an unknown policy command exits 2 with the usage', () => {
    const r = lemni('policy', 'frobnicate');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Usage:');
  });

  it('explain --json --batch reads commands and JSON lines on stdin and writes one decision per line, in order', () => {
    const policy = file('recommended.yaml', lemni('policy', 'init', '--recommended').stdout);
    const input = ['ls -la', 'go test -exec "sh -c id" ./...', '', JSON.stringify({ command: 'find . -exec rm {} \\;' }), 'curl x', '{"nothing": 1}'].join('\n');
    const r = lemniWithInput(input, 'policy', 'explain', policy, '--json', '--batch');
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatchObject({ command: 'ls -la', effect: 'allow', rule: 'commands.readOnly[0]', thirdParty: [] });
    expect(lines[1]).toMatchObject({ effect: 'ask', reason: expect.stringContaining('`-exec`') });
    expect(lines[2]).toMatchObject({ command: 'find . -exec rm {} \\;', effect: 'ask', reason: expect.stringContaining('`find . -exec rm {} \\;`') });
    expect(lines[3]).toMatchObject({ command: 'curl x', effect: 'deny' });
    expect(lines[4]).toMatchObject({ line: 6, error: expect.stringContaining('"command"') });
    expect(r.code).toBe(1);
    expect(lemniWithInput('ls', 'policy', 'explain', policy, '--batch').code).toBe(2);
  });

  it('explain shows the option that changed a decision, and the command as typed', () => {
    const policy = file('recommended2.yaml', lemni('policy', 'init', '--recommended').stdout);
    const r = lemni('policy', 'explain', policy, '--json', '--', 'pytest --basetemp=/');
    expect(JSON.parse(r.stdout)).toMatchObject({ effect: 'ask', rule: expect.stringMatching(/^commands\.free\[\d+\]$/), reason: expect.stringContaining('`--basetemp=/`') });
    expect(Object.keys(JSON.parse(r.stdout) as object)).toEqual(['effect', 'rule', 'reason', 'thirdParty']);
  });
});
