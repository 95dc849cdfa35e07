import { AgentFileError, parseAgentFile, READ_ONLY_TOOLS, type AgentDefinition, type AgentNotice } from './agent-file';

/**
 * Agent discovery and selection (AG1–AG3). Files come through AgentDirectory, so this module
 * never touches a file system: the gateway decides where `.lemniscate/agents/` and
 * `~/.lemniscate/agents/` live and how they are read.
 */

export interface AgentDirectory {
  /** Shown in messages, e.g. `.lemniscate/agents` or `~/.lemniscate/agents`. */
  readonly location: string;
  /** Names of the files directly inside; an empty list when the directory does not exist. */
  list(): Promise<readonly string[]>;
  /** The text of one file named by list(). */
  read(fileName: string): Promise<string>;
}

const RESERVED_AGENT_NAMES = ['general', 'explore'] as const;

export const BUILTIN_AGENTS: readonly AgentDefinition[] = Object.freeze([
  Object.freeze({
    name: 'general',
    description: 'General-purpose agent for a self-contained, multi-step part of the task; it has the tools of the agent that delegates to it.',
    mode: 'subagent',
    tools: null,
    model: null,
    readOnly: false,
    hidden: false,
    disabled: false,
    execution: Object.freeze({}),
    systemPrompt:
      'You carry out one delegated part of a larger task. Work only on the instruction you were given, then answer with a concise report: what you did, what you found, and anything left undone.',
    origin: 'builtin',
    location: 'built-in agent "general"',
  }),
  Object.freeze({
    name: 'explore',
    description: 'Read-only explorer: finds and reads files to answer questions about the code; changes nothing.',
    mode: 'subagent',
    tools: Object.freeze(['Read', 'List', 'Search']),
    model: null,
    readOnly: true,
    hidden: false,
    disabled: false,
    execution: Object.freeze({}),
    systemPrompt: 'You explore a repository to answer a question. You can only read, list and search files. Answer with a concise report that cites the files and lines that support it.',
    origin: 'builtin',
    location: 'built-in agent "explore"',
  }),
] satisfies AgentDefinition[]);

export type AgentUnavailableCode = 'agent_unknown' | 'agent_disabled' | 'agent_for_delegation_only' | 'agent_not_delegatable';

export class AgentUnavailableError extends Error {
  constructor(
    readonly code: AgentUnavailableCode,
    message: string,
  ) {
    super(message);
    this.name = 'AgentUnavailableError';
  }
}

export class AgentCatalogue {
  private readonly agents: ReadonlyMap<string, AgentDefinition>;
  private readonly disabled: ReadonlyMap<string, string>;

  constructor(
    agents: Iterable<AgentDefinition>,
    readonly notices: readonly AgentNotice[] = [],
  ) {
    const available = new Map<string, AgentDefinition>();
    const disabled = new Map<string, string>();
    for (const agent of agents) {
      if (agent.disabled) disabled.set(agent.name, agent.location);
      else available.set(agent.name, agent);
    }
    this.agents = available;
    this.disabled = disabled;
  }

