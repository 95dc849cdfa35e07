#!/usr/bin/env node
// `npm test`: set everything up, then run every tier — lint, unit, medium (real PostgreSQL, PGlite,
// Docker with runc and gVisor), end-to-end, faults, browser — and close with one "N passed, N failed" line.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { setup, ROOT } from './setup.mjs';
import pc from './lib/colors.mjs';
import { spawn } from 'node:child_process';
import { freePort } from './lib/ports.mjs';

/** `npm start` on free ports with a temporary home: demo users, project and CLI profiles included. */
async function startStack() {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-stack-'));
  const gatewayPort = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'scripts/start.mjs')], {
    cwd: ROOT,
    // The exec-host runs on its unix socket under the temporary home (npm start's default).
    env: { ...env, HOME: home, LEMNISCATE_GATEWAY_PORT: String(gatewayPort) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('Lemniscate is ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`npm start exited with ${code} before it was ready:\n${out}`)));
  });
  return {
    home,
    url: `http://127.0.0.1:${gatewayPort}`,
    repo: path.join(home, '.lemniscate/demo-repo'),
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => {
          fs.rmSync(home, { recursive: true, force: true });
          resolve();
        });
        child.kill('SIGINT');
      }),
  };
}

const { image, dockerfileImage } = await setup({ forTests: true });
// Plain output for every tier: picocolors turns colours on whenever CI or FORCE_COLOR is set.
// The attack battery runs on the sandbox images of both build routes (offline, and the Dockerfile).
const env = { ...process.env, LEMNISCATE_SANDBOX_IMAGE: image, LEMNISCATE_SANDBOX_IMAGE_DOCKERFILE: dockerfileImage, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NO_COLOR: '1' };
delete env.FORCE_COLOR;
const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-test-'));
const only = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const totals = { passed: 0, failed: 0, skipped: 0 };
const failedTiers = [];

function tier(name, cmd, args, { jestJson } = {}) {
  if (only.length && !only.includes(name)) return;
  process.stderr.write(`\n${pc.bold(`── ${name} ──`)}\n`);
  const started = Date.now();
  const r = spawnSync(cmd, args, { cwd: ROOT, env, stdio: 'inherit' });
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  if (jestJson && fs.existsSync(jestJson)) {
    const j = JSON.parse(fs.readFileSync(jestJson, 'utf8'));
    totals.passed += j.numPassedTests;
    totals.failed += j.numFailedTests;
    totals.skipped += j.numPendingTests + (j.numTodoTests ?? 0);
    if (j.numFailedTestSuites > 0 && j.numFailedTests === 0) totals.failed += j.numFailedTestSuites; // a suite that failed to load
  } else if (r.status === 0) {
    totals.passed += 1;
  } else {
    totals.failed += 1;
  }
  if (r.status !== 0) failedTiers.push(name);
  process.stderr.write(`${r.status === 0 ? pc.green('✔') : pc.red('✖')} ${name} (${secs} s)\n`);
}

function jest(name, project, extra = []) {
  const out = path.join(outDir, `${name}.json`);
  tier(name, 'npx', ['jest', '--selectProjects', project, '--passWithNoTests', '--ci', '--json', `--outputFile=${out}`, ...extra], { jestJson: out });
}

// The module-boundary rule reads Nx's project graph, which `nx show projects` computes first.
tier('lint', 'sh', ['-c', 'npx nx show projects > /dev/null && npx eslint . --max-warnings=0']);
// The build step type-checked the shipped code; this checks the console and every test, helper and benchmark (tsconfig.tests.json).
tier('typecheck', 'sh', ['-c', 'npm run typecheck -w @lemniscate/console && npx tsc -p tsconfig.tests.json']);
jest('unit', 'unit', ['--maxWorkers=2']);
jest('medium', 'medium', ['--maxWorkers=2']);
jest('e2e', 'e2e', ['--runInBand']);
jest('faults', 'faults', ['--runInBand']);
if (fs.existsSync(path.join(ROOT, 'apps/console/playwright.config.ts')) && (!only.length || only.includes('browser'))) {
  // The browser tests run against the whole platform as `npm start` runs it, in a home of its own.
  const stack = await startStack();
  try {
    Object.assign(env, { HOME: stack.home, LEMNISCATE_STACK_URL: stack.url, LEMNISCATE_DEMO_REPO: stack.repo });
    tier('browser', 'npx', ['playwright', 'test', '-c', 'apps/console/playwright.config.ts']);
  } finally {
    await stack.stop();
  }
}

fs.rmSync(outDir, { recursive: true, force: true });
process.stderr.write('\n');
if (failedTiers.length) process.stderr.write(pc.red(`Failed tiers: ${failedTiers.join(', ')}\n`));
process.stdout.write(`lemniscate: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`);
process.exit(failedTiers.length ? 1 : 0);
