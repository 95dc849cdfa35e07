import type { PolicyDryRunChange, PolicyDryRunResponse } from '@lemniscate/contracts';
import { initPolicyEngine, runPolicyCommand } from '@lemniscate/policy';
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { connectToProject, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';
import { count, shorten, table } from '../output/table';

type Done = (code: Promise<number>) => void;

/** The `policy` subcommands that talk to the gateway and go through the option parser. */
const GATEWAY_SUBCOMMANDS = ['publish', 'dry-run', 'help'];

/** Global options that take a value and may come before `policy`. */
const VALUED_GLOBALS = ['--profile', '--gateway', '--token'];

/**
 * `policy init|check|explain` work on local files only and keep their exact argument syntax
 * (`explain FILE [--json] -- COMMAND`), so they go straight to libs/policy rather than through the
 * option parser. Returns null when `argv` is not one of them (or asks for help).
 */
export async function runLocalPolicyCommand(argv: string[], ctx: Pick<CliContext, 'stdout' | 'stderr'>): Promise<number | null> {
  let i = 0;
  while (i < argv.length && argv[i]?.startsWith('--')) {
    const flag = argv[i] as string;
    i += VALUED_GLOBALS.includes(flag) ? 2 : flag.includes('=') && VALUED_GLOBALS.includes(flag.split('=')[0] as string) ? 1 : Number.POSITIVE_INFINITY;
  }
  // Everything under `policy` except `publish` and `dry-run` (which need the gateway) and help requests.
  if (argv[i] !== 'policy' || GATEWAY_SUBCOMMANDS.includes(argv[i + 1] ?? '')) return null;
  const rest = argv.slice(i + 1);
  const dashes = rest.indexOf('--');
  const before = dashes < 0 ? rest : rest.slice(0, dashes);
  if (before.includes('--help') || before.includes('-h')) return null;
  if (rest[0] === 'explain') await initPolicyEngine();
  // Read as a stream: a synchronous read of a pipe fails with EAGAIN once it holds more than a buffer.
  const input = rest[0] === 'explain' && before.includes('--batch') ? await readStdin() : '';
  return runPolicyCommand(rest, { stdout: ctx.stdout, stderr: ctx.stderr, readFile: (p) => readFileSync(p, 'utf8'), readStdin: () => input });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Reads a policy file and checks it locally, so a typo is reported with its path before anything
 * reaches the gateway; `outcome` says what did not happen ("nothing was published").
 */
function readValidPolicy(ctx: CliContext, file: string, outcome: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`Cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'}).`, 'usage');
  }
  const problems: string[] = [];
  const code = runPolicyCommand(['check', file], { stdout: () => undefined, stderr: (s) => problems.push(s), readFile: () => text });
  if (code !== 0) {
    ctx.stderr(problems.join(''));
    throw new CliError(`${file} is not a valid policy; ${outcome}.`, 'usage');
  }
  return text;
}

export async function publishPolicy(ctx: CliContext, file: string, opts: { project?: string; comment?: string }, flags: Record<string, unknown>): Promise<number> {
  const text = readValidPolicy(ctx, file, 'nothing was published');
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  const version = await client.publishPolicy(project.id, text, opts.comment ?? '');
  ctx.stdout(`Published ${file} as version ${version.version} of the policy of ${project.name}; it is in force from the next action.\n`);
  return EXIT_OK;
}

export interface DryRunOptions {
  project?: string;
  sessions?: string;
  json?: boolean;
}

/** `--sessions N`: how many of the project's latest sessions are replayed (the gateway takes 1 to 100). */
function sessionsToReplay(value: string | undefined): number {
  if (value === undefined) return 20;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 100) throw new CliError(`--sessions must be a whole number from 1 to 100, not "${value}".`, 'usage');
  return n;
}

export async function dryRunPolicy(ctx: CliContext, file: string, opts: DryRunOptions, flags: Record<string, unknown>): Promise<number> {
  const sessions = sessionsToReplay(opts.sessions);
  const text = readValidPolicy(ctx, file, 'nothing was replayed');
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  const result = await client.policyDryRun(project.id, text, sessions);
  ctx.stdout(opts.json ? `${JSON.stringify(result)}\n` : renderDryRun(file, project.name, result));
  return EXIT_OK;
}

/**
 * What a draft would change, grouped by the change of effect (`ask → allow`), the groups that loosen
 * first, each listing its distinct subjects with how often they came up: an administrator reads what
 * the draft lets through before what it tightens.
 */
