import { Command } from 'commander';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';
import { applyPatch, inspectCheckout } from '../git/git';

type Done = (code: Promise<number>) => void;

async function applySession(ctx: CliContext, typed: string, flags: Record<string, unknown>): Promise<number> {
  const checkout = await inspectCheckout(ctx.cwd);
  if (!checkout) throw new CliError('`lemni apply` runs inside the git checkout the patch is for; this directory is not in one.', 'git');
  const { client } = connect(ctx, globalFlags(flags));
  const session = await client.getSession(typed);
  const id = session.id;
  if (session.status === 'running') throw new CliError(`Session ${id} is still running; apply its patch once it has ended.`, 'conflict');
  if (!session.finalPatch || session.finalPatch.trim() === '') {
    ctx.stdout(`Session ${id} has no approved change; nothing to apply.\n`);
    return EXIT_OK;
  }
  const outcome = await applyPatch(checkout.root, session.finalPatch);
  if (!outcome.applied) throw new CliError(`${outcome.message}`, 'apply_conflict');
  ctx.stdout(`Applied the approved patch of session ${id} to ${checkout.root}: ${outcome.files.join(', ')}. Review it and commit under your name.\n`);
  return EXIT_OK;
}

export function registerApply(program: Command, ctx: CliContext, done: Done): void {
  program
    .command('apply <session>')
    .description("apply a session's approved patch to this git checkout with `git apply --3way`; on a conflict nothing is changed")
    .addHelpText('after', '\nExample:\n  $ lemni apply 01JD3W7Q8Z')
    .action((id: string, _opts: unknown, cmd: Command) => done(applySession(ctx, id, cmd.optsWithGlobals())));
}
