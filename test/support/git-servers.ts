import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { makeCertSet } from './certs';

/**
 * Real git servers on this machine for tests that fetch project repositories: `git http-backend`
 * behind a node HTTPS server with basic authentication, and OpenSSH's sshd on a loopback port that
 * lets one key run git-upload-pack and git-receive-pack under a root and nothing else.
 * sshd is Debian's openssh-server, which `npm run setup -- --tests` installs (scripts/lib/sshd.mjs).
 */

const execFileAsync = promisify(execFile);

const HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';
const SSHD = '/usr/sbin/sshd';

/** This process's environment without git's own variables, and git's configuration limited to what a test sets. */
function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GIT_')));
  return { ...env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', ...extra };
}

async function git(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await execFileAsync('git', args, { env: gitEnv(env), maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

// Fixed identity and dates: the same files make the same commit.
const COMMIT_ENV = {
  GIT_AUTHOR_NAME: 'Lemniscate Test',
  GIT_AUTHOR_EMAIL: 'test@lemniscate.invalid',
  GIT_AUTHOR_DATE: '2024-01-01T00:00:00Z',
  GIT_COMMITTER_NAME: 'Lemniscate Test',
  GIT_COMMITTER_EMAIL: 'test@lemniscate.invalid',
  GIT_COMMITTER_DATE: '2024-01-01T00:00:00Z',
};

/** Writes `files` (relative paths, `/`-separated) under `dir`. */
function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    const target = path.resolve(dir, name);
    if (path.isAbsolute(name) || !target.startsWith(dir + path.sep)) throw new Error(`"${name}" is not a relative path inside the repository.`);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content);
  }
}

/**
 * A bare repository made from files, with one commit on `branch` (default 'main', HEAD points at it). Extra branches optional:
 * each is one commit on top of the branch's, whose tree is exactly that branch's files. `dir` is where the bare repository is
 * made (created when missing). Commits carry a fixed author and date, so the same files give the same commit ids.
 */
export async function makeBareRepository(
  dir: string,
  files: Record<string, string>,
  options: { branch?: string; branches?: Record<string, Record<string, string>> } = {},
): Promise<{ path: string; commit: string }> {
  const bare = path.resolve(dir);
  const branch = options.branch ?? 'main';
  fs.mkdirSync(bare, { recursive: true });
  await git(['init', '-q', '--bare', '-b', branch, bare]);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-git-files-'));
  try {
    const commitTree = async (name: string, tree: Record<string, string>, message: string, parent?: string): Promise<string> => {
      const work = path.join(scratch, `tree-${name.replace(/[^A-Za-z0-9._-]/g, '_')}-${Math.random().toString(36).slice(2)}`);
      fs.mkdirSync(work);
      writeFiles(work, tree);
      const env = { ...COMMIT_ENV, GIT_INDEX_FILE: path.join(scratch, `index-${path.basename(work)}`) };
      await git(['--git-dir', bare, '--work-tree', work, 'add', '-A', '.'], env);
      const treeId = await git(['--git-dir', bare, 'write-tree'], env);
      const commit = await git(['--git-dir', bare, 'commit-tree', treeId, '-m', message, ...(parent ? ['-p', parent] : [])], env);
      await git(['--git-dir', bare, 'update-ref', `refs/heads/${name}`, commit], env);
      return commit;
    };
    const commit = await commitTree(branch, files, 'Initial commit');
    for (const [name, tree] of Object.entries(options.branches ?? {})) {
      if (name === branch) throw new Error(`The extra branch "${name}" is the repository's branch.`);
      await commitTree(name, tree, `The files of ${name}`, commit);
    }
    return { path: bare, commit };
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Every process below `pid` (Linux /proc), deepest first. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // pid (comm) state ppid …; comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      walk(c);
      out.push(c);
    }
  };
  walk(pid);
  return out;
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** Kills a child and everything under it, and waits until the child has exited. */
async function killTree(child: ChildProcess, graceMs = 2000): Promise<void> {
  if (child.pid === undefined) return;
  if (child.exitCode !== null || child.signalCode !== null) {
    for (const pid of descendants(child.pid)) kill(pid, 'SIGKILL');
    return;
  }
  const below = descendants(child.pid);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  kill(child.pid, 'SIGTERM');
  for (const pid of below) kill(pid, 'SIGKILL');
  const timer = setTimeout(() => kill(child.pid!, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  for (const pid of descendants(child.pid)) kill(pid, 'SIGKILL');
}

export interface HttpsGitServer {
  /** https://127.0.0.1:<port>/<name> for a bare repository at <root>/<name> */
  url(name: string): string;
  /** PEM of the CA that signed the server certificate (valid for 127.0.0.1 and localhost). */
  caPem: string;
  /** Every request: path (without the query), method, whether it carried the right credentials. */
  requests: { method: string; path: string; authorized: boolean }[];
  close(): Promise<void>;
}

/** Splits a CGI answer's header block into its status and headers. */
function parseCgiHeaders(block: string): { status: number; headers: Map<string, string[]> } {
  let status = 200;
  const headers = new Map<string, string[]>();
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]) || 500;
    else headers.set(name, [...(headers.get(name) ?? []), value]);
  }
  return { status, headers };
}

