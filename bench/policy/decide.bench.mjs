// Benchmark of the policy engine's `decide` on shell commands (bench/README.md, "Policy").
// Build first: npx tsc -b libs/policy && node bench/policy/decide.bench.mjs [--json]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { decide, initPolicyEngine, parsePolicy, recommendedPolicy } = require('../../libs/policy/dist/index.js');

const RULES = 200;
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200_000);

// 200 rules: the recommended free and forbidden lists, padded with plausible project commands.
function policyOf200Rules() {
  const free = [...recommendedPolicy.commands.free];
  const forbidden = [...recommendedPolicy.commands.forbidden];
  for (let i = 0; free.length + forbidden.length < RULES; i++) {
    if (i % 4 === 3) forbidden.push(`blocked-tool-${i}`);
    else free.push(`npm run task-${i}`);
  }
  return parsePolicy({ version: 1, commands: { free, forbidden, default: 'ask', reapproval: 'exempt' } });
}

const TYPICAL = [
  'npm test',
  'npm test -- --ci --coverage',
  'npm run lint && npm run build',
  'npx tsc --noEmit',
  'pytest -q tests/unit',
  'go test ./... 2>&1 | tail -n 50',
  'cargo test --all',
  'ls -la src',
  'cat package.json',
  'git status',
  'git diff HEAD~1 -- src',
  'grep -rn "TODO" src | head -20',
  'curl https://example.com',
  'CI=1 npm test > /dev/null',
  "bash -c 'npm test && npm run lint'",
  'find . -name "*.ts" -exec wc -l {} \\;',
  'echo $(git rev-parse HEAD)',
  'npm test > report.txt',
  'timeout 60 make test',
  'sudo apt-get install -y jq',
  'git log --oneline -20',
  "sed -n '1,40p' src/index.ts",
  "awk '{ s += $2 } END { print s }' data",
  'go test -exec "sh -c id" ./...',
];

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function measure(commands, policy, iterations) {
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const call = { name: 'Bash', arguments: { command: commands[i % commands.length] } };
    const t0 = performance.now();
    decide(call, policy);
    samples[i] = (performance.now() - t0) * 1000;
  }
  const sorted = Array.from(samples).sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] };
}

function throughput(commands, policy, iterations) {
  const calls = commands.map((command) => ({ name: 'Bash', arguments: { command } }));
  const t0 = performance.now();
  for (let i = 0; i < iterations; i++) decide(calls[i % calls.length], policy);
  return iterations / ((performance.now() - t0) / 1000);
}

await initPolicyEngine();
const policy = policyOf200Rules();
// Warm-up: JIT and the parse cache, as in a gateway that has been running for a while.
measure(TYPICAL, policy, 20_000);
const warm = measure(TYPICAL, policy, ITERATIONS);
const rate = throughput(TYPICAL, policy, ITERATIONS);
// First sight of a command: a full bash parse (unique strings defeat the cache).
const unique = Array.from({ length: 5000 }, (_, i) => `${TYPICAL[i % TYPICAL.length]} # ${i}`);
const cold = measure(unique, policy, unique.length);

// `lemni policy explain FILE --json --batch`: the real bin, start-up included, on BATCH commands.
function batchRate(count) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-policy-'));
  try {
    const file = path.join(dir, 'policy.json');
    writeFileSync(file, JSON.stringify(recommendedPolicy));
    const input = Array.from({ length: count }, (_, i) => `${TYPICAL[i % TYPICAL.length]} # ${i % 500}`).join('\n');
    const bin = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../apps/cli/bin/lemni.js');
    const run = (text) => {
      const t0 = performance.now();
      const r = spawnSync(process.execPath, [bin, 'policy', 'explain', file, '--json', '--batch'], { input: text, encoding: 'utf8', maxBuffer: 1 << 28 });
      return { r, seconds: (performance.now() - t0) / 1000 };
    };
    const single = run('npm test').seconds;
    const { r, seconds } = run(input);
    const lines = r.stdout.split('\n').filter(Boolean).length;
    if (lines !== count) process.stderr.write(`batch: ${lines} of ${count} decisions (exit ${r.status}): ${r.stderr.slice(0, 300)}\n`);
    return lines === count ? { decisions: count, seconds, single, rate: count / seconds } : null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const BATCH = Number(process.env.BENCH_BATCH ?? 20_000);
const batch = process.argv.includes('--no-batch') ? null : batchRate(BATCH);

const result = {
  node: process.version,
  rules: policy.commands.free.length + policy.commands.forbidden.length,
  commands: TYPICAL.length,
  iterations: ITERATIONS,
  cachedP50Us: +warm.p50.toFixed(2),
  cachedP99Us: +warm.p99.toFixed(2),
  decisionsPerSecond: Math.round(rate),
  uncachedP50Us: +cold.p50.toFixed(2),
  uncachedP99Us: +cold.p99.toFixed(2),
  targetP99Us: 50,
  batchDecisions: batch?.decisions ?? null,
  batchSeconds: batch ? +batch.seconds.toFixed(2) : null,
  batchDecisionsPerSecond: batch ? Math.round(batch.rate) : null,
  batchOneCommandSeconds: batch ? +batch.single.toFixed(2) : null,
};

if (process.argv.includes('--json')) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  process.stdout.write(
    [
      `decide() on ${result.commands} typical commands, policy of ${result.rules} rules, ${result.iterations} decisions (${result.node})`,
      `  cached parse:   p50 ${result.cachedP50Us} µs   p99 ${result.cachedP99Us} µs   ${result.decisionsPerSecond.toLocaleString('en')} decisions/s`,
      `  first parse:    p50 ${result.uncachedP50Us} µs   p99 ${result.uncachedP99Us} µs`,
      batch
        ? `  lemni policy explain --json --batch: ${result.batchDecisions} commands (500 distinct) in ${result.batchSeconds} s, start-up included: ${result.batchDecisionsPerSecond.toLocaleString('en')} decisions/s (one command alone: ${result.batchOneCommandSeconds} s)`
        : '  lemni policy explain --batch: not measured (build the CLI first: npx tsc -b tsconfig.build.json)',
      `  target: p99 ≤ ${result.targetP99Us} µs (cached) — ${result.cachedP99Us <= result.targetP99Us ? 'met' : 'NOT met'}`,
      '',
    ].join('\n'),
  );
}
process.exitCode = result.cachedP99Us <= result.targetP99Us ? 0 : 1;
