import type { ToolDefinition } from '../model/model.types';

/**
 * The tools a model may call, with the argument shapes of DESIGN.md's scripted model. The catalogue
 * of a session is computed once, before anything is read (P7): content can never add to it.
 */
export const TOOL_DEFINITIONS: Readonly<Record<string, ToolDefinition>> = Object.freeze({
  Read: {
    name: 'Read',
    description: 'Read a text file of the working copy. Returns its lines; use offset/limit for large files.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, offset: { type: 'integer', minimum: 0 }, limit: { type: 'integer', minimum: 1 } },
      required: ['path'],
      additionalProperties: false,
    },
  },
  List: {
    name: 'List',
    description: 'List the entries of a directory of the working copy.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false },
  },
  Search: {
    name: 'Search',
    description: 'Search the working copy for a literal string; returns matching lines with their paths.',
    parameters: {
      type: 'object',
      properties: { pattern: { type: 'string' }, path: { type: 'string' } },
      required: ['pattern'],
      additionalProperties: false,
    },
  },
  Write: {
    name: 'Write',
    description: 'Propose the whole content of a file. A person sees the change as a diff and approves it before it is written.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, content: { type: 'string' } },
      required: ['path', 'content'],
      additionalProperties: false,
    },
  },
  Edit: {
    name: 'Edit',
    description: 'Propose replacing one exact occurrence of old_string with new_string in a file. Shown as a diff for approval.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, old_string: { type: 'string' }, new_string: { type: 'string' } },
      required: ['path', 'old_string', 'new_string'],
      additionalProperties: false,
    },
  },
  Bash: {
    name: 'Bash',
    description: 'Run a shell command in the working copy, inside a sandbox without network. Subject to the project policy.',
    parameters: {
      type: 'object',
      properties: { command: { type: 'string' }, timeout_ms: { type: 'integer', minimum: 1 } },
      required: ['command'],
      additionalProperties: false,
    },
  },
  Task: {
    name: 'Task',
    description: 'Delegate a self-contained piece of work to a subagent. background: true returns a task id at once.',
    parameters: {
      type: 'object',
      properties: { agent: { type: 'string' }, instruction: { type: 'string' }, background: { type: 'boolean' } },
      required: ['agent', 'instruction'],
      additionalProperties: false,
    },
  },
  TaskResult: {
    name: 'TaskResult',
    description: 'Read the report of a background task started with Task.',
    parameters: { type: 'object', properties: { task_id: { type: 'string' } }, required: ['task_id'], additionalProperties: false },
  },
  Question: {
    name: 'Question',
    description: 'Ask the developer a question (interactive sessions only).',
    parameters: {
      type: 'object',
      properties: { question: { type: 'string' }, options: { type: 'array', items: { type: 'string' } } },
      required: ['question'],
      additionalProperties: false,
    },
  },
});

export const ALL_TOOLS = Object.keys(TOOL_DEFINITIONS);
export const READ_ONLY_TOOLS = ['Read', 'List', 'Search'];

/**
 * The fixed catalogue of a session: every tool, minus those the policy disables, closed by the agent's
 * `tools` list and by read-only mode. Computed at session start; the policy is still consulted on every
 * call, so a tool disabled later is refused on the next action (P3).
 */
export function sessionCatalogue(options: { disabled: readonly string[]; agentTools?: readonly string[]; readOnly?: boolean; allowTask?: boolean }): ToolDefinition[] {
  return ALL_TOOLS.filter((name) => !options.disabled.includes(name))
    .filter((name) => !options.agentTools || options.agentTools.includes(name))
    .filter((name) => !options.readOnly || READ_ONLY_TOOLS.includes(name))
    .filter((name) => options.allowTask !== false || (name !== 'Task' && name !== 'TaskResult'))
    .map((name) => TOOL_DEFINITIONS[name]!);
}