/**
 * `git http-backend` (/usr/lib/git-core/git-http-backend) run as CGI behind a node https server; every request must carry
 * basic auth username:password, else 401 with WWW-Authenticate. `anonymous: true` serves without authentication.
 * Pushes are accepted from authenticated requests (http-backend enables receive-pack when REMOTE_USER is set).
 */
export async function startHttpsGitServer(options: { root: string; username: string; password: string; anonymous?: boolean }): Promise<HttpsGitServer> {
  const root = path.resolve(options.root);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-git-https-'));
  const certs = makeCertSet(path.join(tmp, 'certs'), ['git-server']);
  const server = certs.hosts['git-server']!;
  const expected = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`;
  const requests: HttpsGitServer['requests'] = [];
  const backends = new Set<ChildProcess>();

  const httpsServer = https.createServer({ cert: server.certPem, key: server.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    const authorized = req.headers.authorization === expected;
    requests.push({ method: req.method ?? '', path: url.pathname, authorized });
    if (!authorized && !options.anonymous) {
      req.resume();
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"', 'Content-Type': 'text/plain' });
      res.end('Authentication required.\n');
      return;
    }
    let pathInfo: string;
    try {
      pathInfo = decodeURIComponent(url.pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : (v ?? '');
    };
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: tmp,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
      SERVER_SOFTWARE: 'lemniscate-test-git-server',
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: pathInfo,
      REQUEST_METHOD: req.method ?? 'GET',
      QUERY_STRING: url.search.replace(/^\?/, ''),
      CONTENT_TYPE: header('content-type'),
    };
    if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = header('content-length');
    if (req.headers['content-encoding'] !== undefined) env.HTTP_CONTENT_ENCODING = header('content-encoding');
    if (req.headers['git-protocol'] !== undefined) env.GIT_PROTOCOL = env.HTTP_GIT_PROTOCOL = header('git-protocol');
    if (authorized) {
      env.REMOTE_USER = options.username;
      env.AUTH_TYPE = 'Basic';
    }

    const child = spawn(HTTP_BACKEND, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    backends.add(child);
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    child.stdin!.on('error', () => undefined); // the backend may answer (an error) without reading the body
    req.pipe(child.stdin!);

    let head = Buffer.alloc(0);
    let headersSent = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (headersSent) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const text = head.toString('latin1');
      const crlf = text.indexOf('\r\n\r\n');
      const lf = text.indexOf('\n\n');
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? { at: crlf, len: 4 } : lf >= 0 ? { at: lf, len: 2 } : null;
      if (!end) return;
      const { status, headers } = parseCgiHeaders(text.slice(0, end.at));
      for (const [name, values] of headers) res.setHeader(name, values.length === 1 ? values[0]! : values);
      res.writeHead(status);
      headersSent = true;
      const rest = head.subarray(end.at + end.len);
      if (rest.length > 0) res.write(rest);
    });
    child.once('error', (err) => {
      backends.delete(child);
      if (res.writableEnded) return;
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(`git http-backend did not start: ${err.message}\n`);
    });
    child.once('close', (code) => {
      backends.delete(child);
      if (res.writableEnded) return;
      if (!headersSent) {
        if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(`git http-backend exited with ${code} before its headers: ${stderr}\n`);
        return;
      }
      res.end();
    });
    res.once('close', () => {
      if (child.exitCode === null && child.signalCode === null) void killTree(child);
    });
  });

  await new Promise<void>((resolve, reject) => {
    httpsServer.once('error', reject);
    httpsServer.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (httpsServer.address() as net.AddressInfo).port;

  let closed: Promise<void> | undefined;
  return {
    url: (name) => `https://127.0.0.1:${port}/${name}`,
    caPem: certs.caPem,
    requests,
    close: () =>
      (closed ??= (async () => {
        const stopped = new Promise<void>((resolve) => httpsServer.close(() => resolve()));
        httpsServer.closeAllConnections();
        await Promise.all([...backends].map((c) => killTree(c)));
        await stopped;
        fs.rmSync(tmp, { recursive: true, force: true });
      })()),
  };
}

