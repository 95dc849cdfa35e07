import { SESSION_MODE_LABELS, SessionStatus, type SessionView, type ToolCallView } from '@lemniscate/contracts';
import { Command, Option } from 'commander';
import pc from 'picocolors';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';
import { describeCall } from '../output/render';
import { count, shorten, table, TABLE_WIDTH } from '../output/table';
import { reconnectWindowMs } from '../gateway/event-stream';
import { followExisting } from '../session/follow';
import type { OutputFormat } from '../session/headless';
import { gatewaySessionApi } from '../session/session-api';

type Done = (code: Promise<number>) => void;

function statusOf(s: SessionView): string {
  return s.stopReason && s.stopReason !== s.status && s.status !== 'completed' ? `${s.status} (${s.stopReason})` : s.status;
}

function describeSession(s: SessionView, calls: ToolCallView[]): string {
  const lines = [
    `Session   ${s.id}`,
    `Status    ${statusOf(s)}`,
    `Agent     ${s.agent}${s.depth > 0 ? ` (subagent, depth ${s.depth}, parent ${s.parentSessionId ?? '?'})` : ''}`,
    `Project   ${s.projectId}`,
    `Started   ${s.startedAt}${s.endedAt ? `, ended ${s.endedAt}` : ''}`,
    `Actions   ${s.actionsUsed} used, ${count(s.extensionsUsed, 'extension')}`,
    `Base      ${s.baseCommit ?? 'unknown'}${s.branch ? ` on ${s.branch}` : ''}${s.includedUncommitted ? ', with uncommitted changes' : ''}`,
    `Mode      ${SESSION_MODE_LABELS[s.mode]} (${s.mode})`,
    `Tree      ${s.fingerprintStart ?? 'unknown'} at the start${s.endedAt ? `, ${s.fingerprintEnd === null ? 'unknown' : s.fingerprintEnd === s.fingerprintStart ? 'unchanged' : s.fingerprintEnd} at the end` : ''}`,
    '',
    'Instruction:',
    `  ${s.instruction.split('\n').join('\n  ')}`,
  ];
  if (calls.length > 0) {
    lines.push('', 'Tool calls:');
    for (const c of calls) {
      const d = c.decision ? `${c.decision.effect} (${c.decision.rule})` : 'no decision';
      lines.push(`  ${String(c.seq).padStart(3)}  ${describeCall(c.name, c.arguments)}  → ${d}`);
    }
  }
  if (s.summary) lines.push('', 'Summary:', `  ${s.summary.split('\n').join('\n  ')}`);
  lines.push(
    '',
    s.finalPatch ? `Approved patch: ${count(s.finalPatch.split('\n').filter((l) => l.startsWith('diff --git')).length, 'file')}; \`lemni apply ${s.id}\` applies it.` : 'No approved patch.',
  );
  return `${lines.join('\n')}\n`;
}

