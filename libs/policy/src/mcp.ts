import { z } from 'zod';
import type { Decision } from './decision';
import type { Effect } from './schema';

// The same effects as the schema's.
const EFFECTS = ['allow', 'ask', 'deny'] as const satisfies readonly Effect[];

/**
 * MCP servers under the project policy (AG7), the policy document's `mcp` section: declared by the administrator, each either local (a
 * stdio command started inside the session's sandbox, so with its network — none — and its view of
 * the files) or remote (streamable HTTP reached by the gateway only, at the URL listed here, with a
 * credential the gateway holds by name). Every tool is decided like a command: free, ask (the
 * default) or forbidden; tools offered in read-only modes are named; each tool's description is
 * pinned when the administrator enables it, and a tool whose description changed is withheld.
 *
 * Everything here is pure: hashing a description is the caller's (the gateway's), so the same rules
 * run in the console's editor.
 */

/** A server's name: what agents list (`files`, `files/read_file`) and what the model sees (`mcp__files__read_file`). */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,30}$/;
/** Tool names as servers give them, restricted to what a model's tool name can carry. */
export const MCP_TOOL_NAME = /^[A-Za-z0-9_-]{1,48}$/;
/** A pinned description: `sha256:` and 64 hex digits, as the gateway computes it. */
export const MCP_PIN = /^sha256:[0-9a-f]{64}$/;

const toolNames = z.array(z.string().regex(MCP_TOOL_NAME, 'a tool name is 1 to 48 letters, digits, - or _')).max(500);

const toolsSchema = z
  .strictObject({
    default: z.enum(EFFECTS).default('ask').describe('Decision for a tool no list names (ask unless set).'),
    free: toolNames.default([]).describe('Tools that run without approval.'),
    forbidden: toolNames.default([]).describe('Tools never offered to the model and refused if called.'),
    readOnly: toolNames.default([]).describe('Tools that only read: the only ones offered in plan and chat modes.'),
  })
  .superRefine((tools, ctx) => {
    const forbidden = new Set(tools.forbidden);
    tools.free.forEach((t, i) => {
      if (forbidden.has(t)) ctx.addIssue({ code: 'custom', path: ['free', i], message: `${t} is also forbidden; a tool cannot be both` });
    });
  });

const localSchema = z.strictObject({
  command: z.array(z.string().min(1).max(4096)).min(1).max(64).describe('The server\'s argv, started inside the session\'s sandbox (e.g. ["node", "/opt/mcp/filesystem.js", "/workspace"]).'),
  timeoutSeconds: z.number().int().min(1).max(3600).default(60).describe('Longest one call may take before it is refused as timed out.'),
  memoryMb: z
    .number()
    .int()
    .min(16)
    .max(64 * 1024)
    .default(512)
    .describe("The server process's memory cap inside the sandbox."),
});

const remoteSchema = z.strictObject({
  url: z
    .string()
    .refine(
      (s) => {
        try {
          const u = new URL(s);
          return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password && !u.hash;
        } catch {
          return false;
        }
      },
      { message: 'must be an http:// or https:// URL without credentials or fragment (a credential is named, never written here)' },
    )
    .describe('The streamable HTTP endpoint the gateway reaches; the sandbox never does.'),
  credential: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,62}$/, 'a credential is named by lower-case letters, digits and -')
    .optional()
    .describe('The name of a credential the gateway holds for this server; it is never shown to the model or the sandbox.'),
  timeoutSeconds: z.number().int().min(1).max(3600).default(60),
});

const serverSchema = z
  .strictObject({
    local: localSchema.optional(),
    remote: remoteSchema.optional(),
    tools: toolsSchema.prefault({}),
    pinned: z
      .record(z.string().regex(MCP_TOOL_NAME), z.string().regex(MCP_PIN, 'a pin is sha256: and 64 lower-case hex digits'))
      .default({})
      .describe("Each tool's description as the administrator approved it; a tool whose description no longer matches is withheld."),
  })
  .superRefine((server, ctx) => {
    if ((server.local === undefined) === (server.remote === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'a server is either local (a command run in the sandbox) or remote (a URL the gateway reaches): give exactly one' });
    }
  });

export const mcpSchema = z.strictObject({
  servers: z
    .record(z.string().regex(MCP_SERVER_NAME, 'a server name is a lower-case letter followed by up to 30 lower-case letters, digits or -'), serverSchema)
    .default({})
    .refine((servers) => Object.keys(servers).length <= 32, { message: 'at most 32 MCP servers per project' })
    .describe('MCP servers enabled for this project; a server not named here is neither described nor reachable.'),
});

export type McpPolicy = z.output<typeof mcpSchema>;
export type McpServer = McpPolicy['servers'][string];

/** The name the model calls a server's tool by. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool}`;
}

/** The server and tool of a model-facing name, or null when it is no MCP tool's name. */
export function parseMcpToolName(name: string): { server: string; tool: string } | null {
  const m = /^mcp__([a-z][a-z0-9-]{0,30})__([A-Za-z0-9_-]{1,48})$/.exec(name);
  return m ? { server: m[1] as string, tool: m[2] as string } : null;
}

/** Where a session's agent stands: what narrows the catalogue beyond the policy. */
export interface McpScope {
  /** The agent's own `tools` list; null when it declares none (then every enabled server's tools). */
  agentTools: readonly string[] | null;
  /** The servers the parent (and its persona) may use; null for a main session. A subagent never widens it. */
  parentServers: ReadonlySet<string> | null;
  /** Plan and chat modes only get tools the administrator marked read-only. */
  readOnly: boolean;
}

