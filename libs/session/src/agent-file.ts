import { parseDocument } from 'yaml';
import { z } from 'zod';
import { describeValue } from './describe-value';
import { ExecutionConfigError, isExecutionKey, readExecutionMapping, type ExecutionConfig, type ExecutionLayer } from './execution-config';

/**
 * Agent files (AG1, AG2): Markdown whose YAML frontmatter is configuration and whose body is the
 * system prompt. The file name is the agent's name. Parsing never widens anything: unknown keys
 * are reported and ignored, values of the wrong type are refused.
 */

/** The tools the platform offers (DESIGN.md, scripted model). */
export const KNOWN_TOOLS = ['Read', 'List', 'Search', 'Write', 'Edit', 'Bash', 'Task', 'TaskResult', 'Question'] as const;
/**
 * An MCP server (`files`) or one of its tools (`files/read_file`) in a `tools` list (AG7): whether
 * the project's policy enables it is decided when a session starts (the policy library's
 * MCP_TOOL_REFERENCE, which a test keeps equal to this one).
 */
export const MCP_REFERENCE = /^[a-z][a-z0-9-]{0,30}(\/[A-Za-z0-9_-]{1,48})?$/;

/** Tools that change nothing, the only ones left in read-only (plan) mode. */
export const READ_ONLY_TOOLS: readonly string[] = ['Read', 'List', 'Search', 'Question'];

export type AgentMode = 'primary' | 'subagent' | 'all';
export type AgentOrigin = 'builtin' | 'project' | 'user';

export interface AgentDefinition {
  name: string;
  description: string;
  /** primary: invocable by the user only; subagent: by delegation only; all: both (AG3). */
  mode: AgentMode;
  /** null: no `tools` key, the agent inherits; a list closes the catalogue to those tools (AG2). */
  tools: readonly string[] | null;
  model: string | null;
  readOnly: boolean;
  hidden: boolean;
  disabled: boolean;
  /** Execution keys set by the frontmatter; they win over configuration (L5). */
  execution: Partial<ExecutionConfig>;
  systemPrompt: string;
  origin: AgentOrigin;
  /** Where it was read, for messages, e.g. `.lemniscate/agents/revue.md`. */
  location: string;
}

export type AgentNoticeCode =
  | 'unreadable_directory'
  | 'unreadable_file'
  | 'invalid_file_name'
  | 'invalid_frontmatter'
  | 'name_field_ignored'
  | 'unknown_key'
  | 'unknown_tool'
  | 'missing_description'
  | 'empty_prompt'
  | 'reserved_name'
  | 'shadowed'
  | 'disabled';

export interface AgentNotice {
  level: 'error' | 'warning' | 'note';
  code: AgentNoticeCode;
  location: string;
  message: string;
}

export class AgentFileError extends Error {
  readonly code: AgentNoticeCode;
  constructor(
    code: AgentNoticeCode,
    readonly location: string,
    message: string,
  ) {
    super(message);
    this.code = code;
    this.name = 'AgentFileError';
  }
}

/** Same shape as the gateway's `agent` request field, so a discovered name is always a valid request. */
const AGENT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Agent files are prompts, not data dumps; a huge one is a mistake or an attack on the context. */
export const MAX_AGENT_FILE_CHARS = 256 * 1024;

const toolList = z.union([z.array(z.string({ error: 'must list tool names' })), z.string()], {
  error: 'must be a list of tool names or a comma-separated line such as "Read, Search"',
});

const frontmatterSchema = z.object({
  description: z.string({ error: 'must be a line of text' }).optional(),
  mode: z.enum(['primary', 'subagent', 'all'], { error: 'must be primary, subagent or all' }).optional(),
  tools: toolList.optional(),
  model: z.string({ error: 'must be a model name' }).trim().min(1, 'must be a model name').optional(),
  disable: z.boolean({ error: 'must be true or false' }).optional(),
  hidden: z.boolean({ error: 'must be true or false' }).optional(),
  readOnly: z.boolean({ error: 'must be true or false' }).optional(),
});
type FrontmatterKey = keyof z.infer<typeof frontmatterSchema>;
const FRONTMATTER_KEYS = new Set<string>([...Object.keys(frontmatterSchema.shape), 'name']);

export interface ParsedAgentFile {
  agent: AgentDefinition;
  notices: AgentNotice[];
}

/**
 * Parses one agent file. Throws AgentFileError, naming the file, when it cannot be used; returns
 * warnings for what was ignored.
 */
