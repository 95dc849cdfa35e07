import { decideMcpCall, mcpCatalogue, mcpToolName, mcpWithheld, parseMcpToolName, type McpScope } from '../../src';
import { checkPolicy } from '../../src/check';
import { mcpSchema } from '../../src/mcp';

const PIN = (c: string) => `sha256:${c.repeat(64)}`;

const policy = mcpSchema.parse({
  servers: {
    files: {
      local: { command: ['node', '/opt/mcp/filesystem.js', '/workspace'] },
      tools: { free: ['read_file'], forbidden: ['delete_file'], readOnly: ['read_file', 'list_directory'] },
      pinned: { read_file: PIN('a'), list_directory: PIN('b'), write_file: PIN('c'), delete_file: PIN('d') },
    },
    issues: {
      remote: { url: 'https://mcp.example.org/mcp', credential: 'issues-token' },
      tools: { default: 'deny', free: ['search'] },
      pinned: { search: PIN('e'), create: PIN('f') },
    },
  },
});

const MAIN: McpScope = { agentTools: null, parentServers: null, readOnly: false };

describe('the mcp section', () => {
  it('is empty by default: no server is reachable unless an administrator names it', () => {
    expect(mcpSchema.parse({})).toEqual({ servers: {} });
    expect(decideMcpCall(mcpSchema.parse({}), MAIN, 'files', 'read_file', null)).toMatchObject({ effect: 'deny', rule: 'mcp.servers' });
  });

  it('is part of the policy document: empty by default, checked where it is written', () => {
    expect(checkPolicy({ version: 1, mcp: { servers: { files: { local: { command: ['node', 'tools/mcp.cjs'] } } } } })).toEqual([]);
    expect(checkPolicy({ version: 1, mcp: { servers: { files: {} } } }).map((i) => i.path)).toEqual(['mcp.servers.files']);
    expect(checkPolicy({ version: 1, mcp: { servers: { files: { local: { command: ['x'] }, tools: { free: ['a'], forbidden: ['a'] } } } } }).map((i) => i.path)).toEqual([
      'mcp.servers.files.tools.free[0]',
    ]);
  });

  it.each([
    [{ files: {} }, /either local .* or remote .*: give exactly one/],
    [{ files: { local: { command: ['x'] }, remote: { url: 'https://a.example/mcp' } } }, /give exactly one/],
    [{ Files: { local: { command: ['x'] } } }, /a server name is a lower-case letter/],
    [{ files: { remote: { url: 'https://user:secret@a.example/mcp' } } }, /without credentials/],
    [{ files: { remote: { url: 'file:///etc/passwd' } } }, /must be an http:\/\/ or https:\/\/ URL/],
    [{ files: { local: { command: [] } } }, /command/],
    [{ files: { local: { command: ['x'] }, tools: { free: ['a'], forbidden: ['a'] } } }, /a is also forbidden; a tool cannot be both/],
    [{ files: { local: { command: ['x'] }, tools: { free: ['has space'] } } }, /a tool name is 1 to 48 letters/],
    [{ files: { local: { command: ['x'] }, pinned: { a: 'md5:abc' } } }, /a pin is sha256: and 64 lower-case hex digits/],
    [{ files: { local: { command: ['x'] }, secret: 'x' } }, /secret/],
  ])('refuses a malformed server with a sentence: %j', (servers, message) => {
    const result = mcpSchema.safeParse({ servers });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toMatch(message);
  });
});

describe('mcp tool names', () => {
  it('round-trip between server/tool and the name the model calls', () => {
    expect(mcpToolName('files', 'read_file')).toBe('mcp__files__read_file');
    expect(parseMcpToolName('mcp__files__read_file')).toEqual({ server: 'files', tool: 'read_file' });
    for (const name of ['Read', 'mcp__files', 'mcp__Files__x', 'mcp__files__a b', 'mcp__fi_les__x', `mcp__files__${'x'.repeat(49)}`]) expect(parseMcpToolName(name)).toBeNull();
    // A server name has no underscore, so a tool's own double underscore stays the tool's.
    expect(parseMcpToolName('mcp__files__x__y')).toEqual({ server: 'files', tool: 'x__y' });
  });
});

