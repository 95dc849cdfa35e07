import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const repo = path.resolve(__dirname, '../../../..');
const bin = path.join(repo, 'apps/cli/bin/lemni.js');

/** The bin runs the compiled CLI, as an installed `lemni` would; build it once per test file. */
export function buildCli(): void {
  // Test files run in parallel workers: one build at a time, so no bin is spawned from a half-written dist.
  const tsc = [process.execPath, path.join(repo, 'node_modules/typescript/bin/tsc'), '-b', 'apps/cli'];
  const lock = path.join(os.tmpdir(), 'lemniscate-cli-build.lock');
  const hasFlock = spawnSync('flock', ['--version']).status === 0;
  const [cmd, ...args] = hasFlock ? ['flock', lock, ...tsc] : tsc;
  const build = spawnSync(cmd as string, args, { cwd: repo, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`tsc -b apps/cli failed:\n${build.stdout}${build.stderr}`);
}

export interface BinResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface BinOptions {
  cwd?: string;
  env?: Record<string, string>;
  input?: string;
  /** Called with each complete stdout line as it arrives. */
  onLine?: (line: string, child: ChildProcess) => void;
  onStderr?: (text: string, child: ChildProcess) => void;
  /** Called once the process is started, before it prints anything (to signal it at any moment). */
  onSpawn?: (child: ChildProcess) => void;
}

/** Spawns the real `lemni` (asynchronously, so an in-process fake gateway can answer it). */
export function lemni(args: string[], options: BinOptions = {}): Promise<BinResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: options.cwd ?? repo,
      // A clean environment: nothing from the developer's own configuration leaks into a test.
      env: { PATH: process.env.PATH ?? '', HOME: options.env?.HOME ?? mkdtempSync(path.join(os.tmpdir(), 'lemni-home-')), NO_COLOR: '1', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    options.onSpawn?.(child);
    let stdout = '';
    let stderr = '';
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      pending += d.toString();
      let i: number;
      while ((i = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        options.onLine?.(line, child);
      }
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      options.onStderr?.(d.toString(), child);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

const gitEnv = { GIT_AUTHOR_NAME: 'Dev', GIT_AUTHOR_EMAIL: 'dev@example.org', GIT_COMMITTER_NAME: 'Dev', GIT_COMMITTER_EMAIL: 'dev@example.org' };

export function gitIn(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...gitEnv } });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** A repository with one commit holding `files`. */
export function makeRepo(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-repo-'));
  gitIn(dir, 'init', '-q', '-b', 'main');
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, name), content);
  gitIn(dir, 'add', '-A');
  gitIn(dir, 'commit', '-q', '-m', 'initial');
  return dir;
}