/** A tool a server listed, with the pin of its description as it reads now (computed by the gateway). */
export interface ListedTool {
  name: string;
  pin: string;
}

/**
 * Whether the agent's list names the tool: by server (`files`), or exactly (`files/read_file`, or
 * the model's name for it, as a subagent inherits it from its parent's catalogue).
 */
function agentLists(agentTools: readonly string[] | null, server: string, tool: string): boolean {
  if (agentTools === null) return true;
  return agentTools.includes(server) || agentTools.includes(`${server}/${tool}`) || agentTools.includes(mcpToolName(server, tool));
}

/** An entry of an agent's `tools` list that names an MCP server (`files`) or one of its tools (`files/read_file`). */
export const MCP_TOOL_REFERENCE = /^[a-z][a-z0-9-]{0,30}(\/[A-Za-z0-9_-]{1,48})?$/;

/**
 * Whether any tool of a server could be offered in this scope (its parent had the server, the
 * agent's list names it or one of its tools): a server the scope withholds whole need not be
 * started or reached at all.
 */
export function mcpServerInScope(scope: McpScope, server: string): boolean {
  if (scope.parentServers !== null && !scope.parentServers.has(server)) return false;
  if (scope.agentTools === null) return true;
  return scope.agentTools.some((t) => t === server || t.startsWith(`${server}/`) || parseMcpToolName(t)?.server === server);
}

/** Why a tool is not offered or not run, as a sentence; null when the scope allows it. */
export function withheld(policy: McpPolicy, scope: McpScope, server: string, tool: string, pin: string | null): { rule: string; reason: string } | null {
  const declared = policy.servers[server];
  if (!declared) {
    return { rule: 'mcp.servers', reason: `The project's policy enables no MCP server named "${server}", so its tools are neither described nor reachable.` };
  }
  if (scope.parentServers !== null && !scope.parentServers.has(server)) {
    return { rule: 'mcp.subagent', reason: `A subagent cannot use the MCP server "${server}": the session that started it was not given that server, and a subagent never has more than its parent.` };
  }
  if (!agentLists(scope.agentTools, server, tool)) {
    return { rule: 'mcp.agent', reason: `The agent's tools list names neither "${server}" nor "${server}/${tool}", so this tool is outside its catalogue.` };
  }
  if (declared.tools.forbidden.includes(tool)) {
    return { rule: 'mcp.tools.forbidden', reason: `The project's policy forbids the MCP tool ${server}/${tool}.` };
  }
  if (scope.readOnly && !declared.tools.readOnly.includes(tool)) {
    return { rule: 'mcp.tools.readOnly', reason: `This mode only reads, and the administrator has not marked the MCP tool ${server}/${tool} as read-only.` };
  }
  const pinned = declared.pinned[tool];
  if (pinned === undefined) {
    return { rule: 'mcp.pinned', reason: `The MCP tool ${server}/${tool} has no approved description yet: an administrator pins it before the model may see it.` };
  }
  if (pin !== null && pin !== pinned) {
    return {
      rule: 'mcp.pinned',
      reason: `The description of the MCP tool ${server}/${tool} changed since an administrator approved it (${pinned.slice(0, 19)}…, now ${pin.slice(0, 19)}…); it is withheld until they approve the new one.`,
    };
  }
  return null;
}

/**
 * The catalogue a session's model is offered: each listed tool of each enabled server that the
 * scope allows, and every other one with the sentence that withholds it (for the audit log and the
 * administrator's view).
 */
export function mcpCatalogue(
  policy: McpPolicy,
  scope: McpScope,
  listed: readonly { server: string; tools: readonly ListedTool[] }[],
): { offered: { server: string; tool: string; name: string }[]; withheld: { server: string; tool: string; rule: string; reason: string }[] } {
  const offered: { server: string; tool: string; name: string }[] = [];
  const refused: { server: string; tool: string; rule: string; reason: string }[] = [];
  for (const { server, tools } of listed) {
    for (const t of tools) {
      const why = withheld(policy, scope, server, t.name, t.pin);
      if (why) refused.push({ server, tool: t.name, ...why });
      else offered.push({ server, tool: t.name, name: mcpToolName(server, t.name) });
    }
  }
  return { offered, withheld: refused };
}

/**
 * The decision on one call of an MCP tool (P8: effect, rule, sentence). `pin` is the tool's
 * description as the server gives it now, or null when the call is judged before listing.
 */
export function decideMcpCall(policy: McpPolicy, scope: McpScope, server: string, tool: string, pin: string | null): Decision {
  const why = withheld(policy, scope, server, tool, pin);
  if (why) return { effect: 'deny', ...why };
  const tools = (policy.servers[server] as McpServer).tools;
  if (tools.free.includes(tool)) return { effect: 'allow', rule: 'mcp.tools.free', reason: `The project's policy lets the MCP tool ${server}/${tool} run without approval.` };
  const effect: Effect = tools.default;
  const words: Record<Effect, string> = {
    allow: `No list of the project's policy names the MCP tool ${server}/${tool}, and the server's default is to run it.`,
    ask: `No list of the project's policy names the MCP tool ${server}/${tool}, so it needs approval.`,
    deny: `No list of the project's policy names the MCP tool ${server}/${tool}, and the server's default is to refuse it.`,
  };
  return { effect, rule: `mcp.servers.${server}.tools.default`, reason: words[effect] };
}