export interface SshGitServer {
  /** ssh://<user>@127.0.0.1:<port><root>/<name> */
  url(name: string): string;
  /** One known_hosts line for this server: "[127.0.0.1]:<port> ssh-ed25519 AAAA…" */
  knownHosts: string;
  /** An OpenSSH private key (ed25519, no passphrase) authorised on the server. */
  clientKey: string;
  /** The public key's SHA256 fingerprint as ssh-keygen -lf prints it ("SHA256:…", without the size and comment around it). */
  clientKeyFingerprint: string;
  close(): Promise<void>;
}

/** A loopback port nothing listens on now (sshd binds it right after; a race is retried by the caller). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.setTimeout(1000, () => (s.destroy(), resolve(false)));
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

/** The command every session of the client key runs instead of its own: a git fetch or push of a repository under `root`. */
function gitOnlyScript(root: string, gitExecPath: string): string {
  return `#!/bin/sh
# Only "git-upload-pack '<path>'" or "git-receive-pack '<path>'" of a repository under the served root.
root='${root}'
exec_path='${gitExecPath}'
refuse() { echo "This key may only fetch from and push to git repositories under $root." >&2; exit 1; }
cmd=$SSH_ORIGINAL_COMMAND
case "$cmd" in
  "git-upload-pack '"*"'") verb=git-upload-pack ;;
  "git-receive-pack '"*"'") verb=git-receive-pack ;;
  *) refuse ;;
esac
repo=\${cmd#"$verb '"}
repo=\${repo%"'"}
case "$repo" in
  *"'"* | *..* | *"
"*) refuse ;;
  "$root"/*) ;;
  *) refuse ;;
esac
exec "$exec_path/$verb" "$repo"
`;
}

/**
 * A real OpenSSH server (/usr/sbin/sshd -D) on a free loopback port with a fresh host key and one authorised client key; only
 * git-upload-pack/git-receive-pack of repositories under `root` may run (the key is `restrict`ed with a command= that checks
 * SSH_ORIGINAL_COMMAND). The login user is whoever runs the tests. Its git runs without the system's or the user's git configuration.
 */
