import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { transformFileSync } from '@swc/core';
import { gitText } from '../../../src/workspace/git';
import { currentLauncher, HelperLauncher, holdLauncher, LaunchError, launchHere, type LaunchRequest } from '../../../src/workspace/launcher';

jest.setTimeout(30_000);

const sh = (script: string, extra: Partial<LaunchRequest> = {}): LaunchRequest => ({
  file: '/bin/sh',
  args: ['-c', script],
  env: { PATH: '/usr/bin:/bin' },
  cwd: '/',
  input: '',
  timeoutMs: 10_000,
  ...extra,
});

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each([
  ['through the helper', () => new HelperLauncher()],
  ['from this process', () => ({ run: launchHere, close: () => undefined })],
])('launching a process %s', (_how, make) => {
  let launcher: ReturnType<typeof make>;
  beforeEach(() => (launcher = make()));
  afterEach(() => launcher.close());

  it('answers its exit code, its output and its errors, with the input it was given', async () => {
    const r = await launcher.run(sh('cat; echo out-line; echo err-line >&2; exit 7', { input: 'from stdin\n' }));
    expect(r).toEqual({ code: 7, stdout: Buffer.from('from stdin\nout-line\n'), stderr: Buffer.from('err-line\n') });
  });

  it('carries every byte of binary output and input', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const r = await launcher.run(sh('cat', { input: bytes }));
    expect(Buffer.compare(r.stdout, bytes)).toBe(0);
  });

  it('gives the process exactly the environment and directory of the request', async () => {
    const r = await launcher.run(sh('env | sort; pwd', { env: { PATH: '/usr/bin:/bin', ONLY_THIS: 'yes' }, cwd: '/tmp' }));
    const lines = r.stdout.toString().trim().split('\n');
    expect(lines.at(-1)).toBe('/tmp');
    // The shell adds PWD (and SHLVL, `_`); nothing of the test's own environment (HOME, USER, …) arrives.
    const names = lines.slice(0, -1).map((l) => l.split('=')[0]);
    expect(names.filter((n) => !['PWD', 'SHLVL', '_', 'OLDPWD'].includes(n!))).toEqual(['ONLY_THIS', 'PATH']);
  });

  it('kills a process that outlives its time limit (exit code -1)', async () => {
    const started = Date.now();
    const r = await launcher.run(sh('exec sleep 20', { timeoutMs: 300 }));
    expect(r.code).toBe(-1);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('answers many requests at once, each with its own output', async () => {
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => launcher.run(sh(`sleep 0.0${i % 5}; echo ${i}`))));
    expect(results.map((r) => r.stdout.toString().trim())).toEqual(Array.from({ length: 24 }, (_, i) => String(i)));
  });

  it('refuses a program that does not exist with the system code', async () => {
    const err = await launcher.run({ ...sh(''), file: '/nonexistent/program' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LaunchError);
    expect(err).toMatchObject({ code: 'ENOENT' });
  });
});

describe('the helper', () => {
  const SECRET = 'LEMNISCATE_EXEC_HOST_TOKEN';
  let launcher: HelperLauncher;
  beforeEach(() => {
    process.env[SECRET] = 'exec-host-secret-value';
    launcher = new HelperLauncher();
  });
  afterEach(() => {
    launcher.close();
    delete process.env[SECRET];
  });

  it('starts the processes itself (their parent is the helper, not this process) and holds nothing of this environment', async () => {
    const r = await launcher.run(sh('echo $PPID'));
    const helper = launcher.pid!;
    expect(helper).toBeGreaterThan(0);
    expect(helper).not.toBe(process.pid);
    expect(Number(r.stdout.toString().trim())).toBe(helper);
    const environ = readFileSync(`/proc/${helper}/environ`, 'utf8').split('\0').filter(Boolean);
    // PATH, and the two variables by which Node gives a child its IPC channel.
    expect(environ.map((e) => e.split('=')[0]).sort()).toEqual(['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'PATH']);
    expect(environ.join('\n')).not.toContain('exec-host-secret-value');
  });

  it('starts every process with the mask 022, whatever this process had when the helper was started', async () => {
    // The exec-host sets 0177 while it creates its socket; a helper started then kept it, and git
    // made the working copy's directories untraversable for the sandbox user.
    launcher.close();
    const previous = process.umask(0o177);
    try {
      launcher = new HelperLauncher();
      await launcher.run(sh('true'));
    } finally {
      process.umask(previous);
    }
    expect((await launcher.run(sh('umask'))).stdout.toString().trim()).toBe('0022');
  });

  it('lost while a process runs: that request is refused with a sentence, and the next one gets a new helper', async () => {
    await launcher.run(sh('true'));
    const first = launcher.pid!;
    const running = launcher.run(sh('sleep 5; echo late'));
    process.kill(first, 'SIGKILL');
    await expect(running).rejects.toThrow(/^The exec-host's process helper stopped \(SIGKILL\) while \/bin\/sh ran; it was not finished\.$/);
    const next = await launcher.run(sh('echo again'));
    expect(next.stdout.toString()).toBe('again\n');
    expect(launcher.pid).not.toBe(first);
  });

  it('ends with the process that started it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'launcher-'));
    try {
      // The launcher as the exec-host's build has it (plain CommonJS), in a parent of its own that
      // starts a helper, prints its pid and is then killed without any chance to stop it.
      const source = path.join(__dirname, '../../../src/workspace/launcher.ts');
      const compiled = transformFileSync(source, { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } }).code;
      writeFileSync(path.join(dir, 'launcher.js'), compiled);
      const script = `
        const { HelperLauncher } = require(${JSON.stringify(path.join(dir, 'launcher.js'))});
        const l = new HelperLauncher();
        l.run({ file: '/bin/true', args: [], env: {}, cwd: '/', input: '', timeoutMs: 5000 }).then(() => { console.log(l.pid); setInterval(() => {}, 1000); });
      `;
      const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      const helper = await new Promise<number>((resolve, reject) => {
        parent.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
        parent.once('exit', (code) => reject(new Error(`the parent ended first (${code})`)));
      });
      expect(helper).toBeGreaterThan(0);
      expect(alive(helper)).toBe(true);
      parent.kill('SIGKILL');
      await until(() => !alive(helper));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('git in the exec-host', () => {
  it('runs through the shared helper while an exec-host holds it, and from this process once the last one lets go', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'launcher-git-'));
    try {
      const releaseA = holdLauncher();
      const releaseB = holdLauncher();
      const shared = currentLauncher();
      expect(shared).toBeInstanceOf(HelperLauncher);
      expect(await gitText({ home }, ['--version'])).toMatch(/^git version /);
      expect((shared as HelperLauncher).pid).toBeGreaterThan(0);
      releaseA();
      releaseA();
      expect(currentLauncher()).toBe(shared);
      releaseB();
      expect(currentLauncher()).not.toBeInstanceOf(HelperLauncher);
      expect(await gitText({ home }, ['--version'])).toMatch(/^git version /);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