describe('decideMcpCall: every call judged (free, ask by default, forbidden), each refusal a sentence', () => {
  it('free runs, the default asks, a server whose default refuses refuses, a forbidden tool is refused', () => {
    expect(decideMcpCall(policy, MAIN, 'files', 'read_file', PIN('a'))).toMatchObject({ effect: 'allow', rule: 'mcp.tools.free' });
    expect(decideMcpCall(policy, MAIN, 'files', 'write_file', PIN('c'))).toEqual({
      effect: 'ask',
      rule: 'mcp.servers.files.tools.default',
      reason: "No list of the project's policy names the MCP tool files/write_file, so it needs approval.",
    });
    expect(decideMcpCall(policy, MAIN, 'issues', 'create', PIN('f'))).toMatchObject({ effect: 'deny', rule: 'mcp.servers.issues.tools.default' });
    expect(decideMcpCall(policy, MAIN, 'files', 'delete_file', PIN('d'))).toEqual({
      effect: 'deny',
      rule: 'mcp.tools.forbidden',
      reason: "The project's policy forbids the MCP tool files/delete_file.",
    });
  });

  // Generated: every refusal × every scope it can come from; each refusal wins over any effect the tool would have.
  const scopes: [string, McpScope][] = [
    ['a main session', MAIN],
    ['an agent listing the server', { ...MAIN, agentTools: ['Read', 'files'] }],
    ['an agent listing the tool', { ...MAIN, agentTools: ['files/read_file'] }],
    ['a subagent whose parent has the server', { ...MAIN, parentServers: new Set(['files']) }],
    ['plan mode', { ...MAIN, readOnly: true }],
  ];
  it.each(scopes)('%s: an undeclared server is refused, whatever its name', (_, scope) => {
    for (const server of ['github', 'file', 'files2', 'issue']) {
      expect(decideMcpCall(policy, scope, server, 'read_file', null)).toMatchObject({ effect: 'deny', rule: 'mcp.servers', reason: expect.stringContaining(`no MCP server named "${server}"`) });
    }
  });

  it.each(scopes)('%s: a changed description is withheld (the rug pull), even for a free tool', (_, scope) => {
    expect(decideMcpCall(policy, scope, 'files', 'read_file', PIN('9'))).toMatchObject({
      effect: 'deny',
      rule: 'mcp.pinned',
      reason: expect.stringMatching(/changed since an administrator approved it/),
    });
  });

  it('a tool no administrator pinned is withheld until one does', () => {
    expect(decideMcpCall(policy, MAIN, 'files', 'move_file', null)).toMatchObject({ effect: 'deny', rule: 'mcp.pinned', reason: expect.stringMatching(/no approved description yet/) });
  });

  it('the agent list closes the catalogue: by server or by server/tool, and nothing else', () => {
    const byTool: McpScope = { ...MAIN, agentTools: ['Read', 'files/read_file'] };
    expect(decideMcpCall(policy, byTool, 'files', 'read_file', PIN('a')).effect).toBe('allow');
    expect(decideMcpCall(policy, byTool, 'files', 'write_file', PIN('c'))).toMatchObject({ effect: 'deny', rule: 'mcp.agent' });
    expect(decideMcpCall(policy, byTool, 'issues', 'search', PIN('e'))).toMatchObject({ effect: 'deny', rule: 'mcp.agent' });
    // Listing nothing MCP shuts every server.
    const none: McpScope = { ...MAIN, agentTools: ['Read', 'Bash'] };
    expect(decideMcpCall(policy, none, 'files', 'read_file', PIN('a'))).toMatchObject({ effect: 'deny', rule: 'mcp.agent' });
  });

  it('a subagent never has a server its parent lacks, even when its own list names it', () => {
    const sub: McpScope = { agentTools: ['files', 'issues'], parentServers: new Set(['issues']), readOnly: false };
    expect(decideMcpCall(policy, sub, 'files', 'read_file', PIN('a'))).toMatchObject({ effect: 'deny', rule: 'mcp.subagent' });
    expect(decideMcpCall(policy, sub, 'issues', 'search', PIN('e')).effect).toBe('allow');
  });

  it('plan and chat modes get only the tools marked read-only', () => {
    const plan: McpScope = { ...MAIN, readOnly: true };
    expect(decideMcpCall(policy, plan, 'files', 'list_directory', PIN('b')).effect).toBe('ask');
    expect(decideMcpCall(policy, plan, 'files', 'write_file', PIN('c'))).toMatchObject({ effect: 'deny', rule: 'mcp.tools.readOnly' });
    expect(decideMcpCall(policy, plan, 'issues', 'search', PIN('e'))).toMatchObject({ effect: 'deny', rule: 'mcp.tools.readOnly' });
  });
});

describe('mcpCatalogue: what the model is offered, and why the rest is not', () => {
  it('offers only what every rule allows and names the rule for each withheld tool', () => {
    const listed = [
      { server: 'files', tools: ['read_file', 'list_directory', 'write_file', 'delete_file', 'move_file'].map((name, i) => ({ name, pin: i === 4 ? PIN('7') : PIN('abcd'[i] as string) })) },
      { server: 'issues', tools: [{ name: 'search', pin: PIN('0') }] },
      { server: 'rogue', tools: [{ name: 'anything', pin: PIN('1') }] },
    ];
    const c = mcpCatalogue(policy, MAIN, listed);
    expect(c.offered.map((t) => t.name)).toEqual(['mcp__files__read_file', 'mcp__files__list_directory', 'mcp__files__write_file']);
    expect(c.withheld.map((t) => [`${t.server}/${t.tool}`, t.rule])).toEqual([
      ['files/delete_file', 'mcp.tools.forbidden'],
      ['files/move_file', 'mcp.pinned'],
      ['issues/search', 'mcp.pinned'],
      ['rogue/anything', 'mcp.servers'],
    ]);
    // The same answer as deciding each call: nothing offered is refused when called, nothing withheld runs.
    for (const t of c.offered) expect(mcpWithheld(policy, MAIN, t.server, t.tool, null)).toBeNull();
    for (const t of c.withheld) expect(decideMcpCall(policy, MAIN, t.server, t.tool, listed.find((l) => l.server === t.server)!.tools.find((x) => x.name === t.tool)!.pin).effect).toBe('deny');
  });
});
