import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import { makeBareRepository, startHttpsGitServer, startSshGitServer, type HttpsGitServer, type SshGitServer } from '../support/git-servers';

/**
 * The git servers the platform's repository tests fetch from (test/support/git-servers), checked with plain git:
 * over https (git http-backend, basic authentication, the test CA) a clone with the right credentials works and one with
 * a wrong password or without the CA fails; HEAD is a symbolic ref to main; protocol v2, a shallow fetch of a branch and a
 * gzipped negotiation work; over ssh (sshd on a loopback port) the authorised key clones, a wrong host key or another client
 * key is refused, and the key runs nothing but git-upload-pack/git-receive-pack under the root. close() leaves no process.
 */

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

let work: string;
let root: string;
let home: string;
let httpsServer: HttpsGitServer;
let anonymousServer: HttpsGitServer;
let sshServer: SshGitServer;
let sshdDir: string;
let project: { path: string; commit: string };
let featureCommit: string;
let caFile: string;
let askpass: string;
let keyFile: string;
let knownHostsFile: string;
let clones = 0;

const USERNAME = 'project-reader';
const PASSWORD = 'correct horse battery staple';
const FILES = { 'README.md': '# Project\n', 'src/index.ts': 'export const answer = 42;\n' };
const FEATURE = { 'README.md': '# Project, feature branch\n', 'feature.txt': 'only on the feature branch\n' };

/** git (and ssh) with no configuration but what the test gives: no system config, HOME a temp dir, no agent, no prompts. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(GIT_|SSH_)/.test(k)));
  return { ...base, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', ...extra };
}

function run(cmd: string, args: string[], extraEnv: Record<string, string> = {}, cwd = work): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const git = (args: string[], extraEnv: Record<string, string> = {}, cwd = work) => run('git', args, extraEnv, cwd);
const dest = () => path.join(work, `clone-${++clones}`);
const gitOut = (dir: string, ...args: string[]) => execFileSync('git', ['-C', dir, ...args], { env: env(), encoding: 'utf8' }).trim();

const credentials = (password = PASSWORD) => ({ GIT_ASKPASS: askpass, TEST_GIT_USERNAME: USERNAME, TEST_GIT_PASSWORD: password, GIT_SSL_CAINFO: caFile });

function writePrivate(name: string, content: string): string {
  const file = path.join(work, name);
  fs.writeFileSync(file, content, { mode: 0o600 });
  return file;
}

function sshCommand(key: string, knownHosts: string): string {
  return `ssh -F /dev/null -i ${key} -o IdentitiesOnly=yes -o UserKnownHostsFile=${knownHosts} -o StrictHostKeyChecking=yes -o BatchMode=yes`;
}

/** A fresh ed25519 key pair: [private key file, public key line]. */
function otherKey(name: string): [string, string] {
  const file = path.join(work, name);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', file]);
  return [file, fs.readFileSync(`${file}.pub`, 'utf8').trim()];
}

/** Lines of `pgrep -af PATTERN` (none: pgrep exits 1). */
function pgrep(...args: string[]): string[] {
  try {
    return execFileSync('pgrep', args, { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-git-servers-test-'));
  root = path.join(work, 'repos');
  home = path.join(work, 'home');
  fs.mkdirSync(home);
  project = await makeBareRepository(path.join(root, 'project.git'), FILES, { branches: { feature: FEATURE } });
  featureCommit = execFileSync('git', ['--git-dir', project.path, 'rev-parse', 'refs/heads/feature'], { env: env(), encoding: 'utf8' }).trim();
  // Enough branches that the wants of a clone make a request body git sends gzipped (over 1 KB).
  const many = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`topic-${i}`, { 'topic.txt': `topic ${i}\n` }]));
  await makeBareRepository(path.join(root, 'many.git'), FILES, { branches: many });

  [httpsServer, anonymousServer, sshServer] = await Promise.all([
    startHttpsGitServer({ root, username: USERNAME, password: PASSWORD }),
    startHttpsGitServer({ root, username: USERNAME, password: PASSWORD, anonymous: true }),
    startSshGitServer({ root }),
  ]);
  caFile = path.join(work, 'ca.pem');
  fs.writeFileSync(caFile, httpsServer.caPem);
  askpass = path.join(work, 'askpass.sh');
  fs.writeFileSync(askpass, '#!/bin/sh\ncase "$1" in\n  Username*) printf \'%s\\n\' "$TEST_GIT_USERNAME" ;;\n  *) printf \'%s\\n\' "$TEST_GIT_PASSWORD" ;;\nesac\n', { mode: 0o755 });
  keyFile = writePrivate('client_key', sshServer.clientKey);
  knownHostsFile = writePrivate('known_hosts', `${sshServer.knownHosts}\n`);

  // The sshd serving this file's tests, found by its configuration's port, to check it is gone after close().
  const port = new URL(sshServer.url('x')).port;
  // sshd retitles itself "sshd: /usr/sbin/sshd -f <config> -D -e [listener] …".
  const configs = pgrep('-af', '/usr/sbin/sshd -f ').map((line) => / -f (\S+)/.exec(line)?.[1] ?? '');
  const config = configs.find((file) => fs.existsSync(file) && fs.readFileSync(file, 'utf8').includes(`Port ${port}\n`));
  expect(config).toBeDefined();
  sshdDir = path.dirname(config!);
});

