import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import { registerAdmin } from './commands/admin';
import { registerAgents } from './commands/agents';
import { registerApply } from './commands/apply';
import { registerApprovals } from './commands/approvals';
import { registerAudit } from './commands/audit';
import { registerCompletion } from './commands/completion';
import { registerEnv } from './commands/env';
import { registerLogin } from './commands/login';
import { registerMcp } from './commands/mcp';
import { registerPolicy, runLocalPolicyCommand } from './commands/policy';
import { registerProjects } from './commands/projects';
import { registerRepository } from './commands/repository';
import { addRunOptions, runRoot, type RunFlags } from './commands/run';
import { registerSessions } from './commands/sessions';
import type { CliContext } from './context';
import { extractTraceContext, SpanKind, startTracing, TracingConfigError, withSpan, type Tracing } from '@lemniscate/telemetry';
import { CliError, EXIT_FAILURE, EXIT_OK, isCliError } from './errors';
import { terminalPrompter } from './interactive/terminal-prompter';

const ROOT_HELP = `
Examples:
  $ lemni                                   interactive: type instructions, approve commands and diffs
  $ lemni -p "make the tests pass" --output-format json
  $ lemni -p "fix the lint errors" --project demo --no-apply
  $ lemni --profile admin policy publish policy.yaml --project demo

Exit codes: 0 the session completed, 1 a crash or an unusable invocation, 3 a guardrail stopped it
(limit, loop, revocation, stop, refusal). Environment: LEMNISCATE_GATEWAY, LEMNISCATE_TOKEN,
LEMNISCATE_PROFILE, LEMNISCATE_PROJECT, LEMNISCATE_SESSION_*. Configuration: ~/.lemniscate/config.yaml.`;

function buildProgram(ctx: CliContext, done: (code: Promise<number>) => void): Command {
  const program = new Command('lemni')
    .description("Run AI coding agents under your administrator's policy: every command and every write is approved by a person.")
    .option('--profile <name>', 'use this profile of ~/.lemniscate/config.yaml')
    .option('--gateway <url>', 'the gateway URL (overrides LEMNISCATE_GATEWAY and the profile)')
    .option('--token <token>', 'an API token (overrides LEMNISCATE_TOKEN and the profile)')
    .configureOutput({ writeOut: (s) => ctx.stdout(s), writeErr: (s) => ctx.stderr(s) })
    .exitOverride()
    .showSuggestionAfterError(true)
    .addHelpText('after', ROOT_HELP);
  program.version(`lemni ${cliVersion()}`, '-V, --version', 'print the version and exit');
  addRunOptions(program);
  program.action((flags: RunFlags, cmd: Command) => done(cmd.args.length > 0 ? Promise.reject(notACommand(cmd)) : runRoot(ctx, flags)));
  registerLogin(program, ctx, done);
  registerProjects(program, ctx, done);
  registerSessions(program, ctx, done);
  registerApprovals(program, ctx, done);
  registerApply(program, ctx, done);
  registerAudit(program, ctx, done);
  registerPolicy(program, ctx, done);
  registerAgents(program, ctx, done);
  registerMcp(program, ctx, done);
  registerEnv(program, ctx, done);
  registerRepository(program, ctx, done);
  registerAdmin(program, ctx, done);
  registerCompletion(program, ctx, done);
  // Words that are not a command would otherwise be "too many arguments": say what was meant instead.
  // Set after the commands are made, so that they keep refusing arguments they do not take.
  program.allowExcessArguments(true);
  return program;
}

/** The CLI's version, from its package.json beside dist/. */
function cliVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Edit distance counting a swap of two neighbouring letters as one edit, for "did you mean". */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number) => (d[i] as number[])[j] as number;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}

function notACommand(program: Command): CliError {
  const word = program.args[0] as string;
  const names = program.commands.flatMap((c) => [c.name(), ...c.aliases()]).filter((n) => n !== 'help');
  const close = names
    .map((n) => ({ n, d: distance(word.toLowerCase(), n) }))
    .filter(({ n, d }) => d <= Math.max(1, Math.floor(n.length / 3)))
    .sort((x, y) => x.d - y.d)[0];
  if (close) return new CliError(`lemni: unknown command "${word}"; did you mean ${close.n}? (\`lemni --help\` lists the commands)`, 'usage');
  if (/\s/.test(word) || program.args.length > 2)
    return new CliError(`lemni: "${program.args.join(' ')}" is not a command; to run an instruction headless, pass it to -p: lemni -p "${program.args.join(' ')}"`, 'usage');
  return new CliError(`lemni: unknown command "${word}" (\`lemni --help\` lists the commands; an instruction goes after -p).`, 'usage');
}

