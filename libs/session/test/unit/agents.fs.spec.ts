import { mkdtemp, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { discoverAgents, type AgentDirectory } from '../../src/agents';

/**
 * The port against a real directory: what an adapter in the gateway does. Only regular files are
 * offered, and a missing directory is simply empty.
 */
function onDisk(path: string, location: string): AgentDirectory {
  return {
    location,
    async list() {
      try {
        const entries = await readdir(path, { withFileTypes: true });
        return entries.filter((e) => e.isFile()).map((e) => e.name);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    },
    read: (fileName) => readFile(join(path, fileName), 'utf8'),
  };
}

describe('discoverAgents on a real directory tree', () => {
  let root: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'lemniscate-agents-'));
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('reads the project and home directories, the project winning, and survives bad files', async () => {
    const project = join(root, 'repo/.lemniscate/agents');
    const home = join(root, 'home/.lemniscate/agents');
    await mkdir(project, { recursive: true });
    await mkdir(home, { recursive: true });
    await writeFile(join(project, 'revue.md'), '---\ndescription: team review\ntools: Read, Search\nsessionMaxActions: 25\n---\nReview strictly.\n');
    await writeFile(join(home, 'revue.md'), '---\ndescription: my review\n---\nMine.\n');
    await writeFile(join(home, 'broken.md'), '---\nhidden: maybe\n---\n');
    await writeFile(join(project, 'explore.md'), 'an impostor');
    await mkdir(join(project, 'folder.md'));
    await writeFile(join(project, 'README.txt'), 'not an agent');

    const catalogue = await discoverAgents({ project: onDisk(project, '.lemniscate/agents'), user: onDisk(home, '~/.lemniscate/agents') });

    expect(catalogue.forUser('revue')).toMatchObject({
      description: 'team review',
      tools: ['Read', 'Search'],
      execution: { sessionMaxActions: 25 },
      systemPrompt: 'Review strictly.',
      location: '.lemniscate/agents/revue.md',
    });
    expect(catalogue.forDelegation('explore').origin).toBe('builtin');
    expect(catalogue.listed().map((a) => a.name)).toEqual(['explore', 'general', 'revue']);
    expect(catalogue.notices.map((n) => `${n.code} ${n.location}`)).toEqual([
      'invalid_frontmatter ~/.lemniscate/agents/broken.md',
      'reserved_name .lemniscate/agents/explore.md',
      'shadowed .lemniscate/agents/revue.md',
    ]);
  });

  it('treats missing directories as empty', async () => {
    const catalogue = await discoverAgents({ project: onDisk(join(root, 'nope'), '.lemniscate/agents'), user: onDisk(join(root, 'none'), '~/.lemniscate/agents') });
    expect(catalogue.listed().map((a) => a.name)).toEqual(['explore', 'general']);
    expect(catalogue.notices).toEqual([]);
  });

  it('reports a file that disappears between listing and reading', async () => {
    const dir = join(root, 'agents');
    await mkdir(dir);
    await symlink(join(root, 'missing-target.md'), join(dir, 'ghost.md'));
    const base = onDisk(dir, '.lemniscate/agents');
    // A dangling link is listed as a link, not a file; list it anyway to reach the read failure.
    const catalogue = await discoverAgents({ project: { ...base, list: async () => ['ghost.md'] } });
    expect(catalogue.notices).toEqual([expect.objectContaining({ level: 'error', code: 'unreadable_file', location: '.lemniscate/agents/ghost.md' })]);
    expect(catalogue.notices[0]!.message).toContain('ENOENT');
  });
});
