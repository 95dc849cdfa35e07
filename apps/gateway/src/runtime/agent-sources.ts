import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { AgentDirectory } from '@lemniscate/session';

const run = promisify(execFile);

/**
 * Git for reading the project's own agent files on the gateway: no hooks, no global or system
 * configuration, no filters, so nothing in the repository can run code here.
 */
const SAFE_GIT_ENV = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: '/nonexistent', GIT_TERMINAL_PROMPT: '0', PATH: process.env.PATH ?? '/usr/bin:/bin' };
const SAFE_GIT_ARGS = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.allow=never'];
const AGENTS_DIR = '.lemniscate/agents';
const MAX_FILES = 200;

/**
 * The project's `.lemniscate/agents/` as committed in its repository at the session's ref — the
 * authoritative copy, not whatever a workstation holds. A repository the gateway cannot read
 * locally (a remote URL) has no project agents here; the exec-host's copy is what the agent sees.
 */
export function repositoryAgentDirectory(source: string, ref: string | undefined): AgentDirectory {
  const rev = ref ?? 'HEAD';
  const git = (args: string[]) => run('git', [...SAFE_GIT_ARGS, '-C', source, ...args], { env: SAFE_GIT_ENV, maxBuffer: 4 * 1024 * 1024, timeout: 10_000 });
  return {
    location: AGENTS_DIR,
    async list() {
      if (!source.startsWith('/')) return [];
      try {
        const { stdout } = await git(['ls-tree', '--name-only', `${rev}:${AGENTS_DIR}`]);
        return stdout
          .split('\n')
          .filter((n) => n.endsWith('.md'))
          .slice(0, MAX_FILES);
      } catch {
        return [];
      }
    },
    async read(fileName: string) {
      const { stdout } = await git(['show', `${rev}:${AGENTS_DIR}/${fileName}`]);
      return stdout;
    },
  };
}

/** The developer's `~/.lemniscate/agents/`, as the CLI sent it with the instruction. */
export function uploadedAgentDirectory(files: readonly { fileName: string; text: string }[]): AgentDirectory {
  const byName = new Map(files.map((f) => [f.fileName, f.text]));
  return {
    location: '~/.lemniscate/agents',
    list: async () => [...byName.keys()],
    read: async (fileName: string) => {
      const text = byName.get(fileName);
      if (text === undefined) throw new Error(`${fileName} was not sent`);
      return text;
    },
  };
}
