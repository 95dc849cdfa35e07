import type { RepositoryAccess, RepositoryDirectory, SandboxInfo } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { makeBareRepository, startHttpsGitServer, startSshGitServer, type HttpsGitServer, type SshGitServer } from '../../../../test/support/git-servers';
import { run, startHost, type TestHost } from '../support/helpers';

/**
 * Repositories by URL (ADR 0012) against real git servers on this machine: `git http-backend` behind
 * HTTPS with basic authentication and a CA of its own, and OpenSSH's sshd with a host key and one
 * authorised client key. A sandbox's working copy and a directory read (the project's agents) come
 * from each with the project's access; every wrong part of the access (password, CA, host key, key)
 * is refused with the sentence that names it; the credential reaches neither the sandbox, nor the
 * exec-host's state, nor a file left behind.
 */
jest.setTimeout(300_000);

const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const AGENT = '---\ndescription: Reviews the change\nmode: all\ntools: [Read, List, Search]\n---\nYou review changes.\n';
const FILES = {
  'README.md': '# app\n',
  'src/main.js': 'console.log("hi");\n',
  '.lemniscate/agents/reviewer.md': AGENT,
  '.lemniscate/agents/notes.txt': 'not an agent\n',
  '.lemniscate/agents/huge.md': `---\ndescription: too big\n---\n${'x'.repeat(300 * 1024)}\n`,
  '.env': 'TOKEN=committed-by-mistake\n',
};

function otherKey(): { privateKey: string; knownHostsLine: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'other-key-'));
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'k')]);
  const privateKey = fs.readFileSync(path.join(dir, 'k'), 'utf8');
  const pub = fs.readFileSync(path.join(dir, 'k.pub'), 'utf8').trim().split(' ');
  fs.rmSync(dir, { recursive: true, force: true });
  return { privateKey, knownHostsLine: `${pub[0]} ${pub[1]}` };
}

function fetchDirsLeft(): string[] {
  return fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('lemniscate-fetch-'));
}

function grepTree(dir: string, needle: string): string[] {
  const found: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && fs.statSync(p).size < 64 * 1024 * 1024 && fs.readFileSync(p).includes(needle)) found.push(p);
    }
  };
  walk(dir);
  return found;
}

