import type { ExecStreamChunk } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { createExecHost, type ExecHost } from '../../src/app';
import { loadConfig, type ExecHostConfig } from '../../src/config';
import { DockerSandboxDriver, type DockerDriverOptions } from '../../src/driver/docker.driver';

export const TOKEN = 'medium-test-token-0123456789';

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.email=dev@example.test', '-c', 'user.name=Dev', ...args], {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, GIT_CONFIG_NOSYSTEM: '1' },
  });
}

/** A small repository with files that the default context exclusions must keep out of the sandbox. */
export function makeRepo(files: Record<string, string> = {}): { dir: string; head: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-repo-'));
  git(dir, 'init', '-q', '-b', 'main');
  const all: Record<string, string> = {
    'README.md': '# demo\n',
    'src/app.js': 'const a = 1;\nconst b = 2;\nconsole.log(a + b);\n',
    'src/util.js': 'export const twice = (x) => x * 2;\n',
    'notes.txt': 'alpha\nbeta\ngamma\nbeta\n',
    '.env': 'API_KEY=host-secret\n',
    'config/secrets/db.txt': 'password\n',
    'deploy/id_rsa': '-----BEGIN KEY-----\n',
    'certs/server.pem': 'cert\n',
    ...files,
  };
  for (const [name, content] of Object.entries(all)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'initial');
  return { dir, head: git(dir, 'rev-parse', 'HEAD').trim() };
}

export interface TestHost {
  host: ExecHost;
  config: ExecHostConfig;
  stateDir: string;
  api: () => request.Agent;
  close: () => Promise<void>;
}

/**
 * An exec-host in this process; its driver takes the cgroup layout from `env` as main.ts does, or
 * `driverOptions`; `Driver` may be a subclass of the Docker driver that watches or slows its calls.
 */
export async function startHost(env: Record<string, string> = {}, driverOptions: DockerDriverOptions = {}, Driver: typeof DockerSandboxDriver = DockerSandboxDriver): Promise<TestHost> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-exec-host-'));
  const config = loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: TOKEN, LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir, LEMNISCATE_EXEC_HOST_WARM_POOL: '0', ...env });
  const driver = new Driver({ cgroupLayout: config.cgroupLayout, runner: config.commandRunner, ...driverOptions });
  const host = await createExecHost(config, driver, { logger: false });
  await host.app.init();
  const server = host.app.getHttpServer();
  return {
    host,
    config,
    stateDir,
    api: () => request.agent(server).set('authorization', `Bearer ${TOKEN}`),
    close: async () => {
      await host.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

export function parseNdjson(text: string): ExecStreamChunk[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ExecStreamChunk);
}

/** Runs a command through the non-streaming form and returns its result body. */
export async function run(t: TestHost, id: string, command: string, timeoutMs?: number) {
  const res = await t
    .api()
    .post(`/v1/sandboxes/${id}/exec?stream=false`)
    .send({ command, ...(timeoutMs ? { timeoutMs } : {}) });
  if (res.status !== 200) throw new Error(`exec answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean; truncated: boolean; class: string | null; classes: string[]; message?: string; durationMs: number };
}

export function dockerInspectStatus(idOrName: string): string | null {
  try {
    return execFileSync('docker', ['inspect', '-f', '{{.State.Status}}', idOrName], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

export function containersOfSession(sessionId: string): string[] {
  return execFileSync('docker', ['ps', '-aq', '--filter', `label=lemniscate.session=${sessionId}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

export function mountedUnder(dir: string): string[] {
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.startsWith(dir));
}