export function registerSessions(program: Command, ctx: CliContext, done: Done): void {
  const sessions = program
    .command('sessions')
    .description('list recent sessions you can see, newest first')
    .option('--json', 'print the sessions as a JSON array')
    .addOption(new Option('--status <status>', 'only sessions in this state').choices(SessionStatus.options))
    .option('--waiting', 'only sessions with an approval or question waiting for a person')
    .option('--mine', 'only the sessions you started (a developer only ever sees their own)')
    .option('--limit <n>', 'at most this many (1-500)', '30')
    .option('--wide', 'whole instructions, however wide the table')
    .addHelpText(
      'after',
      '\nInstructions are cut so that lines fit 100 columns (--wide: whole, with the year). A session waiting for a person says how many answers it awaits. Any command taking a session id accepts its first 8 characters.\n\nExamples:\n  $ lemni sessions\n  $ lemni sessions --waiting\n  $ lemni sessions --project demo --status running --mine --json',
    )
    .action((opts: { json?: boolean; status?: SessionStatus; waiting?: boolean; mine?: boolean; limit: string; wide?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const limit = Number(opts.limit);
          if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new CliError(`--limit must be a whole number from 1 to 500, not "${opts.limit}".`, 'usage');
          const { client, connection } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const flags = cmd.optsWithGlobals() as { project?: string };
          const projectId = flags.project ? (await client.projectByName(connection.project ?? flags.project)).id : undefined;
          const userId = opts.mine ? (await client.me()).user.id : undefined;
          const sessions = await client.listSessions({ projectId, status: opts.status, userId, waiting: opts.waiting ? 'true' : undefined, limit });
          if (opts.json) ctx.stdout(`${JSON.stringify(sessions)}\n`);
          else if (sessions.length === 0) ctx.stdout(opts.waiting ? 'No session is waiting for a person.\n' : 'No sessions.\n');
          else
            ctx.stdout(
              table(
                ['ID', 'STATUS', 'MODE', 'AGENT', 'ACTIONS', 'STARTED', 'INSTRUCTION'],
                sessions.map((s) => [
                  s.id,
                  s.pendingApprovals > 0 ? `${statusOf(s)}, ${s.pendingApprovals} waiting` : statusOf(s),
                  s.mode,
                  s.agent,
                  String(s.actionsUsed),
                  opts.wide ? s.startedAt.slice(0, 16).replace('T', ' ') : s.startedAt.slice(5, 16).replace('T', ' '),
                  opts.wide ? s.instruction.replace(/\s+/g, ' ').trim() : shorten(s.instruction, 60),
                ]),
                opts.wide ? undefined : TABLE_WIDTH,
              ),
            );
          return EXIT_OK;
        })(),
      ),
    );

  sessions
    .command('revoke <id>')
    .description('revoke a session (administrators): stopped within a second, audited, exit 3 for its headless run')
    .option('--reason <text>', 'recorded in the audit log')
    .addHelpText('after', '\nExample:\n  $ lemni --profile admin sessions revoke 01JD3W7Q8Z --reason "left the company"')
    .action((id: string, opts: { reason?: string }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const r = await client.revokeSession(id, opts.reason);
          ctx.stdout(
            `Session ${r.session.id} is ${statusOf(r.session)}: ${count(r.approvalsRejected, 'pending approval')} rejected, ${r.sandboxDestroyed ? 'sandbox destroyed' : `sandbox not destroyed yet${r.sandboxNote ? ` (${r.sandboxNote})` : ''}`}.\n`,
          );
          return EXIT_OK;
        })(),
      ),
    );

  const session = program.command('session').description('one session: `lemni session show ID`');
  session
    .command('show <id>')
    .description('show a session: status, stop reason, budget used, base commit, tool calls and decisions, summary')
    .option('--json', 'print {session, toolCalls} as JSON')
    .addHelpText('after', '\nExample:\n  $ lemni session show 01JD3W7Q8Z --json')
    .action((id: string, opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const s = await client.getSession(id);
          const calls = await client.toolCalls(s.id);
          ctx.stdout(opts.json ? `${JSON.stringify({ session: s, toolCalls: calls })}\n` : describeSession(s, calls));
          return EXIT_OK;
        })(),
      ),
    );

  session
    .command('follow <id>')
    .description('follow a session from its first event to its end, and exit as its run would: 0 completed, 1 failed, 3 stopped')
    .addHelpText(
      'after',
      '\nWith --output-format json (one object at the end) or stream-json (one event per line), as for `lemni -p`.\nFollowing changes nothing: Ctrl-C stops following, not the session (`lemni stop ID` stops it).\n\nExample:\n  $ lemni session follow 01JD3W7Q8Z --output-format json',
    )
    .action((id: string, _opts: unknown, cmd: Command) =>
      done(
        (async () => {
          // --output-format belongs to `lemni` itself (as for -p); it is read from there.
          const global = cmd.optsWithGlobals();
          const format = (global.outputFormat as OutputFormat | undefined) ?? 'text';
          const { client } = connect(ctx, globalFlags(global));
          const s = await client.getSession(id);
          const project = (await client.listProjects()).find((p) => p.id === s.projectId);
          const api = gatewaySessionApi(client, (attempt) => ctx.stderr(`Live events interrupted; reconnecting (attempt ${attempt})…\n`), reconnectWindowMs(ctx.env));
          return followExisting(api, s.id, project?.name ?? s.projectId, format, ctx);
        })(),
      ),
    );

  program
    .command('stop <id>')
    .description('stop a session now: its work is interrupted, unapproved writes rejected, its sandbox destroyed')
    .option('--reason <text>', 'recorded in the audit log')
    .addHelpText('after', '\nExample:\n  $ lemni stop 01JD3W7Q8Z --reason "wrong branch"')
    .action((id: string, opts: { reason?: string }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const r = await client.stopSession(id, opts.reason);
          ctx.stdout(
            `Session ${r.session.id} is ${statusOf(r.session)}: ${count(r.approvalsRejected, 'pending approval')} rejected, ${r.sandboxDestroyed ? 'sandbox destroyed' : pc.yellow(`sandbox not destroyed yet${r.sandboxNote ? ` (${r.sandboxNote})` : ''}`)}.\n`,
          );
          return EXIT_OK;
        })(),
      ),
    );
}
