import { runPolicyCommand } from '../../src/cli';
import { initPolicyEngine } from '../../src/shell/parser';

function run(args: string[], files: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = runPolicyCommand(args, {
    stdout: (s) => (stdout += s),
    stderr: (s) => (stderr += s),
    readFile: (p) => {
      const content = files[p];
      if (content === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
      return content;
    },
  });
  return { code, stdout, stderr };
}

beforeAll(async () => {
  await initPolicyEngine();
});

describe('runPolicyCommand', () => {
  it('init refuses unknown options', () => {
    expect(run(['init', '--fancy'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--fancy') });
  });

  it('check needs exactly one file', () => {
    expect(run(['check']).code).toBe(2);
    expect(run(['check', 'a', 'b']).code).toBe(2);
  });

  it('check reports a YAML syntax error with its line', () => {
    const r = run(['check', 'p.yaml'], { 'p.yaml': 'version: 1\ncommands: [\n' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/line \d+, column \d+/);
  });

  it('check says what is valid in one line', () => {
    const r = run(['check', 'p.yaml'], { 'p.yaml': 'version: 1\n' });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.split('\n').filter(Boolean)).toHaveLength(1);
  });

  it('explain reads a missing file as an error', () => {
    expect(run(['explain', 'nope.yaml', '--', 'ls'])).toMatchObject({ code: 1, stderr: expect.stringContaining('ENOENT') });
  });

  it('explain refuses unknown options and a missing file name', () => {
    expect(run(['explain', '--yaml', 'p.yaml', '--', 'ls']).code).toBe(2);
    expect(run(['explain', '--', 'ls']).code).toBe(2);
  });

  it('explain lists third-party files in text mode', () => {
    const r = run(['explain', 'p.yaml', '--', 'echo x > go.mod'], { 'p.yaml': 'version: 1\nthirdPartyFiles: {mode: approve}\n' });
    expect(r.stdout).toContain('third-party file: go.mod (manifests)');
  });

  it('no subcommand prints the usage', () => {
    expect(run([])).toMatchObject({ code: 2, stderr: expect.stringContaining('Usage:') });
  });
});
