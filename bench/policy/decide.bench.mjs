// Benchmark of the policy engine's `decide` on shell commands (bench/README.md, "Policy").
// Build first: npx tsc -b libs/policy && node bench/policy/decide.bench.mjs [--json]
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

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
};

if (process.argv.includes('--json')) {
  process.stdout.write(`${JSON.stringify(result)}\n`);
} else {
  process.stdout.write(
    [
      `decide() on ${result.commands} typical commands, policy of ${result.rules} rules, ${result.iterations} decisions (${result.node})`,
      `  cached parse:   p50 ${result.cachedP50Us} µs   p99 ${result.cachedP99Us} µs   ${result.decisionsPerSecond.toLocaleString('en')} decisions/s`,
      `  first parse:    p50 ${result.uncachedP50Us} µs   p99 ${result.uncachedP99Us} µs`,
      `  target: p99 ≤ ${result.targetP99Us} µs (cached) — ${result.cachedP99Us <= result.targetP99Us ? 'met' : 'NOT met'}`,
      '',
    ].join('\n'),
  );
}
process.exitCode = result.cachedP99Us <= result.targetP99Us ? 0 : 1;