  /** What a listing or completion shows: every available agent except hidden ones, by name. */
  listed(): AgentDefinition[] {
    return [...this.agents.values()].filter((a) => !a.hidden).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** What the delegating model is told it can delegate to. */
  delegatable(): AgentDefinition[] {
    return this.listed().filter((a) => a.mode !== 'primary');
  }

  /** `lemni --agent NAME`: hidden agents are invocable by name; subagent-only ones are not. */
  forUser(name: string): AgentDefinition {
    const agent = this.find(name);
    if (agent.mode === 'subagent') {
      throw new AgentUnavailableError('agent_for_delegation_only', `Agent "${name}" is reserved for delegation (mode: subagent); it cannot drive a session itself.`);
    }
    return agent;
  }

  /** The Task tool: only agents declaring mode subagent or all (AG3). */
  forDelegation(name: string): AgentDefinition {
    const agent = this.find(name);
    if (agent.mode === 'primary') {
      throw new AgentUnavailableError(
        'agent_not_delegatable',
        `Agent "${name}" cannot be delegated to: its file does not declare mode: subagent or mode: all. Do this work yourself or pick another agent.`,
      );
    }
    return agent;
  }

  private find(name: string): AgentDefinition {
    const agent = this.agents.get(name);
    if (agent) return agent;
    const disabledAt = this.disabled.get(name);
    if (disabledAt) throw new AgentUnavailableError('agent_disabled', `Agent "${name}" is disabled (disable: true in ${disabledAt}).`);
    const known = this.listed().map((a) => a.name);
    throw new AgentUnavailableError('agent_unknown', `There is no agent named "${name}". Available: ${known.length ? known.join(', ') : 'none'}.`);
  }
}

/**
 * Discovers agents: built-ins, then the user's directory, then the project's, which wins on a
 * name collision. A bad file is reported and skipped; it never stops discovery.
 */
export async function discoverAgents(directories: { project?: AgentDirectory; user?: AgentDirectory }): Promise<AgentCatalogue> {
  const notices: AgentNotice[] = [];
  const [user, project] = await Promise.all([
    directories.user ? readDirectory(directories.user, 'user', notices) : [],
    directories.project ? readDirectory(directories.project, 'project', notices) : [],
  ]);

  const chosen = new Map<string, AgentDefinition>();
  for (const agent of [...user, ...project]) {
    // Case-insensitive: on a case-insensitive file system General.md and general.md are one file.
    if ((RESERVED_AGENT_NAMES as readonly string[]).includes(agent.name.toLowerCase())) {
      notices.push({
        level: 'warning',
        code: 'reserved_name',
        location: agent.location,
        message: `${agent.location}: "${agent.name}" is the name of a built-in agent; this file is discarded. Rename it to use it.`,
      });
      continue;
    }
    const earlier = chosen.get(agent.name);
    if (earlier) {
      notices.push({
        level: 'note',
        code: 'shadowed',
        location: agent.location,
        message: `${agent.location} is used for agent "${agent.name}"; it shadows ${earlier.location}.`,
      });
    }
    chosen.set(agent.name, agent);
  }
  for (const agent of chosen.values()) {
    if (agent.disabled) {
      notices.push({ level: 'note', code: 'disabled', location: agent.location, message: `${agent.location}: agent "${agent.name}" is disabled (disable: true).` });
    }
  }
  return new AgentCatalogue([...BUILTIN_AGENTS, ...chosen.values()], notices);
}

async function readDirectory(directory: AgentDirectory, origin: 'project' | 'user', notices: AgentNotice[]): Promise<AgentDefinition[]> {
  let names: readonly string[];
  try {
    names = await directory.list();
  } catch (error) {
    notices.push({
      level: 'error',
      code: 'unreadable_directory',
      location: directory.location,
      message: `${directory.location} could not be listed (${reason(error)}); no agent was read from it.`,
    });
    return [];
  }
  const agents: AgentDefinition[] = [];
  // Sorted so that notices and results do not depend on the order the platform lists files in.
  for (const fileName of [...names].filter((n) => n.endsWith('.md')).sort()) {
    const location = `${directory.location}/${fileName}`;
    try {
      const text = await directory.read(fileName);
      const parsed = parseAgentFile(fileName, text, origin, location);
      notices.push(...parsed.notices);
      agents.push(parsed.agent);
    } catch (error) {
      if (error instanceof AgentFileError) {
        notices.push({ level: 'error', code: error.code, location, message: `${error.message} The agent is not available until it is fixed.` });
      } else {
        notices.push({ level: 'error', code: 'unreadable_file', location, message: `${location} could not be read (${reason(error)}); it is skipped.` });
      }
    }
  }
  return agents;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export interface ToolRights {
  tools: readonly string[];
  /** Plan mode: only tools that change nothing. */
  readOnly: boolean;
}

/**
 * The rights an agent gets under a parent (AG2, AG3): never wider than the parent's. No `tools`
 * key inherits, a list intersects, read-only on either side survives, and a delegated agent has
 * no Question tool because nobody would answer it.
 */
export function effectiveTools(parent: ToolRights, persona: Pick<AgentDefinition, 'tools' | 'readOnly'>, options: { delegated?: boolean } = {}): ToolRights {
  const readOnly = parent.readOnly || persona.readOnly;
  const tools = parent.tools.filter((tool) => {
    const mcp = /^mcp__([a-z][a-z0-9-]{0,30})__([A-Za-z0-9_-]{1,48})$/.exec(tool);
    // An MCP tool of the parent's catalogue (AG7): the persona narrows it by server or server/tool;
    // whether a read-only agent may use it is the policy's read-only mark, judged when the child starts.
    if (mcp) return persona.tools === null || persona.tools.includes(mcp[1]!) || persona.tools.includes(`${mcp[1]!}/${mcp[2]!}`) || persona.tools.includes(tool);
    return (persona.tools === null || persona.tools.includes(tool)) && (!readOnly || READ_ONLY_TOOLS.includes(tool)) && !(options.delegated && tool === 'Question');
  });
  return { tools: [...new Set(tools)], readOnly };
}

/** AG2: a declared model is used when it is configured; otherwise the current one, with a warning. */
export function pickModel(agent: Pick<AgentDefinition, 'name' | 'model'>, configured: readonly string[], current: string): { model: string; warning: string | null } {
  if (agent.model === null || agent.model === current) return { model: current, warning: null };
  if (configured.includes(agent.model)) return { model: agent.model, warning: null };
  return { model: current, warning: `Agent "${agent.name}" asks for model "${agent.model}", which is not configured; "${current}" is used instead.` };
}
