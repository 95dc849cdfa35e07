import { Command } from 'commander';
import { connect, globalFlags, type CliContext } from '../context';
import { EXIT_OK } from '../errors';
import { table } from '../output/table';

export function registerProjects(program: Command, ctx: CliContext, done: (code: Promise<number>) => void): void {
  program
    .command('projects')
    .description('list the projects you can work on')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  $ lemni projects --json')
    .action((opts: { json?: boolean }, cmd: Command) =>
      done(
        (async () => {
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const projects = await client.listProjects();
          if (opts.json) ctx.stdout(`${JSON.stringify(projects)}\n`);
          else
            ctx.stdout(
              projects.length === 0
                ? 'No project is visible to you yet; an administrator adds you to one.\n'
                : table(
                    ['NAME', 'REPOSITORY', 'REF'],
                    projects.map((p) => [p.name, p.repositorySource, p.defaultRef]),
                  ),
            );
          return EXIT_OK;
        })(),
      ),
    );
}
