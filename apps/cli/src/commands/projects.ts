import path from 'node:path';
import { repositoryTransport, type ProjectMemberView, type ProjectView, type UserView } from '@lemniscate/contracts';
import { runPolicyCommand } from '@lemniscate/policy';
import { Command, Option } from 'commander';
import { parseDocument } from 'yaml';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_OK, isCliError } from '../errors';
import type { GatewayClient } from '../gateway/gateway-client';
import { count, table } from '../output/table';

type Done = (code: Promise<number>) => void;
type Runtime = 'runc' | 'runsc';

const RUNTIMES: Runtime[] = ['runc', 'runsc'];

/** A path is stored absolute (the gateway resolves nothing against the CLI's directory); a URL as it is. */
function sourceFrom(ctx: CliContext, repo: string): string {
  const text = repo.trim();
  const url = repositoryTransport(text) === 'https' || repositoryTransport(text) === 'ssh' || /^[a-z][a-z0-9+.-]*:\/\//i.test(text);
  return url || path.isAbsolute(text) ? text : path.resolve(ctx.cwd, text.replace(/^~(?=\/|$)/, ctx.env.HOME ?? '~'));
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** People are named by email; the gateway takes ids. */
async function usersByEmail(client: GatewayClient, emails: string[]): Promise<UserView[]> {
  if (emails.length === 0) return [];
  const users = await client.listUsers();
  return emails.map((email) => {
    const user = users.find((u) => u.email.toLowerCase() === email.trim().toLowerCase());
    if (!user) throw new CliError(`There is no user with the email ${email} (an administrator creates accounts in the console's Users page).`, 'not_found');
    return user;
  });
}

/** The sandbox runtime the project's policy in force asks for, and whether it is the built-in default. */
async function runtimeOf(client: GatewayClient, projectId: string): Promise<{ runtime: string; version: number | null }> {
  const current = await client.currentPolicy(projectId);
  if (!current) return { runtime: 'runc', version: null };
  const sandbox = (current.document as { sandbox?: { runtime?: unknown } } | null)?.sandbox;
  return { runtime: typeof sandbox?.runtime === 'string' ? sandbox.runtime : 'runc', version: current.version };
}

/**
 * The runtime lives in the policy (`sandbox.runtime`): changing it publishes a new version that differs
 * from the one in force by that one value (comments and order kept), recorded like any publish.
 */
async function publishRuntime(client: GatewayClient, project: ProjectView, runtime: Runtime): Promise<number | null> {
  const current = await client.currentPolicy(project.id);
  let text: string;
  if (current?.sourceText) text = current.sourceText;
  else if (current) text = JSON.stringify(current.document, null, 2);
  else {
    let init = '';
    runPolicyCommand(['init'], { stdout: (s) => (init += s), stderr: () => undefined, readFile: () => '' });
    text = init;
  }
  const doc = parseDocument(text);
  if (doc.getIn(['sandbox', 'runtime']) === runtime) return null;
  doc.setIn(['sandbox', 'runtime'], runtime);
  const published = await client.publishPolicy(project.id, doc.toString(), `sandbox runtime set to ${runtime} (lemni projects update)`);
  return published.version;
}

function describeProject(p: ProjectView, runtime: { runtime: string; version: number | null }, members: ProjectMemberView[] | null): string {
  const lines = [
    `Project     ${p.name}`,
    `Id          ${p.id}`,
    `Repository  ${p.repositorySource}`,
    `Default ref ${p.defaultRef}`,
    `Runtime     ${runtime.runtime} (${runtime.version === null ? 'the built-in default policy' : `policy version ${runtime.version}`})`,
    `Created     ${p.createdAt.slice(0, 19).replace('T', ' ')}`,
  ];
  if (members === null) lines.push('Members     (visible to the project’s administrators)');
  else if (members.length === 0) lines.push('Members     none');
  else {
    lines.push(`Members     ${members.length}`);
    for (const m of members) lines.push(`  ${m.email}  ${m.role}${m.displayName && m.displayName !== m.email ? `  (${m.displayName})` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

async function membersOrNull(client: GatewayClient, projectId: string): Promise<ProjectMemberView[] | null> {
  try {
    return await client.projectMembers(projectId);
  } catch (error) {
    if (isCliError(error) && (error.errorClass === 'forbidden' || error.errorClass === 'not_found')) return null;
    throw error;
  }
}

export function registerProjects(program: Command, ctx: CliContext, done: Done): void {
  const projects = program
    .command('projects')
    .description('list the projects you can work on; `create`, `show` and `update` one')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  $ lemni projects --json\n  $ lemni --profile admin projects create shop --repo ~/src/shop --ref main\n  $ lemni projects show shop')
    .action((opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const list = await client.listProjects();
          if (opts.json) ctx.stdout(`${JSON.stringify(list)}\n`);
          else
            ctx.stdout(
              list.length === 0
                ? 'No project is visible to you yet; an administrator adds you to one.\n'
                : table(
                    ['NAME', 'REPOSITORY', 'REF'],
                    list.map((p) => [p.name, p.repositorySource, p.defaultRef]),
                  ),
            );
          return EXIT_OK;
        })(),
      ),
    );

  projects
    .command('create <name>')
    .description('create a project (administrators): where its repository comes from, its default ref, its runtime and members')
    .requiredOption('--repo <path-or-url>', 'the repository: a path on the gateway host, an https:// or ssh:// URL')
    .option('--ref <ref>', 'the branch or tag sessions start from', 'main')
    .addOption(new Option('--runtime <runtime>', 'the sandbox runtime (published as the policy’s sandbox.runtime)').choices(RUNTIMES))
    .option('--member <email>', 'add this person as a member (repeat for several)', collect, [])
    .option('--json', 'print the project as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ lemni projects create shop --repo /srv/git/shop.git\n  $ lemni projects create api --repo https://git.example.com/org/api.git --ref develop --runtime runsc --member dev@example.com',
    )
    .action((name: string, opts: { repo: string; ref: string; runtime?: Runtime; member: string[]; json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          // Everything that can be refused before the project exists is checked first: nothing half-made.
          const members = await usersByEmail(client, opts.member);
          const project = await client.createProject({ name, repositorySource: sourceFrom(ctx, opts.repo), defaultRef: opts.ref });
          for (const m of members) await client.addMember(project.id, m.id);
          const version = opts.runtime && opts.runtime !== 'runc' ? await publishRuntime(client, project, opts.runtime) : null;
          if (opts.json || cmd.parent?.opts().json) ctx.stdout(`${JSON.stringify(project)}\n`);
          else {
            const extra = [members.length > 0 ? `${count(members.length, 'member')} added` : '', version !== null ? `runtime ${opts.runtime} (policy version ${version})` : ''].filter(Boolean);
            ctx.stdout(
              `Created project ${project.name} (${project.id}) from ${project.repositorySource} at ${project.defaultRef}${extra.length > 0 ? `; ${extra.join(', ')}` : ''}. Until a policy is published, the built-in default applies: nothing runs without approval.\n`,
            );
          }
          return EXIT_OK;
        })(),
      ),
    );

  projects
    .command('show <name>')
    .description('show a project: repository, default ref, runtime, members')
    .option('--json', 'print {project, runtime, members} as JSON')
    .addHelpText('after', '\nExample:\n  $ lemni projects show demo')
    .action((name: string, opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const project = await client.projectByName(name);
          const runtime = await runtimeOf(client, project.id);
          const members = await membersOrNull(client, project.id);
          const json = opts.json || cmd.parent?.opts().json;
          ctx.stdout(json ? `${JSON.stringify({ project, runtime: runtime.runtime, policyVersion: runtime.version, members })}\n` : describeProject(project, runtime, members));
          return EXIT_OK;
        })(),
      ),
    );

  projects
    .command('update <name>')
    .description('change a project (administrators): repository, default ref, runtime, members')
    .option('--repo <path-or-url>', 'a new repository source (clear its repository access first)')
    .option('--ref <ref>', 'a new default ref')
    .addOption(new Option('--runtime <runtime>', 'the sandbox runtime (publishes a policy version changing sandbox.runtime only)').choices(RUNTIMES))
    .option('--add-member <email>', 'add this person (repeat for several)', collect, [])
    .option('--remove-member <email>', 'remove this person (repeat for several)', collect, [])
    .addHelpText('after', '\nExamples:\n  $ lemni projects update shop --ref release-2.0\n  $ lemni projects update shop --runtime runsc --add-member dev@example.com')
    .action((name: string, opts: { repo?: string; ref?: string; runtime?: Runtime; addMember: string[]; removeMember: string[] }, cmd: Command) =>
      done(
        (async () => {
          if (opts.repo === undefined && opts.ref === undefined && opts.runtime === undefined && opts.addMember.length === 0 && opts.removeMember.length === 0) {
            throw new CliError('Say what to change: --repo, --ref, --runtime, --add-member or --remove-member.', 'usage');
          }
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          let project = await client.projectByName(name);
          const adding = await usersByEmail(client, opts.addMember);
          const removing = await usersByEmail(client, opts.removeMember);
          const done: string[] = [];
          if (opts.repo !== undefined || opts.ref !== undefined) {
            const before = project;
            project = await client.updateProject(project.id, {
              ...(opts.repo !== undefined ? { repositorySource: sourceFrom(ctx, opts.repo) } : {}),
              ...(opts.ref !== undefined ? { defaultRef: opts.ref } : {}),
            });
            if (project.repositorySource !== before.repositorySource) done.push(`repository ${before.repositorySource} → ${project.repositorySource}`);
            if (project.defaultRef !== before.defaultRef) done.push(`default ref ${before.defaultRef} → ${project.defaultRef}`);
          }
          if (opts.runtime !== undefined) {
            const version = await publishRuntime(client, project, opts.runtime);
            done.push(version === null ? `runtime already ${opts.runtime}` : `runtime ${opts.runtime} (policy version ${version})`);
          }
          for (const u of adding) {
            await client.addMember(project.id, u.id);
            done.push(`${u.email} added`);
          }
          for (const u of removing) {
            await client.removeMember(project.id, u.id);
            done.push(`${u.email} removed`);
          }
          ctx.stdout(`Project ${project.name}: ${done.length > 0 ? done.join('; ') : 'nothing changed'}.\n`);
          return EXIT_OK;
        })(),
      ),
    );
}