export async function startSshGitServer(options: { root: string }): Promise<SshGitServer> {
  if (!fs.existsSync(SSHD)) throw new Error(`${SSHD} is missing: install Debian's openssh-server (npm run setup -- --tests does).`);
  const root = path.resolve(options.root);
  if (/['"\s\\$`]/.test(root)) throw new Error(`The served root "${root}" has quotes, spaces or shell characters; choose a plain path.`);
  const user = os.userInfo().username;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-git-sshd-'));
  let sshd: ChildProcess | undefined;
  try {
    const keygen = (file: string, comment: string) => execFileAsync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file]);
    await Promise.all([keygen(path.join(tmp, 'host_key'), 'lemniscate-test-host'), keygen(path.join(tmp, 'client_key'), 'lemniscate-test-client')]);
    const hostPub = fs.readFileSync(path.join(tmp, 'host_key.pub'), 'utf8').trim().split(/\s+/).slice(0, 2).join(' ');
    const clientPub = fs.readFileSync(path.join(tmp, 'client_key.pub'), 'utf8').trim();
    const clientKey = fs.readFileSync(path.join(tmp, 'client_key'), 'utf8');
    const { stdout: lf } = await execFileAsync('ssh-keygen', ['-l', '-E', 'sha256', '-f', path.join(tmp, 'client_key.pub')]);
    const clientKeyFingerprint = lf.trim().split(/\s+/)[1] ?? '';
    if (!clientKeyFingerprint.startsWith('SHA256:')) throw new Error(`ssh-keygen -lf printed no SHA256 fingerprint: ${lf}`);

    const script = path.join(tmp, 'git-only.sh');
    const gitExecPath = (await execFileAsync('git', ['--exec-path'])).stdout.trim();
    if (/['"\s\\$`]/.test(gitExecPath)) throw new Error(`git's exec path "${gitExecPath}" has quotes, spaces or shell characters.`);
    fs.writeFileSync(script, gitOnlyScript(root, gitExecPath), { mode: 0o755 });
    fs.writeFileSync(path.join(tmp, 'authorized_keys'), `restrict,command="${script}" ${clientPub}\n`, { mode: 0o600 });
    // Privilege separation directory; Debian's service makes it, a machine that never ran the service may lack it.
    fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });

    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const config = path.join(tmp, 'sshd_config');
      fs.writeFileSync(
        config,
        [
          `Port ${port}`,
          'ListenAddress 127.0.0.1',
          `HostKey ${path.join(tmp, 'host_key')}`,
          `PidFile ${path.join(tmp, 'sshd.pid')}`,
          `AuthorizedKeysFile ${path.join(tmp, 'authorized_keys')}`,
          'StrictModes no',
          'AuthenticationMethods publickey',
          'PubkeyAuthentication yes',
          'PasswordAuthentication no',
          'KbdInteractiveAuthentication no',
          'HostbasedAuthentication no',
          'PermitRootLogin prohibit-password',
          'UsePAM no',
          `AllowUsers ${user}`,
          'AcceptEnv GIT_PROTOCOL',
          // SHLVL=1: bash runs the forced command without sourcing ~/.bashrc, which it does for sshd's top-level shells
          // (slow, and anything it prints would corrupt the git protocol).
          'SetEnv GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null SHLVL=1',
          'PermitUserEnvironment no',
          'PrintMotd no',
          'LoginGraceTime 30',
          'LogLevel VERBOSE',
          '',
        ].join('\n'),
      );
      const child = spawn(SSHD, ['-f', config, '-D', '-e'], { stdio: ['ignore', 'ignore', 'pipe'] });
      sshd = child;
      let log = '';
      child.stderr!.on('data', (d) => (log = (log + d).slice(-20_000)));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.once('error', () => undefined);
      let up = false;
      const deadline = Date.now() + 10_000;
      while (!up && Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
        up = /Server listening on 127\.0\.0\.1 port/.test(log) && (await accepts(port));
        if (!up) await new Promise((r) => setTimeout(r, 50));
      }
      if (up) {
        const server = child;
        let closed: Promise<void> | undefined;
        return {
          url: (name) => `ssh://${user}@127.0.0.1:${port}${root}/${name}`,
          knownHosts: `[127.0.0.1]:${port} ${hostPub}`,
          clientKey,
          clientKeyFingerprint,
          close: () =>
            (closed ??= (async () => {
              await killTree(server);
              await exited;
              fs.rmSync(tmp, { recursive: true, force: true });
            })()),
        };
      }
      await killTree(child);
      sshd = undefined;
      if (/Address already in use/i.test(log) && attempt < 5) continue;
      throw new Error(`sshd did not start on 127.0.0.1:${port}:\n${log}`);
    }
  } catch (err) {
    if (sshd) await killTree(sshd);
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}
