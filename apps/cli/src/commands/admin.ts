import { DrainExecHostRequest, ExecHostId } from '@lemniscate/contracts';
import { Command } from 'commander';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';
import { describeDrain, describeUndrain, renderExecHosts } from '../output/exec-hosts';

type Done = (code: Promise<number>) => void;

/** The id as the gateway's routes take it; anything else is refused here, with what an id looks like. */
function hostId(value: string | undefined, command: string): string {
  if (value === undefined) return fail(`Name the exec-host: \`lemni admin exec-hosts ${command} ID\` (\`lemni admin exec-hosts list\` shows the ids).`);
  if (ExecHostId.safeParse(value).success) return value;
  return fail(
    `"${value.slice(0, 80)}" is not an exec-host id: an id is a lower-case DNS name (labels of letters, digits or "-", not at either end, joined by ".") (\`lemni admin exec-hosts list\` shows them).`,
  );
}

function fail(message: string): never {
  throw new CliError(message, 'usage');
}

function drainReason(reason: string | undefined): string | undefined {
  if (reason === undefined) return undefined;
  const parsed = DrainExecHostRequest.safeParse({ reason });
  if (!parsed.success) return fail(reason.trim() === '' ? '--reason is empty: say why the host is drained, or leave the option out.' : '--reason is longer than 500 characters.');
  return parsed.data.reason;
}

export function registerAdmin(program: Command, ctx: CliContext, done: Done): void {
  const admin = program.command('admin').description('operate the platform (administrators; security officers may read)');
  const hosts = admin
    .command('exec-hosts')
    .description('the exec-hosts sessions run on: list them, drain one for maintenance, undrain it')
    .addHelpText('after', '\nExamples:\n  $ lemni --profile admin admin exec-hosts list\n  $ lemni --profile admin admin exec-hosts drain exec-host-2 --reason "kernel upgrade"');

  hosts
    .command('list')
    .description('list the exec-hosts (administrators and security officers): state, address, runtimes, live sessions over capacity, load, last heartbeat, who drained them and why')
    .option('--json', "print the gateway's answer (ExecHostView[]) as JSON")
    .addHelpText('after', '\nExamples:\n  $ lemni admin exec-hosts list\n  $ lemni admin exec-hosts list --json')
    .action((opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const list = await client.listExecHosts();
          ctx.stdout(opts.json ? `${JSON.stringify(list)}\n` : renderExecHosts(list, Date.now()));
          return EXIT_OK;
        })(),
      ),
    );

  hosts
    .command('drain [id]')
    .description('drain an exec-host (administrators): no new session is placed on it, its live sessions finish; audited')
    .option('--reason <text>', 'why: recorded in the audit log and shown on the host')
    .option('--json', "print the host's view (ExecHostView) as JSON")
    .addHelpText('after', '\nExample:\n  $ lemni --profile admin admin exec-hosts drain exec-host-2 --reason "kernel upgrade"')
    .action((id: string | undefined, opts: { reason?: string; json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const host = hostId(id, 'drain');
          const reason = drainReason(opts.reason);
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const view = await client.drainExecHost(host, reason);
          ctx.stdout(opts.json ? `${JSON.stringify(view)}\n` : describeDrain(view, Date.now()));
          return EXIT_OK;
        })(),
      ),
    );

  hosts
    .command('undrain [id]')
    .description('undrain an exec-host (administrators): sessions may be placed on it again; audited')
    .option('--json', "print the host's view (ExecHostView) as JSON")
    .addHelpText('after', '\nExample:\n  $ lemni --profile admin admin exec-hosts undrain exec-host-2')
    .action((id: string | undefined, opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const host = hostId(id, 'undrain');
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const view = await client.undrainExecHost(host);
          ctx.stdout(opts.json ? `${JSON.stringify(view)}\n` : describeUndrain(view, Date.now()));
          return EXIT_OK;
        })(),
      ),
    );
}