/** Runs the CLI and returns its exit code; never calls process.exit, so it can be tested in-process. */
export async function main(argv: string[], ctx: CliContext): Promise<number> {
  try {
    const local = await runLocalPolicyCommand(argv, ctx);
    if (local !== null) return local;
    let pending: Promise<number> | undefined;
    const program = buildProgram(ctx, (p) => (pending = p));
    try {
      await program.parseAsync(argv, { from: 'user' });
    } catch (error) {
      if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_OK : EXIT_FAILURE;
      throw error;
    }
    return pending ? await pending : EXIT_OK;
  } catch (error) {
    if (isCliError(error)) {
      // No session, so no result: stdout stays empty and the sentence goes to stderr.
      ctx.stderr(`${error.message}\n`);
      return error.exitCode;
    }
    const message = error instanceof Error ? error.message : String(error);
    ctx.stderr(`Unexpected error: ${message}\n`);
    if (ctx.env.LEMNISCATE_DEBUG && error instanceof Error && error.stack) ctx.stderr(`${error.stack}\n`);
    return EXIT_FAILURE;
  }
}

/** The commands a trace names (`lemni sessions`); anything else is the root command, a session run. */
const TRACED_COMMANDS = new Set(['login', 'projects', 'sessions', 'approvals', 'apply', 'audit', 'policy', 'agents', 'mcp', 'env', 'repository', 'admin', 'completion']);

/** The command of a command line, for its span's name: never an argument (an instruction may hold a secret). */
export function tracedCommand(argv: string[]): string {
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') break;
    if (word.startsWith('-')) {
      // An option's value is the next word unless it is given with `=`; flags without value are skipped alike.
      if (!word.includes('=') && !/^--(no-|help$|version$|json$)/.test(word)) i += 1;
      continue;
    }
    return TRACED_COMMANDS.has(word) ? word : 'run';
  }
  return 'run';
}

/**
 * main() inside the command's span when the environment names an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT):
 * continued from TRACEPARENT when a CI job sets it, carried to the gateway on every request, sent
 * before the process ends (bounded: a collector that is down delays the exit by at most 3 s). A
 * tracing setting that cannot work is said once and the command runs untraced.
 */
export async function runTraced(argv: string[], ctx: CliContext): Promise<number> {
  let tracing: Tracing;
  try {
    tracing = startTracing('lemni', ctx.env, { exportTimeoutMs: 3000, scheduledDelayMs: 500 });
  } catch (e) {
    if (!(e instanceof TracingConfigError)) throw e;
    ctx.stderr(`lemni: traces are off for this command: ${e.message}\n`);
    return main(argv, ctx);
  }
  if (!tracing.enabled) return main(argv, ctx);
  const parent = extractTraceContext({ traceparent: ctx.env.TRACEPARENT, tracestate: ctx.env.TRACESTATE });
  const command = tracedCommand(argv);
  const code = await withSpan(`lemni ${command}`, { kind: SpanKind.CLIENT, parent, attributes: { 'lemniscate.cli.command': command } }, async (span) => {
    const exit = await main(argv, ctx);
    span.setAttribute('process.exit.code', exit);
    return exit;
  });
  await tracing.shutdown().catch(() => undefined);
  return code;
}

/** The process around main(): real streams, real signals, real environment. */
export function processContext(): CliContext {
  const write = (stream: NodeJS.WriteStream) => (text: string) => void stream.write(text);
  return {
    env: process.env,
    cwd: process.cwd(),
    stdout: write(process.stdout),
    stderr: write(process.stderr),
    isTTY: process.stdin.isTTY === true && process.stdout.isTTY === true,
    onInterrupt(handler) {
      let count = 0;
      const onSignal = () => {
        count += 1;
        if (count === 1) return handler();
        // A second Ctrl-C must always get the person out, even if the gateway never answers.
        process.stderr.write('Leaving without waiting for the gateway to confirm the stop.\n');
        process.exit(EXIT_FAILURE);
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      return () => {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      };
    },
    async readStdin() {
      // Read as a stream: a synchronous read of a pipe fails with EAGAIN once it holds more than a buffer.
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
      return Buffer.concat(chunks).toString('utf8');
    },
    prompter: () => Promise.resolve(terminalPrompter(write(process.stdout))),
    fetch: globalThis.fetch,
    rows: process.stdout.rows,
    runPager: (command, text) =>
      new Promise((resolve) => {
        const pager = spawn('sh', ['-c', command], { stdio: ['pipe', 'inherit', 'inherit'], env: { LESS: 'FRX', ...process.env } });
        pager.on('error', () => resolve(false));
        // A pager quit before reading everything closes its input: not an error.
        pager.stdin.on('error', () => undefined);
        pager.on('close', (code) => resolve(code !== 127));
        pager.stdin.end(text);
      }),
  };
}

if (require.main === module) {
  void runTraced(process.argv.slice(2), processContext()).then((code) => {
    process.exitCode = code;
  });
}
