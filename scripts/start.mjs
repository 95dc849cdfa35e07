#!/usr/bin/env node
// `npm start`: set everything up, start the exec-host and the gateway in the foreground, print one
// "Lemniscate is ready" line once both answer, and stop everything it started on SIGINT/SIGTERM.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { setup, ROOT } from './setup.mjs';
import pc from './lib/colors.mjs';
import { waitFor } from './lib/sh.mjs';
import { demoAdmin, ensureDemo } from './lib/demo.mjs';

const { image } = await setup();

const gatewayPort = Number(process.env.LEMNISCATE_GATEWAY_PORT ?? 7070);
const execHostToken = process.env.LEMNISCATE_EXEC_HOST_TOKEN ?? crypto.randomBytes(32).toString('base64url');
const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
// The exec-host listens on a unix socket of mode 600 in its state directory (700): only this user
// reaches it, and no port is taken. LEMNISCATE_EXEC_HOST_PORT set explicitly keeps 127.0.0.1:PORT.
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const execHostStateDir = path.resolve(process.env.LEMNISCATE_EXEC_HOST_STATE_DIR ?? (isRoot ? '/var/lib/lemniscate/exec-host' : path.join(process.env.HOME ?? os.homedir(), '.lemniscate', 'exec-host')));
const execHostPort = process.env.LEMNISCATE_EXEC_HOST_PORT && !process.env.LEMNISCATE_EXEC_HOST_SOCKET ? Number(process.env.LEMNISCATE_EXEC_HOST_PORT) : null;
const execHostSocket = execHostPort === null ? (process.env.LEMNISCATE_EXEC_HOST_SOCKET ?? defaultSocket()) : null;
/** In the state directory; in a private directory under the system's temporary one when that path is too long for a socket (108 bytes). */
function defaultSocket() {
  const inState = path.join(execHostStateDir, 'exec-host.sock');
  if (Buffer.byteLength(inState) < 100) return inState;
  const dir = path.join(os.tmpdir(), `lemniscate-${process.getuid?.() ?? 'user'}`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return path.join(dir, 'exec-host.sock');
}
const execHostUrl = execHostSocket ? `unix:${execHostSocket}` : `http://127.0.0.1:${execHostPort}`;
const execHostListen = execHostSocket ? { LEMNISCATE_EXEC_HOST_SOCKET: execHostSocket } : { LEMNISCATE_EXEC_HOST_PORT: String(execHostPort) };

const admin = demoAdmin();
// The demo runs the scripted model, which a gateway answers only when its configuration says so.
const demoModels = path.join(ROOT, 'scripts/demo/models.yaml');
// Environment set-ups trust what this host trusts: on a network behind a TLS-intercepting proxy the
// host's bundle holds its CA, and the mirrors (registry.npmjs.org, …) are reached through it.
const hostCaBundle = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt'].find((f) => fs.existsSync(f));
const baseEnv = { ...(hostCaBundle ? { LEMNISCATE_EGRESS_CA_BUNDLE: hostCaBundle } : {}), LEMNISCATE_LOG_LEVEL: 'warn', LEMNISCATE_ADMIN_EMAIL: admin.email, LEMNISCATE_ADMIN_PASSWORD: admin.password, LEMNISCATE_MODELS_CONFIG: demoModels, ...process.env, LEMNISCATE_EXEC_HOST_TOKEN: execHostToken, LEMNISCATE_EXEC_HOST_STATE_DIR: execHostStateDir, ...execHostListen, LEMNISCATE_EXEC_HOST_URL: execHostUrl, LEMNISCATE_GATEWAY_PORT: String(gatewayPort), LEMNISCATE_SANDBOX_IMAGE: image };

const children = [];
let stopping = false;

function launch(name, script) {
  const child = spawn(process.execPath, [path.join(ROOT, script)], { cwd: ROOT, env: baseEnv, stdio: ['ignore', 'inherit', 'inherit'] });
  child.on('exit', (code, signal) => {
    if (stopping) return;
    process.stderr.write(pc.red(`\n${name} stopped unexpectedly (${signal ?? `exit ${code}`}); stopping Lemniscate.\n`));
    shutdown(1);
  });
  children.push({ name, child });
  return child;
}

function shutdown(code) {
  if (stopping) return;
  stopping = true;
  const alive = children.filter(({ child }) => child.exitCode === null && child.signalCode === null);
  for (const { child } of alive) child.kill('SIGTERM');
  const force = setTimeout(() => alive.forEach(({ child }) => child.kill('SIGKILL')), 10_000);
  force.unref();
  Promise.all(alive.map(({ child }) => new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r))))).then(() => {
    process.stderr.write('Lemniscate stopped.\n');
    process.exit(code);
  });
}
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));

async function answers(url, headers = {}) {
  try {
    const r = await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
    return r.ok;
  } catch {
    return false;
  }
}

/** The exec-host's health through its unix socket (fetch reaches none) or its port. */
function execHostAnswers() {
  if (!execHostSocket) return answers(`${execHostUrl}/v1/health`, { authorization: `Bearer ${execHostToken}` });
  return new Promise((resolve) => {
    const req = http.request({ socketPath: execHostSocket, path: '/v1/health', headers: { authorization: `Bearer ${execHostToken}` }, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

let demo;
try {
  launch('exec-host', 'apps/exec-host/bin/lemni-exec-host.js');
  await waitFor(execHostAnswers, { timeoutMs: 60_000, what: 'The exec-host' });
  launch('gateway', 'apps/gateway/bin/lemni-gateway.js');
  await waitFor(() => answers(`${gatewayUrl}/healthz`), { timeoutMs: 60_000, what: 'The gateway' });
  demo = await ensureDemo({ root: ROOT, gatewayUrl, log: (m) => process.stderr.write(`${pc.dim(`• ${m}`)}\n`) });
} catch (err) {
  process.stderr.write(pc.red(`\n✖ ${err.message}\n`));
  shutdown(1);
  await new Promise(() => {});
}

const u = demo.users;
process.stdout.write(
  [
    `Lemniscate is ready — console ${gatewayUrl}/ · API ${gatewayUrl}/api/v1 (docs ${gatewayUrl}/api/docs) · exec-host ${execHostUrl} (gateway only)`,
    `  sign in as administrator     ${u.admin.email}  /  ${u.admin.password}`,
    `  sign in as developer         ${u.developer.email}  /  ${u.developer.password}`,
    `  sign in as security officer  ${u.security.email}  /  ${u.security.password}`,
    `  demo project "demo" (${demo.repo}); a demo session waits for your approval in the console or with \`npx lemni approvals\``,
    `  CLI profiles developer (default), admin and security are in ~/.lemniscate/config.yaml: try \`npx lemni -p "run the tests" --model scripted:scripts/demo/demo-session.json\``,
    '',
  ].join('\n'),
);