describe('repositories by URL, from real git servers', () => {
  let t: TestHost;
  let root: string;
  let https: HttpsGitServer;
  let ssh: SshGitServer;
  let httpsAccess: RepositoryAccess;
  let sshAccess: RepositoryAccess;
  const sandboxes: string[] = [];
  const fetchDirsBefore = new Set<string>();

  beforeAll(async () => {
    for (const d of fetchDirsLeft()) fetchDirsBefore.add(d);
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-git-servers-'));
    await makeBareRepository(path.join(root, 'app.git'), FILES, { branches: { release: { ...FILES, 'RELEASE.md': 'release\n' } } });
    https = await startHttpsGitServer({ root, username: 'ci-bot', password: PASSWORD });
    ssh = await startSshGitServer({ root });
    httpsAccess = { credential: { kind: 'https', username: 'ci-bot', password: PASSWORD }, caPem: https.caPem };
    sshAccess = { credential: { kind: 'ssh', privateKey: ssh.clientKey }, knownHosts: ssh.knownHosts };
    t = await startHost({ LEMNISCATE_SANDBOX_IMAGE: process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current' });
  });

  afterAll(async () => {
    for (const id of sandboxes) await t?.api().delete(`/v1/sandboxes/${id}`);
    await t?.close();
    await https?.close();
    await ssh?.close();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  const create = (source: string, access: RepositoryAccess | undefined, ref?: string) =>
    t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: randomUUID(), repository: { source, ...(ref ? { ref } : {}), ...(access ? { access } : {}) }, runtime: 'runc' });

  const transports = () =>
    [
      ['https', https.url('app.git'), httpsAccess],
      ['ssh', ssh.url('app.git'), sshAccess],
    ] as const;

  it.each(['https', 'ssh'] as const)('a sandbox gets its working copy over %s with the project access, at the default branch and at another', async (name) => {
    const [, url, access] = transports().find(([n]) => n === name)!;
    for (const ref of [undefined, 'release']) {
      const res = await create(url, access, ref);
      expect(res.status).toBe(201);
      const info = res.body as SandboxInfo;
      sandboxes.push(info.sandboxId);
      expect(info.branch).toBe(ref ?? 'main');
      const listing = await run(t, info.sandboxId, 'ls -A; cat README.md; test -e RELEASE.md && echo release-file || true');
      expect(listing.stdout).toContain('# app');
      expect(listing.stdout).toContain('src');
      expect(listing.stdout.includes('release-file')).toBe(ref === 'release');
      // The context exclusions hold for a fetched repository as for a local one.
      expect(listing.stdout).not.toMatch(/^\.env$/m);
    }
  });

  it('the credential reaches neither the sandbox, nor the exec-host state, nor a file left behind', async () => {
    for (const [, url, access] of transports()) {
      const res = await create(url, access);
      expect(res.status).toBe(201);
      const id = (res.body as SandboxInfo).sandboxId;
      sandboxes.push(id);
      // What the sandbox user can read where a credential could be left: its environment, every
      // process's command line and environment, its writable and configuration directories, the working copy
      // (the pattern is quoted in two halves, so the probe's own command line does not hold it).
      const probe = await run(
        t,
        id,
        `env; cat /proc/*/cmdline /proc/*/environ 2>/dev/null | tr '\\0' ' '; grep -rlsI -- '${PASSWORD.slice(0, 8)}''${PASSWORD.slice(8)}' /home /tmp /etc /var /run /root /opt /srv /workspace 2>/dev/null; echo END`,
        120_000,
      );
      expect(probe.stdout).toContain('END');
      expect(probe.stdout).not.toContain(PASSWORD);
      expect(probe.stdout).not.toContain('OPENSSH PRIVATE KEY');
      // The probe finds the secret where it is: planted in the sandbox's /tmp, it is reported.
      const planted = await run(t, id, `printf '%s' '${PASSWORD.slice(0, 8)}''${PASSWORD.slice(8)}' > /tmp/planted; grep -rlsI -- '${PASSWORD.slice(0, 8)}''${PASSWORD.slice(8)}' /tmp`);
      expect(planted.stdout.trim()).toBe('/tmp/planted');
    }
    const keyLine = ssh.clientKey.split('\n')[1]!;
    expect(grepTree(t.stateDir, PASSWORD).filter((f) => !f.includes('/workspace/'))).toEqual([]);
    expect(grepTree(t.stateDir, keyLine)).toEqual([]);
    expect(fetchDirsLeft().filter((d) => !fetchDirsBefore.has(d))).toEqual([]);
  });

  // Every part of the access made wrong in turn: refused before anything is created, with the
  // sentence that names the part, never with the secret in it.
  const other = otherKey();
  const wrong: [string, () => [string, RepositoryAccess | undefined], RegExp][] = [
    ['https, a wrong password', () => [https.url('app.git'), { ...httpsAccess, credential: { kind: 'https', username: 'ci-bot', password: 'wrong' } }], /refused the project's credential/],
    ['https, no credential', () => [https.url('app.git'), { caPem: https.caPem }], /refused the project's credential/],
    ['https, no CA', () => [https.url('app.git'), { credential: httpsAccess.credential! }], /TLS certificate is not trusted/],
    ['https, no access at all', () => [https.url('app.git'), undefined], /TLS certificate is not trusted|refused the project's credential/],
    ['https, a repository that does not exist', () => [https.url('missing.git'), httpsAccess], /cannot be read|not a git repository/],
    [
      'ssh, a host key that is not the server',
      () => [ssh.url('app.git'), { ...sshAccess, knownHosts: `${ssh.knownHosts.split(' ')[0]} ${other.knownHostsLine}` }],
      /host key is not among the project's known hosts/,
    ],
    ['ssh, a key the server does not know', () => [ssh.url('app.git'), { ...sshAccess, credential: { kind: 'ssh', privateKey: other.privateKey } }], /refused the project's key/],
    ['ssh, no key', () => [ssh.url('app.git'), { knownHosts: ssh.knownHosts }], /refused the project's key/],
    ['ssh, no known hosts', () => [ssh.url('app.git'), { credential: sshAccess.credential! }], /names no known host key/],
  ];
  it.each(wrong)('%s: refused with a sentence, nothing created', async (_name, make, sentence) => {
    const [url, access] = make();
    const before = fs.readdirSync(path.join(t.stateDir)).length;
    const res = await create(url, access);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('repository_not_found');
    expect(res.body.message).toMatch(sentence);
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD);
    expect(JSON.stringify(res.body)).not.toContain('PRIVATE KEY');
    expect(fs.readdirSync(path.join(t.stateDir)).length).toBe(before);
  });

  it.each(['https', 'ssh'] as const)('reads the agents directory over %s: regular .md files, the too-large one left out with its reason', async (name) => {
    const [, url, access] = transports().find(([n]) => n === name)!;
    const read = async (directory: string) => {
      const res = await t
        .api()
        .post('/v1/repository/directory')
        .send({ projectId: 'prj-url', repository: { source: url, ref: 'main', access }, directory, suffix: '.md' });
      expect(res.status).toBe(200);
      return res.body as RepositoryDirectory;
    };
    const agents = await read('.lemniscate/agents');
    expect(agents.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(agents.files).toEqual([{ name: 'reviewer.md', text: AGENT }]);
    expect(agents.skipped).toEqual([{ name: 'huge.md', reason: expect.stringMatching(/over the 262144-byte limit/) }]);
    // Read again: the same answer (kept by commit).
    expect(await read('.lemniscate/agents')).toEqual(agents);
    expect(await read('no/such/dir')).toEqual({ commit: agents.commit, files: [], skipped: [] });
  });

  it('a directory read with a wrong credential is refused with the sentence, and a path outside the repository is refused', async () => {
    const res = await t
      .api()
      .post('/v1/repository/directory')
      .send({
        projectId: 'p',
        repository: { source: https.url('app.git'), ref: 'main', access: { caPem: https.caPem, credential: { kind: 'https', username: 'ci-bot', password: 'nope' } } },
        directory: '.lemniscate/agents',
      });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/refused the project's credential/);
    for (const directory of ['../x', '/etc', '.lemniscate/../..']) {
      const bad = await t
        .api()
        .post('/v1/repository/directory')
        .send({ projectId: 'p', repository: { source: https.url('app.git'), ref: 'main', access: httpsAccess }, directory });
      expect(bad.status).toBe(400);
    }
  });

  it("the project's environment is read from a URL with its access", async () => {
    const res = await t
      .api()
      .post('/v1/environments/status')
      .send({ projectId: 'prj-url', repository: { source: https.url('app.git'), ref: 'main', access: httpsAccess }, runtime: 'runc', mirrors: [] });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('base');
  });

  it('the https server saw the credential only on requests for the repository, never in a URL', () => {
    expect(https.requests.length).toBeGreaterThan(0);
    expect(https.requests.some((r) => r.authorized)).toBe(true);
    expect(https.requests.every((r) => !r.path.includes(PASSWORD))).toBe(true);
  });
});
