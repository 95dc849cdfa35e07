// The demo that `npm start` sets up once and keeps: a sample repository with a failing test, the
// project `demo`, an administrator, a developer and a security officer, their API tokens in the CLI
// configuration (profiles developer — the default —, admin and security), and one scripted session
// that leaves an approval pending to look at. Everything goes through the gateway's public API.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { mustRun, run } from './sh.mjs';

export const HOME_DIR = path.join(os.homedir(), '.lemniscate');
const STATE = path.join(HOME_DIR, 'demo.json');
const CLI_CONFIG = path.join(HOME_DIR, 'config.yaml');

const password = () => crypto.randomBytes(18).toString('base64url');

/** The administrator the gateway creates at its first start; kept so later starts can sign in. */
export function demoAdmin() {
  const state = readState();
  if (!state.users?.admin) {
    state.users = { ...(state.users ?? {}), admin: { email: 'admin@lemniscate.local', password: password() } };
    writeState(state);
  }
  return state.users.admin;
}

function readState() {
  try {
    return JSON.parse(fs.readFileSync(STATE, 'utf8'));
  } catch {
    return {};
  }
}

function writeState(state) {
  fs.mkdirSync(HOME_DIR, { recursive: true, mode: 0o700 });
  fs.writeFileSync(STATE, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(STATE, 0o600);
}

/** A git repository made from scripts/demo/sample-repo, once; its history is the demo's base. */
export function ensureSampleRepository(root) {
  const repo = path.join(HOME_DIR, 'demo-repo');
  if (fs.existsSync(path.join(repo, '.git'))) return repo;
  fs.mkdirSync(repo, { recursive: true });
  fs.cpSync(path.join(root, 'scripts/demo/sample-repo'), repo, { recursive: true });
  const git = (...args) => mustRun('git', ['-C', repo, '-c', 'user.name=Lemniscate demo', '-c', 'user.email=demo@lemniscate.local', ...args], 'Could not create the demo repository', { quiet: true });
  git('init', '-q', '-b', 'main');
  // The .env file demonstrates context exclusions: it is committed here so the sandbox can leave it out.
  git('add', '-A', '-f');
  git('commit', '-q', '-m', 'Demo calculator with a failing test');
  return repo;
}

class Api {
  constructor(base, token) {
    this.base = base;
    this.token = token;
  }
  async call(method, route, body, { cookie, csrf, allow = [] } = {}) {
    const headers = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (cookie) headers.cookie = cookie;
    if (csrf) headers['x-csrf-token'] = csrf;
    const res = await fetch(`${this.base}/api/v1${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const json = text ? JSON.parse(text) : null;
    if (!res.ok && !allow.includes(res.status)) throw new Error(`${method} ${route} answered ${res.status}: ${json?.message ?? text}`);
    return { status: res.status, json, headers: res.headers };
  }
}

/** Signs in with a password and creates a personal API token (the only time it is shown). */
async function tokenFor(base, email, pass, name) {
  const api = new Api(base);
  const login = await api.call('POST', '/auth/login', { email, password: pass });
  const cookie = (login.headers.getSetCookie?.() ?? []).map((c) => c.split(';')[0]).join('; ');
  const created = await api.call('POST', '/auth/tokens', { name, expiresInDays: 366 }, { cookie, csrf: login.json.csrfToken });
  return created.json.token;
}

async function tokenWorks(base, token) {
  if (!token) return false;
  const r = await new Api(base, token).call('GET', '/auth/me', undefined, { allow: [401, 403] });
  return r.status === 200;
}

/**
 * Creates what is missing of the demo and returns the sign-ins to print. Idempotent: a second
 * start finds everything in place and changes nothing.
 */
export async function ensureDemo({ root, gatewayUrl, log }) {
  const state = readState();
  const admin = demoAdmin();
  if (!(await tokenWorks(gatewayUrl, admin.token))) {
    admin.token = await tokenFor(gatewayUrl, admin.email, admin.password, 'demo admin (npm start)');
    writeState({ ...state, users: { ...state.users, admin } });
  }
  const api = new Api(gatewayUrl, admin.token);
  const repo = ensureSampleRepository(root);

  const projects = (await api.call('GET', '/projects')).json;
  let project = projects.find((p) => p.name === 'demo');
  if (!project) {
    log('creating the demo project (lemni projects create)');
    // As an administrator would: with the CLI, the token in its environment (never on a command line).
    const created = run('node', [path.join(root, 'apps/cli/bin/lemni.js'), 'projects', 'create', 'demo', '--repo', repo, '--ref', 'main', '--json'], {
      env: { ...process.env, LEMNISCATE_GATEWAY: gatewayUrl, LEMNISCATE_TOKEN: admin.token },
    });
    if (!created.ok) throw new Error(`lemni projects create demo failed: ${(created.stderr || created.stdout).trim()}`);
    project = JSON.parse(created.stdout);
  }
  const versions = (await api.call('GET', `/projects/${project.id}/policy/versions`)).json;
  if (!versions.length) {
    const text = run('node', [path.join(root, 'apps/cli/bin/lemni.js'), 'policy', 'init', '--recommended']).stdout;
    await api.call('POST', `/projects/${project.id}/policy`, { sourceText: text, comment: 'Recommended policy for the demo (npm start)' });
  }

  const fresh = readState();
  const users = { ...fresh.users, admin };
  for (const [key, role, email, name] of [
    ['developer', 'developer', 'developer@lemniscate.local', 'Dana Developer'],
    ['security', 'security_officer', 'security@lemniscate.local', 'Sam Security'],
  ]) {
    const known = users[key];
    if (known && (await tokenWorks(gatewayUrl, known.token))) continue;
    const existing = (await api.call('GET', '/users')).json.find((u) => u.email === email);
    let pass = known?.password;
    if (!existing) {
      pass = password();
      log(`creating the demo ${role.replace('_', ' ')}`);
      await api.call('POST', '/users', { email, displayName: name, role, password: pass, projectIds: [project.id] });
    } else if (!pass) {
      throw new Error(`The demo user ${email} exists but its password is not in ${STATE}; remove ~/.lemniscate to start the demo afresh.`);
    }
    users[key] = { email, password: pass, token: await tokenFor(gatewayUrl, email, pass, `demo ${key} (npm start)`) };
  }
  writeState({ ...fresh, users, projectId: project.id, repository: repo });
  await writeCliConfig(gatewayUrl, users);

  if (!fresh.demoSessionId) {
    const script = path.join(root, 'scripts/demo/demo-session.json');
    const dev = new Api(gatewayUrl, users.developer.token);
    const session = (await dev.call('POST', '/sessions', { projectId: project.id, instruction: 'The average test fails. Find out why and fix it.', model: `scripted:${script}`, headless: true, waitForApprovals: true })).json;
    writeState({ ...readState(), demoSessionId: session.id });
    log(`demo session ${session.id} started; it waits for your approval of its fix`);
  }
  return { users, project, repo };
}

async function writeCliConfig(gatewayUrl, users) {
  // Merge into an existing configuration: the developer's own profiles stay as they are.
  const { parse, stringify } = await import('yaml');
  let config = {};
  try {
    config = parse(fs.readFileSync(CLI_CONFIG, 'utf8')) ?? {};
  } catch {
    config = {};
  }
  const profile = (u) => ({ gateway: gatewayUrl, token: u.token, project: 'demo' });
  config.profiles = { ...(config.profiles ?? {}), developer: profile(users.developer), admin: profile(users.admin), security: profile(users.security) };
  config.defaultProfile ??= 'developer';
  const text = `# Lemniscate CLI configuration. Holds API tokens: keep it private (mode 600).\n${stringify(config)}`;
  fs.mkdirSync(HOME_DIR, { recursive: true, mode: 0o700 });
  fs.writeFileSync(CLI_CONFIG, text, { mode: 0o600 });
  fs.chmodSync(CLI_CONFIG, 0o600);
}
