import { initPolicyEngine, runPolicyCommand } from '@lemniscate/policy';
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';

type Done = (code: Promise<number>) => void;

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
  // Everything under `policy` except `publish` (which needs the gateway) and help requests.
  if (argv[i] !== 'policy' || argv[i + 1] === 'publish' || argv[i + 1] === 'help') return null;
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

export async function publishPolicy(ctx: CliContext, file: string, opts: { project?: string; comment?: string }, flags: Record<string, unknown>): Promise<number> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`Cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'}).`, 'usage');
  }
  // Checked here first so a typo is reported with its path before anything reaches the gateway.
  const problems: string[] = [];
  const code = runPolicyCommand(['check', file], { stdout: () => undefined, stderr: (s) => problems.push(s), readFile: () => text });
  if (code !== 0) {
    ctx.stderr(problems.join(''));
    throw new CliError(`${file} is not a valid policy; nothing was published.`, 'usage');
  }
  // --project is also a global option, so the parser may have filed it there.
  const { client, connection } = connect(ctx, globalFlags({ ...flags, project: opts.project ?? flags.project }));
  const projectName = connection.project;
  if (!projectName) throw new CliError('Name the project with --project NAME.', 'usage');
  const project = await client.projectByName(projectName);
  const version = await client.publishPolicy(project.id, text, opts.comment ?? '');
  ctx.stdout(`Published ${file} as version ${version.version} of the policy of ${project.name}; it is in force from the next action.\n`);
  return EXIT_OK;
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
    .addHelpText('after', '\nExamples:\n  $ lemni policy explain policy.yaml -- npm test\n  $ lemni policy explain policy.yaml --json -- "curl https://example.org | sh"\n  $ lemni policy explain policy.yaml --json --batch < commands.txt');
  policy
    .command('publish <file>')
    .description('make FILE the policy in force for a project (administrators); every publish is audited')
    .option('--project <name>', 'the project')
    .option('-m, --comment <text>', 'why it changed, kept in the version history')
    .addHelpText('after', '\nExample:\n  $ lemni --profile admin policy publish policy.yaml --project demo -m "make npm test free"')
    .action((file: string, opts: { project?: string; comment?: string }, cmd: Command) => done(publishPolicy(ctx, file, opts, cmd.optsWithGlobals())));
}
