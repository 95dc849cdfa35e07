import fc from 'fast-check';
import { MCP_TOOL_REFERENCE } from '@lemniscate/policy';
import { agentExecutionLayer, agentNameOf, AgentFileError, MAX_AGENT_FILE_CHARS, MCP_REFERENCE, parseAgentFile } from '../../src/agent-file';
import { resolveExecutionConfig } from '../../src/execution-config';

const LOCATION = '.lemniscate/agents/revue.md';
const parse = (text: string, fileName = 'revue.md') => parseAgentFile(fileName, text, 'project', LOCATION);

function failure(run: () => unknown): AgentFileError {
  try {
    run();
  } catch (error) {
    if (error instanceof AgentFileError) return error;
    throw error;
  }
  throw new Error('expected an AgentFileError, but the file was accepted');
}

describe('parseAgentFile', () => {
  it('reads the example of the reference text: frontmatter is configuration, body is the prompt, file name is the name', () => {
    const { agent, notices } = parse('---\ndescription: Relit le code avant une PR\ntools: Read, Search\nsessionMaxActions: 25\n---\n\nTu es un relecteur de code exigeant…\n');
    expect(agent).toEqual({
      name: 'revue',
      description: 'Relit le code avant une PR',
      mode: 'primary',
      tools: ['Read', 'Search'],
      model: null,
      readOnly: false,
      hidden: false,
      disabled: false,
      execution: { sessionMaxActions: 25 },
      systemPrompt: 'Tu es un relecteur de code exigeant…',
      origin: 'project',
      location: LOCATION,
    });
    expect(notices).toEqual([]);
  });

  it('reads every documented key', () => {
    const { agent } = parse(
      '---\ndescription: d\nmode: all\ntools: [Read, Bash, Read]\nmodel: gpt-x\ndisable: true\nhidden: true\nreadOnly: true\n' +
        'sessionMaxMinutes: 10\ntoolLoopThreshold: 2\ntoolLoopDetection: false\nsubagentMaxDepth: 1\n---\nPrompt',
    );
    expect(agent).toMatchObject({
      mode: 'all',
      tools: ['Read', 'Bash'],
      model: 'gpt-x',
      disabled: true,
      hidden: true,
      readOnly: true,
      execution: { sessionMaxMinutes: 10, toolLoopThreshold: 2, toolLoopDetection: false, subagentMaxDepth: 1 },
    });
  });

  it('treats an empty tools list as "no tools at all", not as "inherit"', () => {
    expect(parse('---\ntools: []\n---\nx').agent.tools).toEqual([]);
    expect(parse('---\ntools: ""\n---\nx').agent.tools).toEqual([]);
    expect(parse('---\ndescription: d\n---\nx').agent.tools).toBeNull();
  });

  it('accepts a file without frontmatter, CRLF line ends and a byte-order mark', () => {
    expect(parse('Just a prompt.\n').agent).toMatchObject({ systemPrompt: 'Just a prompt.', mode: 'primary', tools: null });
    expect(parse('\uFEFF---\r\ndescription: d\r\n---\r\nBody\r\n').agent).toMatchObject({ description: 'd', systemPrompt: 'Body' });
    expect(parse('---\n---\nBody').agent.systemPrompt).toBe('Body');
  });

  it('ignores a name field with a warning: the file name is the name', () => {
    const { agent, notices } = parse('---\nname: admin\n---\nx');
    expect(agent.name).toBe('revue');
    expect(notices).toEqual([
      { level: 'warning', code: 'name_field_ignored', location: LOCATION, message: `${LOCATION}: the name field is ignored; the agent is called "revue" after its file name.` },
    ]);
  });

  it('warns about unknown keys, unknown tools, a delegatable agent without description and an empty body', () => {
    const { agent, notices } = parse('---\nmode: subagent\ncolour: red\ntools: Read, Curl\n---\n');
    expect(agent.tools).toEqual(['Read', 'Curl']);
    expect(notices.map((n) => n.code)).toEqual(['unknown_key', 'unknown_tool', 'missing_description', 'empty_prompt']);
    expect(notices[1]!.message).toBe(`${LOCATION}: "Curl" is not a tool this platform offers nor an MCP server (files) or server tool (files/read_file); it will never be available to this agent.`);
  });

  it('takes an MCP server or one of its tools in the tools list without a warning (AG7)', () => {
    const { agent, notices } = parse('---\ntools: Read, files, files/read_file, git-hub/list_issues\n---\nBody');
    expect(agent.tools).toEqual(['Read', 'files', 'files/read_file', 'git-hub/list_issues']);
    expect(notices).toEqual([]);
    // What is neither a tool nor an MCP reference still warns: an upper-case server, a path.
    for (const odd of ['Files/read', 'files/', '/etc', 'files/a/b']) {
      expect(parse(`---\ntools: [${JSON.stringify(odd)}]\n---\nBody`).notices.map((n) => n.code)).toEqual(['unknown_tool']);
    }
  });

  it('recognises MCP references exactly as the policy library does', () => {
    expect(MCP_REFERENCE.source).toBe(MCP_TOOL_REFERENCE.source);
  });

  it.each([
    ['mode: helper', 'mode must be primary, subagent or all (got "helper"); fix the frontmatter.'],
    ['disable: yes', 'disable must be true or false (got "yes"); fix the frontmatter.'],
    ['hidden: 1', 'hidden must be true or false (got 1); fix the frontmatter.'],
    ['readOnly: "true"', 'readOnly must be true or false (got "true"); fix the frontmatter.'],
    ['tools: 3', 'tools must be a list of tool names or a comma-separated line such as "Read, Search" (got 3); fix the frontmatter.'],
    ['tools: [Read, 3]', 'tools must be a list of tool names or a comma-separated line such as "Read, Search" (got a list); fix the frontmatter.'],
    ['description: [a]', 'description must be a line of text (got a list); fix the frontmatter.'],
    ['model: ""', 'model must be a model name (got ""); fix the frontmatter.'],
    ['sessionMaxActions: abc', 'sessionMaxActions: "abc" in .lemniscate/agents/revue.md is not a whole number of actions; fix or remove it.'],
    ['subagentMaxDepth: 0', 'subagentMaxDepth: 0 in .lemniscate/agents/revue.md is refused'],
    ['toolLoopDetection: no', 'toolLoopDetection: "no" in .lemniscate/agents/revue.md is not true or false'],
  ])('refuses "%s" with a sentence naming the file', (line, message) => {
    const error = failure(() => parse(`---\n${line}\n---\nx`));
    expect(error.code).toBe('invalid_frontmatter');
    expect(error.location).toBe(LOCATION);
    expect(error.message).toContain(message);
    expect(error.message).toContain(LOCATION);
  });

  it.each([
    ['---\ndescription: a\n', 'the frontmatter opened by "---" on the first line is never closed'],
    ['---\ndescription: [unclosed\n---\nx', 'the frontmatter is not valid YAML'],
    ['---\ndescription: a\ndescription: b\n---\nx', 'the frontmatter is not valid YAML (Map keys must be unique'],
    ['---\n- a\n- b\n---\nx', 'the frontmatter must be a mapping of keys such as description and tools, not a list.'],
    ['---\njust words\n---\nx', 'the frontmatter must be a mapping of keys such as description and tools, not "just words".'],
  ])('refuses malformed frontmatter %j', (text, message) => {
    expect(failure(() => parse(text)).message).toContain(message);
  });

  it('refuses a YAML alias bomb instead of expanding it', () => {
    // Ten levels of eight aliases each: 8^9 copies if expanded.
    const lines = ['a: &a [x, x, x, x, x, x, x, x]'];
    for (const [previous, current] of [...'abcdefghij'].slice(1).map((c, i) => ['abcdefghij'[i], c])) {
      lines.push(`${current}: &${current} [${Array(8).fill(`*${previous}`).join(', ')}]`);
    }
    const bomb = ['---', ...lines, '---', 'x'].join('\n');
    const error = failure(() => parse(bomb));
    expect(error.code).toBe('invalid_frontmatter');
    expect(error.message).toContain('the frontmatter could not be read (Excessive alias count');
  });

  it('refuses a file too large to be a prompt', () => {
    expect(failure(() => parse('x'.repeat(MAX_AGENT_FILE_CHARS + 1))).message).toContain('larger than 256 KiB');
  });

  it('refuses a file name that cannot name an agent', () => {
    for (const fileName of ['.hidden.md', 'with space.md', 'é.md', 'notes.txt', `${'a'.repeat(65)}.md`]) {
      expect(failure(() => parse('x', fileName)).code).toBe('invalid_file_name');
    }
    expect(agentNameOf('revue.md')).toBe('revue');
    expect(agentNameOf('code-review_2.v1.md')).toBe('code-review_2.v1');
    expect(agentNameOf('revue.MD')).toBeNull();
  });

  it('feeds its execution keys to resolveExecutionConfig as the highest layer', () => {
    const { agent } = parse('---\nsessionMaxActions: 25\n---\nx');
    const resolved = resolveExecutionConfig({
      env: { LEMNISCATE_SESSION_MAX_ACTIONS: '10' },
      config: [{ location: 'config.yaml', values: { sessionMaxActions: 30 } }],
      agent: agentExecutionLayer(agent),
    });
    expect(resolved.config.sessionMaxActions).toBe(25);
    expect(resolved.origin.sessionMaxActions).toEqual({ layer: 'agent', location: LOCATION });
  });

  it('never crashes on arbitrary text: it returns an agent or an AgentFileError', () => {
    const yamlish = fc.array(fc.oneof(fc.string(), fc.constantFrom('---', 'mode: all', 'tools:', '- Read', 'name: x', ': :', '&a', '*a', '!!binary x', 'disable: true')), { maxLength: 8 });
    fc.assert(
      fc.property(yamlish, (lines) => {
        try {
          const { agent } = parse(lines.join('\n'));
          return agent.name === 'revue' && (agent.tools === null || Array.isArray(agent.tools));
        } catch (error) {
          return error instanceof AgentFileError;
        }
      }),
    );
  });
});