afterAll(async () => {
  await Promise.all([httpsServer?.close(), anonymousServer?.close(), sshServer?.close()]);
  try {
    expect(pgrep('-f', sshdDir)).toEqual([]);
    expect(fs.existsSync(sshdDir)).toBe(false);
    expect(pgrep('-f', root)).toEqual([]);
    expect(pgrep('-P', String(process.pid), '-f', 'git-http-backend|upload-pack|receive-pack')).toEqual([]);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
});

describe('makeBareRepository', () => {
  it('makes a bare repository whose HEAD is main with the files, and the extra branch on top of it', () => {
    expect(gitOut(project.path, 'symbolic-ref', 'HEAD')).toBe('refs/heads/main');
    expect(gitOut(project.path, 'rev-parse', 'HEAD')).toBe(project.commit);
    expect(gitOut(project.path, 'ls-tree', '-r', '--name-only', 'main').split('\n')).toEqual(['README.md', 'src/index.ts']);
    expect(gitOut(project.path, 'ls-tree', '-r', '--name-only', 'feature').split('\n')).toEqual(['README.md', 'feature.txt']);
    expect(gitOut(project.path, 'rev-parse', 'feature^')).toBe(project.commit);
  });
});

describe('https', () => {
  it('clones with the right credentials given through GIT_ASKPASS and the test CA', async () => {
    const from = httpsServer.requests.length;
    const target = dest();
    const r = await git(['clone', '-q', httpsServer.url('project.git'), target], credentials());
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(fs.readFileSync(path.join(target, 'README.md'), 'utf8')).toBe(FILES['README.md']);
    expect(fs.readFileSync(path.join(target, 'src/index.ts'), 'utf8')).toBe(FILES['src/index.ts']);
    expect(gitOut(target, 'rev-parse', 'HEAD')).toBe(project.commit);
    const seen = httpsServer.requests.slice(from);
    // git asks anonymously first, is refused with the Basic challenge, then asks its askpass and retries.
    expect(seen[0]).toEqual({ method: 'GET', path: '/project.git/info/refs', authorized: false });
    expect(seen.filter((q) => q.authorized).map((q) => `${q.method} ${q.path}`)).toEqual(expect.arrayContaining(['GET /project.git/info/refs', 'POST /project.git/git-upload-pack']));
  });

  it('refuses a wrong password: git fails with an authentication error, the server saw only unauthorised requests', async () => {
    const from = httpsServer.requests.length;
    const r = await git(['clone', '-q', httpsServer.url('project.git'), dest()], credentials('wrong password'));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Authentication failed for/);
    const seen = httpsServer.requests.slice(from);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.every((q) => !q.authorized)).toBe(true);
  });

  it('fails on the certificate without the CA, before any request', async () => {
    const from = httpsServer.requests.length;
    const { GIT_SSL_CAINFO: _ca, ...noCa } = credentials();
    const r = await git(['clone', '-q', httpsServer.url('project.git'), dest()], noCa);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/SSL certificate problem|certificate verif/i);
    expect(httpsServer.requests.length).toBe(from);
  });

  it('shows HEAD as a symbolic ref to refs/heads/main', async () => {
    const r = await git(['ls-remote', '--symref', httpsServer.url('project.git')], credentials());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('ref: refs/heads/main\tHEAD\n');
    expect(r.stdout).toContain(`${project.commit}\tHEAD\n`);
    expect(r.stdout).toContain(`${project.commit}\trefs/heads/main\n`);
    expect(r.stdout).toContain(`${featureCommit}\trefs/heads/feature\n`);
  });

  it('speaks protocol v2 and v0', async () => {
    for (const version of ['2', '0']) {
      const target = dest();
      const r = await git(['-c', `protocol.version=${version}`, 'clone', '-q', httpsServer.url('project.git'), target], { ...credentials(), GIT_TRACE_PACKET: '1' });
      expect(r.code).toBe(0);
      if (version === '2') expect(r.stderr).toMatch(/< version 2/);
      else expect(r.stderr).not.toMatch(/< version 2/);
      expect(gitOut(target, 'rev-parse', 'HEAD')).toBe(project.commit);
    }
  });

  it('fetches one branch at depth 1', async () => {
    const target = dest();
    expect((await git(['init', '-q', target])).code).toBe(0);
    const r = await git(['fetch', '-q', '--depth=1', httpsServer.url('project.git'), 'feature'], credentials(), target);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(gitOut(target, 'rev-parse', 'FETCH_HEAD')).toBe(featureCommit);
    expect(gitOut(target, 'rev-list', '--count', 'FETCH_HEAD')).toBe('1');
    expect(fs.readFileSync(path.join(target, '.git/shallow'), 'utf8').trim()).toBe(featureCommit);
    expect(gitOut(target, 'show', 'FETCH_HEAD:feature.txt')).toBe(FEATURE['feature.txt'].trim());
  });

  it('takes a gzipped request body (a clone wanting many refs)', async () => {
    const target = dest();
    const r = await git(['clone', '-q', '--mirror', httpsServer.url('many.git'), target], { ...credentials(), GIT_TRACE_CURL: '1', GIT_TRACE_CURL_NO_DATA: '1' });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/Send header: Content-Encoding: gzip/i);
    expect(gitOut(target, 'for-each-ref', '--format=%(refname)', 'refs/heads/').split('\n')).toHaveLength(61);
  });

  it('takes a push with the credentials', async () => {
    const target = dest();
    expect((await git(['clone', '-q', httpsServer.url('project.git'), target], credentials())).code).toBe(0);
    fs.writeFileSync(path.join(target, 'pushed.txt'), 'pushed\n');
    const id = { GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@t.invalid', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@t.invalid' };
    expect((await git(['add', 'pushed.txt'], {}, target)).code).toBe(0);
    expect((await git(['commit', '-q', '-m', 'Pushed'], id, target)).code).toBe(0);
    const r = await git(['push', '-q', 'origin', 'HEAD:refs/heads/pushed'], credentials(), target);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(gitOut(project.path, 'rev-parse', 'refs/heads/pushed')).toBe(gitOut(target, 'rev-parse', 'HEAD'));
    execFileSync('git', ['--git-dir', project.path, 'update-ref', '-d', 'refs/heads/pushed'], { env: env() });
  });

  it('close() ends a request in progress and its http-backend', async () => {
    const server = await startHttpsGitServer({ root, username: USERNAME, password: PASSWORD });
    const req = https.request(`${server.url('project.git')}/git-upload-pack`, {
      method: 'POST',
      ca: server.caPem,
      auth: `${USERNAME}:${PASSWORD}`,
      headers: { 'Content-Type': 'application/x-git-upload-pack-request' },
    });
    const ended = new Promise<string>((resolve) => {
      req.once('error', (e) => resolve(e.message));
      req.once('response', (res) => (res.resume(), res.once('close', () => resolve('closed'))));
    });
    req.write('0032want '); // a body that never ends: the backend waits for the rest
    const deadline = Date.now() + 10_000;
    while (pgrep('-P', String(process.pid), '-f', 'git-http-backend').length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(pgrep('-P', String(process.pid), '-f', 'git-http-backend')).toHaveLength(1);
    await server.close();
    await ended;
    expect(pgrep('-P', String(process.pid), '-f', 'git-http-backend|upload-pack')).toEqual([]);
  });

  it('serves without credentials when anonymous', async () => {
    const target = dest();
    fs.writeFileSync(path.join(work, 'anonymous-ca.pem'), anonymousServer.caPem);
    const r = await git(['clone', '-q', anonymousServer.url('project.git'), target], { GIT_SSL_CAINFO: path.join(work, 'anonymous-ca.pem') });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(gitOut(target, 'rev-parse', 'HEAD')).toBe(project.commit);
    expect(anonymousServer.requests.every((q) => !q.authorized)).toBe(true);
  });
});

