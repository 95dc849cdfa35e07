import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { RepositoryDirectory } from '@lemniscate/contracts';
import type { AgentDirectory } from '@lemniscate/session';

const run = promisify(execFile);

/**
 * Git for reading the project's own agent files on the gateway: no hooks, no global or system
 * configuration, no filters, so nothing in the repository can run code here.
 */
const SAFE_GIT_ENV = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', HOME: '/nonexistent', GIT_TERMINAL_PROMPT: '0', PATH: process.env.PATH ?? '/usr/bin:/bin' };
const SAFE_GIT_ARGS = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.allow=never'];
export const AGENTS_DIR = '.lemniscate/agents';
export const MAX_AGENT_FILES = 200;

/**
 * The project's `.lemniscate/agents/` as committed in its repository (a local path) at the session's
 * ref — the authoritative copy, not whatever a workstation holds. A repository reached by URL is read
 * by the exec-host instead (fetchedAgentDirectory).
 */
export function repositoryAgentDirectory(source: string, ref: string | undefined): AgentDirectory & { commit(): Promise<string | null> } {
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
          .slice(0, MAX_AGENT_FILES);
      } catch {
        return [];
      }
    },
    async read(fileName: string) {
      const { stdout } = await git(['show', `${rev}:${AGENTS_DIR}/${fileName}`]);
      return stdout;
    },
    async commit() {
      if (!source.startsWith('/')) return null;
      return git(['rev-parse', '--verify', '--end-of-options', `${rev}^{commit}`]).then(
        ({ stdout }) => stdout.trim(),
        () => null,
      );
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

/**
 * The project's `.lemniscate/agents/` as an exec-host read it from a repository reached by URL, at the
 * project's default ref (ADR 0012). Files it left out (too large, not text) become notices of the
 * same kind as an unreadable file.
 */
export function fetchedAgentDirectory(read: () => Promise<RepositoryDirectory>): AgentDirectory & { commit(): Promise<string> } {
  let once: Promise<RepositoryDirectory> | null = null;
  const get = () => (once ??= read());
  return {
    location: AGENTS_DIR,
    async list() {
      const d = await get();
      return [...d.files.map((f) => f.name), ...d.skipped.map((f) => f.name)];
    },
    async read(fileName: string) {
      const d = await get();
      const file = d.files.find((f) => f.name === fileName);
      if (file) return file.text;
      const skipped = d.skipped.find((f) => f.name === fileName);
      throw new Error(skipped ? `${fileName} was not read (${skipped.reason})` : `${fileName} is not in the repository`);
    },
    commit: async () => (await get()).commit,
  };
}
