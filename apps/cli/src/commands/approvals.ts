import type { ApprovalView } from '@lemniscate/contracts';
import { Command } from 'commander';
import { connect, globalFlags, page, type CliContext } from '../context';
import { EXIT_OK } from '../errors';
import { colourDiff } from '../output/render';
import { shortId, shorten, table, TABLE_WIDTH } from '../output/table';

type Done = (code: Promise<number>) => void;

export function subjectOf(a: ApprovalView): string {
  const p = a.payload;
  if ('command' in p) return p.command;
  if ('diff' in p) return p.files && p.files.length > 0 ? p.files.join(', ') : `diff of ${p.diff.split('\n').length} lines`;
  if ('question' in p) return `? ${p.question}`;
  return `+${p.amount} ${p.extension}`;
}

function showApproval(a: ApprovalView): string {
  const p = a.payload;
  const third = a.flags.thirdParty;
  const by = a.decidedByEmail ?? a.decidedBy;
  const decided = by !== null && a.state !== 'pending' ? ` by ${by}${a.decidedAt ? ` at ${a.decidedAt.slice(0, 19).replace('T', ' ')}` : ''}` : '';
  const lines = [`Approval ${a.id} (${a.kind}) from ${a.agent} in session ${a.sessionId}: ${a.state}${decided}`];
  if (a.reason) lines.push(`${a.state === 'expired' ? 'Expired' : 'Reason'}: ${a.reason}`);
  if (a.instruction) lines.push(`Instruction: ${a.instruction}`);
  // The rule once: most sentences already end with it.
  if (a.flags.policy) lines.push(`Why it asks: ${a.flags.policy.reason}${a.flags.policy.reason.includes(`(${a.flags.policy.rule})`) ? '' : ` (rule ${a.flags.policy.rule})`}`);
  if ('command' in p) lines.push(`$ ${p.command}`);
  else if ('diff' in p) lines.push(colourDiff(p.diff, new Set(third.map((t) => t.path))));
  else if ('question' in p) {
    lines.push(`Question: ${p.question}`);
    if (p.options.length > 0) lines.push(...p.options.map((o, i) => `  ${i + 1}. ${o}`));
    if (a.response !== null) lines.push(`Answer: ${a.response}`);
    else if (a.state === 'pending') lines.push(`Answer with \`lemni approvals approve ${a.id} --answer TEXT\` (an option's number picks it); \`reject\` declines.`);
  } else lines.push(`Extension: +${p.amount} ${p.extension}`);
  if (third.length > 0) lines.push(`THIRD-PARTY FILES: ${third.map((t) => `${t.path} (${t.class})`).join(', ')}`);
  for (const r of a.flags.reverted ?? []) lines.push(`Not offered, already reverted: ${r.path}: ${r.reason}`);
  return `${lines.join('\n')}\n`;
}

export function registerApprovals(program: Command, ctx: CliContext, done: Done): void {
  const approvals = program
    .command('approvals')
    .description('list pending approvals; `approve ID` or `reject ID` answers one')
    .option('--json', 'print JSON')
    .option('--session <id>', "only this session's approvals")
    .option('--wide', 'whole session ids and subjects, however wide the table')
    .addHelpText(
      'after',
      '\nSessions are shown by their first 8 characters (--wide: whole); approve, reject and show accept an approval id\'s first characters too.\n\nExamples:\n  $ lemni approvals\n  $ lemni approvals approve 01JD3X0B2C\n  $ lemni approvals reject 01JD3X0B2C --reason "touches CI"',
    )
    .action((opts: { json?: boolean; session?: string; wide?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const list = await client.listApprovals({ state: 'pending', sessionId: opts.session === undefined ? undefined : await client.sessionId(opts.session) });
          if (opts.json) ctx.stdout(`${JSON.stringify(list)}\n`);
          else if (list.length === 0) ctx.stdout('No pending approvals.\n');
          else {
            const wide = opts.wide === true;
            ctx.stdout(
              table(
                ['ID', 'KIND', 'AGENT', 'SESSION', 'THIRD-PARTY', 'SUBJECT'],
                list.map((a) => [a.id, a.kind, a.agent, shortId(a.sessionId, wide), a.flags.thirdParty.length > 0 ? 'YES' : '', wide ? subjectOf(a).replace(/\s+/g, ' ') : shorten(subjectOf(a), 70)]),
                wide ? undefined : TABLE_WIDTH,
              ),
            );
          }
          return EXIT_OK;
        })(),
      ),
    );
  approvals
    .command('show <id>')
    .description('show one approval with the exact command or the coloured diff (a long diff through $PAGER at a terminal)')
    .option('--no-pager', 'print a long diff straight to the terminal')
    .addHelpText('after', '\nExample:\n  $ lemni approvals show 01JD3X0B2C')
    .action((id: string, opts: { pager: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          await page(ctx, showApproval(await client.getApproval(id)), opts.pager);
          return EXIT_OK;
        })(),
      ),
    );
  approvals
    .command('approve <id>')
    .description("approve a pending command, write or extension, or answer an agent's question")
    .option('--remember', 'for a command: approve identical commands for the rest of the session (only if the policy allows it)')
    .option('--answer <text>', "for a question: the answer (an option's number picks that option)")
    .addHelpText('after', '\nExamples:\n  $ lemni approvals approve 01JD3X0B2C --remember\n  $ lemni approvals approve 01JD3X0B2D --answer "keep the old API"')
    .action((id: string, opts: { remember?: boolean; answer?: string }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          let response = opts.answer;
          if (response !== undefined && /^\d+$/.test(response.trim())) {
            // `--answer 2` picks the second option of the question, as `approvals show` numbers them.
            const asked = await client.getApproval(id);
            const options = 'question' in asked.payload ? asked.payload.options : [];
            const picked = options[Number(response.trim()) - 1];
            if (picked !== undefined) response = picked;
          }
          const a = await client.answerApproval(id, 'approve', { rememberCommand: opts.remember === true, ...(response !== undefined ? { response } : {}) });
          ctx.stdout(a.kind === 'question' ? `Answered ${a.id} (${shorten(subjectOf(a), 60)}): ${a.response ?? ''}\n` : `Approved ${a.id} (${a.kind}: ${shorten(subjectOf(a), 80)}).\n`);
          return EXIT_OK;
        })(),
      ),
    );
  approvals
    .command('reject <id>')
    .description('reject a pending command, write or extension (rejected writes never reach the working copy), or decline a question (the agent states its assumption)')
    .option('--reason <text>', 'told to the agent and recorded in the audit log')
    .addHelpText('after', '\nExample:\n  $ lemni approvals reject 01JD3X0B2C --reason "no changes to the CI configuration"')
    .action((id: string, opts: { reason?: string }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const a = await client.answerApproval(id, 'reject', opts.reason ? { reason: opts.reason } : {});
          ctx.stdout(`Rejected ${a.id} (${a.kind}: ${shorten(subjectOf(a), 80)}).\n`);
          return EXIT_OK;
        })(),
      ),
    );
}