describe('ssh', () => {
  it('names the server by its url, known_hosts line and the client key fingerprint', () => {
    const port = new URL(sshServer.url('x')).port;
    expect(sshServer.url('project.git')).toBe(`ssh://${os.userInfo().username}@127.0.0.1:${port}${root}/project.git`);
    expect(sshServer.knownHosts).toMatch(new RegExp(`^\\[127\\.0\\.0\\.1\\]:${port} ssh-ed25519 AAAA[A-Za-z0-9+/=]+$`));
    const pub = path.join(work, 'client_key_derived.pub');
    fs.writeFileSync(pub, execFileSync('ssh-keygen', ['-y', '-f', keyFile], { encoding: 'utf8' }));
    expect(execFileSync('ssh-keygen', ['-lf', pub], { encoding: 'utf8' }).split(' ')[1]).toBe(sshServer.clientKeyFingerprint);
    expect(sshServer.clientKeyFingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
  });

  it('clones with the authorised key and the server in known_hosts, over protocol v2', async () => {
    const target = dest();
    const r = await git(['clone', '-q', sshServer.url('project.git'), target], { GIT_SSH_COMMAND: sshCommand(keyFile, knownHostsFile), GIT_TRACE_PACKET: '1' });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/< version 2/);
    expect(fs.readFileSync(path.join(target, 'README.md'), 'utf8')).toBe(FILES['README.md']);
    expect(gitOut(target, 'rev-parse', 'HEAD')).toBe(project.commit);
    const ls = await git(['ls-remote', '--symref', sshServer.url('project.git'), 'HEAD'], { GIT_SSH_COMMAND: sshCommand(keyFile, knownHostsFile) });
    expect(ls.stdout).toContain('ref: refs/heads/main\tHEAD\n');
  });

  it('takes a push with the key', async () => {
    const sshEnv = { GIT_SSH_COMMAND: sshCommand(keyFile, knownHostsFile) };
    const target = dest();
    expect((await git(['clone', '-q', sshServer.url('project.git'), target], sshEnv)).code).toBe(0);
    const id = { GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@t.invalid', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@t.invalid' };
    expect((await git(['commit', '-q', '--allow-empty', '-m', 'Pushed over ssh'], id, target)).code).toBe(0);
    const r = await git(['push', '-q', 'origin', 'HEAD:refs/heads/pushed-ssh'], sshEnv, target);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(gitOut(project.path, 'rev-parse', 'refs/heads/pushed-ssh')).toBe(gitOut(target, 'rev-parse', 'HEAD'));
    execFileSync('git', ['--git-dir', project.path, 'update-ref', '-d', 'refs/heads/pushed-ssh'], { env: env() });
  });

  it('close() ends a session in progress and its git-upload-pack', async () => {
    const server = await startSshGitServer({ root });
    const key = writePrivate('second_client_key', server.clientKey);
    const hosts = writePrivate('second_known_hosts', `${server.knownHosts}\n`);
    const port = new URL(server.url('x')).port;
    const repo = `${root}/project.git`;
    // git-upload-pack (protocol v0) advertises its refs, then waits for the client's wants on the open stdin.
    const client = spawn('ssh', [...sshCommand(key, hosts).split(' ').slice(1), '-p', port, `${os.userInfo().username}@127.0.0.1`, `git-upload-pack '${repo}'`], {
      env: env(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => client.once('close', (code) => resolve(code)));
    await new Promise<void>((resolve) => client.stdout.once('data', () => resolve()));
    expect(pgrep('-f', `upload-pack ${repo}`)).toHaveLength(1);
    await server.close();
    expect(await exited).not.toBe(0);
    expect(pgrep('-f', `upload-pack ${repo}`)).toEqual([]);
  });

  it('fails host key verification against another key in known_hosts', async () => {
    const [, otherHost] = otherKey('other_host_key');
    const wrong = writePrivate('wrong_known_hosts', `[127.0.0.1]:${new URL(sshServer.url('x')).port} ${otherHost.split(' ').slice(0, 2).join(' ')}\n`);
    const r = await git(['clone', '-q', sshServer.url('project.git'), dest()], { GIT_SSH_COMMAND: sshCommand(keyFile, wrong) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Host key verification failed/);
  });

  it('refuses another client key', async () => {
    const [other] = otherKey('other_client_key');
    const r = await git(['clone', '-q', sshServer.url('project.git'), dest()], { GIT_SSH_COMMAND: sshCommand(other, knownHostsFile) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Permission denied \(publickey\)/);
  });

  it('runs no shell command, no shell, and no git outside the root', async () => {
    const port = new URL(sshServer.url('x')).port;
    const ssh = (...command: string[]) => run('ssh', [...sshCommand(keyFile, knownHostsFile).split(' ').slice(1), '-p', port, `${os.userInfo().username}@127.0.0.1`, ...command]);
    for (const command of [['id'], [], ['git-upload-pack', "'/etc'"], ['git-upload-pack', `'${root}/../repos/project.git'`], ['git-upload-pack', `'${root}/project.git'; id`]]) {
      const r = await ssh(...command);
      expect({ command, code: r.code, stdout: r.stdout }).toEqual({ command, code: 1, stdout: '' });
      expect(r.stderr).toContain('This key may only fetch from and push to git repositories under');
    }
    // The same key, the same way, runs git-upload-pack of a repository under the root (it advertises main, then waits for a flush).
    const ok = await run('sh', ['-c', `printf 0000 | ${sshCommand(keyFile, knownHostsFile)} -p ${port} ${os.userInfo().username}@127.0.0.1 "git-upload-pack '${root}/project.git'"`]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`${project.commit} HEAD`);
  });
});
