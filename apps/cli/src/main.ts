import { Command, CommanderError } from 'commander';
import { registerAdmin } from './commands/admin';
import { registerAgents } from './commands/agents';
import { registerApply } from './commands/apply';
import { registerApprovals } from './commands/approvals';
import { registerAudit } from './commands/audit';
import { registerCompletion } from './commands/completion';
import { registerEnv } from './commands/env';
import { registerLogin } from './commands/login';
import { registerPolicy, runLocalPolicyCommand } from './commands/policy';
import { registerProjects } from './commands/projects';
import { registerRepository } from './commands/repository';
import { addRunOptions, runRoot, type RunFlags } from './commands/run';
import { registerSessions } from './commands/sessions';
import type { CliContext } from './context';
import { EXIT_FAILURE, EXIT_OK, isCliError } from './errors';
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
  addRunOptions(program);
  program.action((flags: RunFlags) => done(runRoot(ctx, flags)));
  registerLogin(program, ctx, done);
  registerProjects(program, ctx, done);
  registerSessions(program, ctx, done);
  registerApprovals(program, ctx, done);
  registerApply(program, ctx, done);
  registerAudit(program, ctx, done);
  registerPolicy(program, ctx, done);
  registerAgents(program, ctx, done);
  registerEnv(program, ctx, done);
  registerRepository(program, ctx, done);
  registerAdmin(program, ctx, done);
  registerCompletion(program, ctx, done);
  return program;
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
  };
}

if (require.main === module) {
  void main(process.argv.slice(2), processContext()).then((code) => {
    process.exitCode = code;
  });
}