export function renderDryRun(file: string, project: string, r: PolicyDryRunResponse): string {
  const head = `Replayed ${count(r.toolCallsReplayed, 'tool call')} from ${count(r.sessionsReplayed, 'session')} of ${project} under ${file}: `;
  if (r.changes.length === 0) return `${head}no decision would change.\n`;
  const groups = new Map<string, PolicyDryRunChange[]>();
  for (const c of r.changes) {
    // Same effect, another rule: the reason a person reads changes, and so may what a later edit of the rule does.
    const key = c.before.effect === c.after.effect ? `${c.after.effect}, decided by another rule` : `${c.before.effect} → ${c.after.effect}`;
    groups.set(key, [...(groups.get(key) ?? []), c]);
  }
  const looseness = { allow: 0, ask: 1, deny: 2 } as const;
  const loosening = (key: string) => {
    const sample = (groups.get(key) as PolicyDryRunChange[])[0] as PolicyDryRunChange;
    return looseness[sample.after.effect] - looseness[sample.before.effect];
  };
  const keys = [...groups.keys()].sort((a, b) => loosening(a) - loosening(b) || a.localeCompare(b));
  const out = [`${head}${count(r.changes.length, 'decision')} would change.\n`];
  for (const key of keys) {
    const changes = groups.get(key) as PolicyDryRunChange[];
    const bySubject = new Map<string, { change: PolicyDryRunChange; count: number; sessions: Set<string> }>();
    for (const c of changes) {
      const k = `${c.tool}\u0000${c.subject}`;
      const seen = bySubject.get(k) ?? { change: c, count: 0, sessions: new Set<string>() };
      seen.count++;
      seen.sessions.add(c.sessionId);
      bySubject.set(k, seen);
    }
    out.push(`\n${key} (${changes.length})\n`);
    const rows = [...bySubject.values()].map(({ change, count, sessions }) => [
      change.tool,
      shorten(change.subject, 60),
      count === 1 ? change.sessionId : `${count}× in ${sessions.size} session${sessions.size === 1 ? '' : 's'}`,
      shorten(change.after.reason, 100),
    ]);
    out.push(table(['TOOL', 'SUBJECT', 'WHERE', 'WITH THE DRAFT'], rows).replace(/^(?=.)/gm, '  '));
  }
  return out.join('');
}

export function registerPolicy(program: Command, ctx: CliContext, done: Done): void {
  const policy = program.command('policy').description('write, check, explain and publish project policies');
  // These three never reach their actions (runLocalPolicyCommand handles them); they exist for --help.
  policy
    .command('init')
    .description('print a complete policy document (default: every command asks)')
    .option('--recommended', 'the usual build, test, lint and format commands free; network tools and publishing forbidden')
    .addHelpText('after', '\nExample:\n  $ lemni policy init --recommended > policy.yaml');
  policy
    .command('check <file>')
    .description('validate a policy document; exit 1 with every problem and its path when it is invalid')
    .addHelpText('after', '\nExample:\n  $ lemni policy check policy.yaml');
  policy
    .command('explain <file>')
    .description('the decision the policy takes on a shell command: effect, rule and reason')
    .option('--json', 'print {"effect","rule","reason","thirdParty"}')
    .option('--batch', 'with --json: read commands on stdin (one per line, or JSON lines with a "command"), print one decision per line')
    .usage('FILE [--json] -- COMMAND | FILE --json --batch')
    .addHelpText(
      'after',
      '\nExamples:\n  $ lemni policy explain policy.yaml -- npm test\n  $ lemni policy explain policy.yaml --json -- "curl https://example.org | sh"\n  $ lemni policy explain policy.yaml --json --batch < commands.txt',
    );
  policy
    .command('publish <file>')
    .description('make FILE the policy in force for a project (administrators); every publish is audited')
    .option('--project <name>', 'the project')
    .option('-m, --comment <text>', 'why it changed, kept in the version history')
    .addHelpText('after', '\nExample:\n  $ lemni --profile admin policy publish policy.yaml --project demo -m "make npm test free"')
    .action((file: string, opts: { project?: string; comment?: string }, cmd: Command) => done(publishPolicy(ctx, file, opts, cmd.optsWithGlobals())));
  policy
    .command('dry-run <file>')
    .description("decide the project's recent tool calls again under FILE and show which decisions would change (administrators); nothing is published")
    .option('--project <name>', 'the project')
    .option('--sessions <n>', 'how many of the latest sessions to replay, 1 to 100', '20')
    .option('--json', "print the gateway's answer as JSON")
    .addHelpText('after', '\nExamples:\n  $ lemni --profile admin policy dry-run draft.yaml --project demo\n  $ lemni --profile admin policy dry-run draft.yaml --project demo --sessions 100 --json')
    .action((file: string, opts: DryRunOptions, cmd: Command) => done(dryRunPolicy(ctx, file, opts, cmd.optsWithGlobals())));
}
