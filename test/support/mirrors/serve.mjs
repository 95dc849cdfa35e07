#!/usr/bin/env node
// Runs the package mirrors until stopped: `node test/support/mirrors/serve.mjs [--host ADDRESS]`.
// Prints one JSON line on stdout once both answer ({ "ready": true, "npm", "pypi", … }), then waits
// for SIGINT/SIGTERM, or for its standard input to close when a parent process started it with a
// pipe (so the mirrors never outlive the test that started them). Verdaccio's log goes to stderr.
import { startMirrors } from './mirrors.mjs';

const args = process.argv.slice(2);
const hostAt = args.indexOf('--host');
const host = hostAt >= 0 ? args[hostAt + 1] : undefined;

let mirrors;
try {
  mirrors = await startMirrors({ host, log: (msg) => process.stderr.write(`mirrors: ${msg}\n`) });
} catch (err) {
  process.stderr.write(`mirrors: could not start: ${err?.stack ?? err}\n`);
  process.exit(1);
}
const { close, ...info } = mirrors;
process.stdout.write(JSON.stringify({ ready: true, ...info }) + '\n');

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  // Verdaccio keeps timers and upstream sockets of its own: leave once both servers are closed.
  const force = setTimeout(() => process.exit(0), 5000);
  force.unref();
  await close().catch(() => {});
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
if (!process.stdin.isTTY) {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