export function parseAgentFile(fileName: string, text: string, origin: Exclude<AgentOrigin, 'builtin'>, location: string): ParsedAgentFile {
  const notices: AgentNotice[] = [];
  const warn = (code: AgentNoticeCode, message: string) => notices.push({ level: 'warning', code, location, message });
  const fail = (code: AgentNoticeCode, why: string) => new AgentFileError(code, location, `${location}: ${why}`);

  const name = agentNameOf(fileName);
  if (name === null) {
    throw fail('invalid_file_name', 'an agent file name must be letters, digits, ".", "-" or "_" (at most 64) followed by ".md"; rename the file.');
  }
  if (text.length > MAX_AGENT_FILE_CHARS) {
    throw fail('invalid_frontmatter', `the file is larger than ${MAX_AGENT_FILE_CHARS / 1024} KiB; an agent file holds a prompt, not data.`);
  }

  const { frontmatter, body } = splitFrontmatter(text, fail);
  const raw = readYamlMapping(frontmatter, fail);

  if ('name' in raw) warn('name_field_ignored', `${location}: the name field is ignored; the agent is called "${name}" after its file name.`);
  const executionValues: Record<string, unknown> = {};
  const ownValues: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (isExecutionKey(key)) executionValues[key] = value;
    else if (FRONTMATTER_KEYS.has(key)) ownValues[key] = value;
    else warn('unknown_key', `${location}: ${key} is not an agent setting; it is ignored.`);
  }

  const parsed = frontmatterSchema.safeParse(ownValues);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0] ?? 'frontmatter') as FrontmatterKey;
    throw fail('invalid_frontmatter', `${key} ${issue.message} (got ${describeValue(ownValues[key])}); fix the frontmatter.`);
  }

  let execution: Partial<ExecutionConfig>;
  try {
    execution = Object.fromEntries(readExecutionMapping({ location, values: executionValues })) as Partial<ExecutionConfig>;
  } catch (error) {
    if (error instanceof ExecutionConfigError) throw new AgentFileError('invalid_frontmatter', location, error.message);
    throw error;
  }

  const fm = parsed.data;
  const tools = fm.tools === undefined ? null : normaliseTools(fm.tools);
  for (const tool of tools ?? []) {
    if (!(KNOWN_TOOLS as readonly string[]).includes(tool) && !MCP_REFERENCE.test(tool)) {
      warn('unknown_tool', `${location}: "${tool}" is not a tool this platform offers nor an MCP server (files) or server tool (files/read_file); it will never be available to this agent.`);
    }
  }
  const mode = fm.mode ?? 'primary';
  const description = fm.description?.trim() ?? '';
  if (mode !== 'primary' && description === '') {
    warn('missing_description', `${location}: a delegatable agent needs a description, the only thing the delegating model reads to choose it.`);
  }
  const systemPrompt = body.trim();
  if (systemPrompt === '') warn('empty_prompt', `${location}: the body is empty, so this agent has no system prompt of its own.`);

  return {
    agent: {
      name,
      description,
      mode,
      tools,
      model: fm.model ?? null,
      readOnly: fm.readOnly ?? false,
      hidden: fm.hidden ?? false,
      disabled: fm.disable ?? false,
      execution,
      systemPrompt,
      origin,
      location,
    },
    notices,
  };
}

/** The agent's name for a file name, or null when the file cannot name an agent. */
export function agentNameOf(fileName: string): string | null {
  if (!fileName.endsWith('.md')) return null;
  const name = fileName.slice(0, -'.md'.length);
  return AGENT_NAME_PATTERN.test(name) ? name : null;
}

/** The frontmatter's execution keys as a layer for resolveExecutionConfig. */
export function agentExecutionLayer(agent: AgentDefinition): ExecutionLayer {
  return { location: agent.location, values: agent.execution };
}

function splitFrontmatter(text: string, fail: (code: AgentNoticeCode, why: string) => AgentFileError): { frontmatter: string; body: string } {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (lines[0]?.trimEnd() !== '---') return { frontmatter: '', body: lines.join('\n') };
  const end = lines.findIndex((line, i) => i > 0 && line.trimEnd() === '---');
  if (end === -1) throw fail('invalid_frontmatter', 'the frontmatter opened by "---" on the first line is never closed by another "---" line.');
  return { frontmatter: lines.slice(1, end).join('\n'), body: lines.slice(end + 1).join('\n') };
}

function readYamlMapping(source: string, fail: (code: AgentNoticeCode, why: string) => AgentFileError): Record<string, unknown> {
  if (source.trim() === '') return {};
  const doc = parseDocument(source, { uniqueKeys: true, prettyErrors: false });
  const problem = doc.errors[0];
  if (problem) throw fail('invalid_frontmatter', `the frontmatter is not valid YAML (${oneLine(problem.message)}).`);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 50 });
  } catch (error) {
    // The yaml package refuses alias expansions that would blow up memory.
    throw fail('invalid_frontmatter', `the frontmatter could not be read (${oneLine(error instanceof Error ? error.message : String(error))}).`);
  }
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw fail('invalid_frontmatter', `the frontmatter must be a mapping of keys such as description and tools, not ${describeValue(value)}.`);
  return value as Record<string, unknown>;
}

function normaliseTools(value: string | string[]): string[] {
  const items = typeof value === 'string' ? value.split(',') : value;
  return [...new Set(items.map((item) => item.trim()).filter((item) => item !== ''))];
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
