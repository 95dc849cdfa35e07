import { readdir, readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { CliConfig, Env } from '../config/config';
import type { StartSessionRequest } from '../gateway/gateway-client';

const AGENT_FILE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.md$/;
const MAX_AGENT_BYTES = 256 * 1024;
const MAX_AGENTS = 200;

export type DeveloperContext = Pick<StartSessionRequest, 'environment' | 'userConfig' | 'userAgents'>;

/**
 * What only the developer's machine knows and the gateway needs to configure a session: the
 * `LEMNISCATE_SESSION_*` variables and the `execution:` settings (L5), and the personal agents of
 * `~/.lemniscate/agents/` (AG1; the repository's agents win on the gateway side).
 */
export async function developerContext(env: Env, config: CliConfig, warn: (line: string) => void): Promise<DeveloperContext> {
  const context: DeveloperContext = {};
  const environment = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => /^LEMNISCATE_SESSION_[A-Z_]+$/.test(e[0]) && typeof e[1] === 'string'));
  if (Object.keys(environment).length > 0) context.environment = environment;
  if (config.execution !== undefined) context.userConfig = { execution: config.execution };
  const dir = join(env.HOME && env.HOME !== '' ? env.HOME : homedir(), '.lemniscate', 'agents');
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.md')).sort();
  } catch {
    return context;
  }
  const agents: { fileName: string; text: string }[] = [];
  for (const fileName of names) {
    const path = join(dir, fileName);
    if (!AGENT_FILE.test(fileName)) {
      warn(`Skipped ${path}: an agent file name is letters, digits, ".", "-" or "_" and ends in .md.`);
      continue;
    }
    const info = await stat(path).catch(() => null);
    if (!info?.isFile()) continue;
    if (info.size > MAX_AGENT_BYTES) {
      warn(`Skipped ${path}: larger than ${MAX_AGENT_BYTES / 1024} KiB.`);
      continue;
    }
    if (agents.length === MAX_AGENTS) {
      warn(`Only the first ${MAX_AGENTS} agents of ${dir} are sent.`);
      break;
    }
    agents.push({ fileName, text: await readFile(path, 'utf8') });
  }
  if (agents.length > 0) context.userAgents = agents;
  return context;
}
