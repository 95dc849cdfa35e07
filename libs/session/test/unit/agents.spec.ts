import fc from 'fast-check';
import { KNOWN_TOOLS, READ_ONLY_TOOLS } from '../../src/agent-file';
import { AgentCatalogue, AgentUnavailableError, BUILTIN_AGENTS, discoverAgents, effectiveTools, pickModel, type AgentDirectory } from '../../src/agents';

/** An in-memory directory; `failing` names files whose read throws like an I/O error. */
function directory(location: string, files: Record<string, string>, failing: string[] = []): AgentDirectory {
  return {
    location,
    list: async () => [...Object.keys(files), ...failing],
    read: async (name) => {
      if (failing.includes(name)) throw new Error('EACCES: permission denied');
      const text = files[name];
      if (text === undefined) throw new Error(`ENOENT: ${name}`);
      return text;
    },
  };
}

const PROJECT = '.lemniscate/agents';
const USER = '~/.lemniscate/agents';

function unavailable(run: () => unknown): AgentUnavailableError {
  try {
    run();
  } catch (error) {
    if (error instanceof AgentUnavailableError) return error;
    throw error;
  }
  throw new Error('expected an AgentUnavailableError');
}

describe('discoverAgents', () => {
  it('offers the built-ins general and explore with nothing on disk', async () => {
    const catalogue = await discoverAgents({});
    expect(catalogue.listed().map((a) => a.name)).toEqual(['explore', 'general']);
    expect(catalogue.forDelegation('explore')).toMatchObject({ tools: ['Read', 'List', 'Search'], readOnly: true, origin: 'builtin' });
    expect(catalogue.forDelegation('general')).toMatchObject({ tools: null, readOnly: false });
    expect(catalogue.notices).toEqual([]);
  });

  it('reads both directories; the repository wins a collision and says what it shadowed', async () => {
    const catalogue = await discoverAgents({
      user: directory(USER, { 'revue.md': '---\ndescription: mine\n---\nuser prompt', 'perso.md': 'personal' }),
      project: directory(PROJECT, { 'revue.md': '---\ndescription: team\n---\nteam prompt' }),
    });
    expect(catalogue.forUser('revue')).toMatchObject({ description: 'team', origin: 'project', location: `${PROJECT}/revue.md` });
    expect(catalogue.forUser('perso').origin).toBe('user');
    expect(catalogue.notices).toEqual([{ level: 'note', code: 'shadowed', location: `${PROJECT}/revue.md`, message: `${PROJECT}/revue.md is used for agent "revue"; it shadows ${USER}/revue.md.` }]);
  });

  it('ignores files that are not Markdown', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, { 'notes.txt': 'x', 'revue.md': 'y' }) });
    expect(catalogue.listed().map((a) => a.name)).toEqual(['explore', 'general', 'revue']);
  });

  it('removes a disabled agent, the user copy it shadows included, and says why when asked for it', async () => {
    const catalogue = await discoverAgents({
      user: directory(USER, { 'old.md': 'still here' }),
      project: directory(PROJECT, { 'old.md': '---\ndisable: true\n---\nx' }),
    });
    expect(catalogue.listed().map((a) => a.name)).not.toContain('old');
    const error = unavailable(() => catalogue.forUser('old'));
    expect(error.code).toBe('agent_disabled');
    expect(error.message).toBe(`Agent "old" is disabled (disable: true in ${PROJECT}/old.md).`);
    expect(catalogue.notices.map((n) => n.code)).toEqual(['shadowed', 'disabled']);
  });

  it('hides a hidden agent from listings but keeps it invocable by name', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, { 'secret.md': '---\nhidden: true\nmode: all\ndescription: d\n---\nx' }) });
    expect(catalogue.listed().map((a) => a.name)).not.toContain('secret');
    expect(catalogue.delegatable().map((a) => a.name)).not.toContain('secret');
    expect(catalogue.forUser('secret').name).toBe('secret');
    expect(catalogue.forDelegation('secret').name).toBe('secret');
  });

  it('flags and discards namesakes of the built-ins, whatever their case', async () => {
    const catalogue = await discoverAgents({
      project: directory(PROJECT, { 'general.md': '---\nmode: all\ndescription: d\ntools: [Bash]\n---\nI am general now', 'Explore.md': 'x' }),
    });
    expect(catalogue.forDelegation('general').origin).toBe('builtin');
    expect(() => catalogue.forUser('Explore')).toThrow('There is no agent named "Explore"');
    expect(catalogue.notices.map((n) => [n.code, n.level])).toEqual([
      ['reserved_name', 'warning'],
      ['reserved_name', 'warning'],
    ]);
    expect(catalogue.notices[1]!.message).toBe(`${PROJECT}/general.md: "general" is the name of a built-in agent; this file is discarded. Rename it to use it.`);
  });

  it('reports a bad file and goes on with the others', async () => {
    const catalogue = await discoverAgents({
      project: directory(PROJECT, { 'broken.md': '---\nmode: boss\n---\nx', 'good.md': 'fine', 'bad name.md': 'x' }, ['locked.md']),
    });
    expect(catalogue.listed().map((a) => a.name)).toEqual(['explore', 'general', 'good']);
    expect(catalogue.notices).toEqual([
      {
        level: 'error',
        code: 'invalid_file_name',
        location: `${PROJECT}/bad name.md`,
        message: `${PROJECT}/bad name.md: an agent file name must be letters, digits, ".", "-" or "_" (at most 64) followed by ".md"; rename the file. The agent is not available until it is fixed.`,
      },
      {
        level: 'error',
        code: 'invalid_frontmatter',
        location: `${PROJECT}/broken.md`,
        message: `${PROJECT}/broken.md: mode must be primary, subagent or all (got "boss"); fix the frontmatter. The agent is not available until it is fixed.`,
      },
      { level: 'error', code: 'unreadable_file', location: `${PROJECT}/locked.md`, message: `${PROJECT}/locked.md could not be read (EACCES: permission denied); it is skipped.` },
    ]);
  });

  it('falls back to the user copy when the repository copy is broken, and says so', async () => {
    const catalogue = await discoverAgents({
      user: directory(USER, { 'revue.md': 'user prompt' }),
      project: directory(PROJECT, { 'revue.md': '---\ntools: 3\n---\nx' }),
    });
    expect(catalogue.forUser('revue').origin).toBe('user');
    expect(catalogue.notices.map((n) => n.code)).toEqual(['invalid_frontmatter']);
  });

  it('reports a directory that cannot be listed without losing the other one', async () => {
    const broken: AgentDirectory = {
      location: USER,
      list: async () => {
        throw new Error('EIO: i/o error');
      },
      read: async () => '',
    };
    const catalogue = await discoverAgents({ user: broken, project: directory(PROJECT, { 'a.md': 'x' }) });
    expect(catalogue.forUser('a').name).toBe('a');
    expect(catalogue.notices).toEqual([{ level: 'error', code: 'unreadable_directory', location: USER, message: `${USER} could not be listed (EIO: i/o error); no agent was read from it.` }]);
  });

  it('passes on the warnings of each file', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, { 'a.md': '---\nname: root\n---\nx' }) });
    expect(catalogue.notices.map((n) => n.code)).toEqual(['name_field_ignored']);
  });
});

describe('AgentCatalogue selection', () => {
  const files = {
    'solo.md': '---\ndescription: user only\n---\nx',
    'helper.md': '---\nmode: subagent\ndescription: delegation only\n---\nx',
    'both.md': '---\nmode: all\ndescription: both\n---\nx',
  };

  it('delegates only to mode subagent or all (AG3)', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, files) });
    expect(catalogue.delegatable().map((a) => a.name)).toEqual(['both', 'explore', 'general', 'helper']);
    const error = unavailable(() => catalogue.forDelegation('solo'));
    expect(error.code).toBe('agent_not_delegatable');
    expect(error.message).toBe('Agent "solo" cannot be delegated to: its file does not declare mode: subagent or mode: all. Do this work yourself or pick another agent.');
    expect(catalogue.forDelegation('helper').name).toBe('helper');
  });

  it('keeps mode: subagent agents, built-ins included, for delegation only', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, files) });
    expect(catalogue.forUser('solo').name).toBe('solo');
    expect(catalogue.forUser('both').name).toBe('both');
    for (const name of ['helper', 'general', 'explore']) {
      expect(unavailable(() => catalogue.forUser(name)).code).toBe('agent_for_delegation_only');
    }
    expect(unavailable(() => catalogue.forUser('helper')).message).toBe('Agent "helper" is reserved for delegation (mode: subagent); it cannot drive a session itself.');
  });

  it('names the available agents when asked for an unknown one', async () => {
    const catalogue = await discoverAgents({ project: directory(PROJECT, files) });
    expect(unavailable(() => catalogue.forDelegation('nobody')).message).toBe('There is no agent named "nobody". Available: both, explore, general, helper, solo.');
    expect(unavailable(() => new AgentCatalogue([]).forUser('x')).message).toBe('There is no agent named "x". Available: none.');
  });

  it('exposes built-ins that cannot be altered', () => {
    expect(Object.isFrozen(BUILTIN_AGENTS)).toBe(true);
    for (const agent of BUILTIN_AGENTS) expect(Object.isFrozen(agent) && Object.isFrozen(agent.execution)).toBe(true);
    expect(Object.isFrozen(BUILTIN_AGENTS.find((a) => a.name === 'explore')!.tools)).toBe(true);
  });
});

describe('effectiveTools', () => {
  const all = { tools: [...KNOWN_TOOLS], readOnly: false };

  it('inherits the parent tools when the persona has no tools key', () => {
    expect(effectiveTools(all, { tools: null, readOnly: false })).toEqual(all);
  });

  it('intersects with a tools list, never adding what the parent lacks', () => {
    const parent = { tools: ['Read', 'Search', 'Bash'], readOnly: false };
    expect(effectiveTools(parent, { tools: ['Read', 'Write', 'Bash'], readOnly: false })).toEqual({ tools: ['Read', 'Bash'], readOnly: false });
    expect(effectiveTools(parent, { tools: [], readOnly: false }).tools).toEqual([]);
  });

  it('keeps read-only mode from either side', () => {
    expect(effectiveTools({ ...all, readOnly: true }, { tools: ['Bash', 'Read', 'Write'], readOnly: false })).toEqual({ tools: ['Read'], readOnly: true });
    expect(effectiveTools(all, { tools: null, readOnly: true })).toEqual({ tools: ['Read', 'List', 'Search', 'Question'], readOnly: true });
  });

  it('gives explore exactly Read, List, Search under a full parent, and nothing it lacks under a narrow one', () => {
    const explore = BUILTIN_AGENTS.find((a) => a.name === 'explore')!;
    expect(effectiveTools(all, explore, { delegated: true }).tools).toEqual(['Read', 'List', 'Search']);
    expect(effectiveTools({ tools: ['Read', 'Bash'], readOnly: false }, explore, { delegated: true }).tools).toEqual(['Read']);
  });

  it('removes Question from a delegated agent: nobody would answer it', () => {
    const general = BUILTIN_AGENTS.find((a) => a.name === 'general')!;
    expect(effectiveTools(all, general, { delegated: true }).tools).not.toContain('Question');
    expect(effectiveTools(all, general).tools).toContain('Question');
  });

  it("narrows the parent's MCP tools by server or server/tool, and never adds one the parent lacks (AG7)", () => {
    const parent = { tools: ['Read', 'mcp__files__read_file', 'mcp__files__write_file', 'mcp__issues__list'], readOnly: false };
    expect(effectiveTools(parent, { tools: null, readOnly: false }).tools).toEqual(parent.tools);
    expect(effectiveTools(parent, { tools: ['Read', 'files'], readOnly: false }).tools).toEqual(['Read', 'mcp__files__read_file', 'mcp__files__write_file']);
    expect(effectiveTools(parent, { tools: ['files/read_file', 'issues/list', 'search'], readOnly: false }).tools).toEqual(['mcp__files__read_file', 'mcp__issues__list']);
    expect(effectiveTools({ tools: ['Read'], readOnly: false }, { tools: ['files'], readOnly: false }).tools).toEqual([]);
    // Read-only: kept here, judged against the policy's read-only marks when the child's catalogue is fixed.
    expect(effectiveTools(parent, { tools: ['files'], readOnly: true })).toEqual({ tools: ['mcp__files__read_file', 'mcp__files__write_file'], readOnly: true });
  });

  it('is never wider than the parent, whatever the persona (property)', () => {
    const toolSet = fc.subarray([...KNOWN_TOOLS, 'Curl', 'mcp/x']);
    fc.assert(
      fc.property(toolSet, fc.boolean(), fc.option(toolSet, { nil: null }), fc.boolean(), fc.boolean(), (parentTools, parentRO, personaTools, personaRO, delegated) => {
        const result = effectiveTools({ tools: parentTools, readOnly: parentRO }, { tools: personaTools, readOnly: personaRO }, { delegated });
        return (
          result.tools.every((t) => parentTools.includes(t)) &&
          (personaTools === null || result.tools.every((t) => personaTools.includes(t))) &&
          result.readOnly === (parentRO || personaRO) &&
          (!result.readOnly || result.tools.every((t) => READ_ONLY_TOOLS.includes(t)))
        );
      }),
    );
  });

  it('narrows down a chain of delegations monotonically (property)', () => {
    const persona = fc.record({ tools: fc.option(fc.subarray([...KNOWN_TOOLS]), { nil: null }), readOnly: fc.boolean() });
    fc.assert(
      fc.property(fc.array(persona, { maxLength: 5 }), (chain) => {
        let rights = { tools: [...KNOWN_TOOLS] as readonly string[], readOnly: false };
        for (const p of chain) {
          const next = effectiveTools(rights, p, { delegated: true });
          if (!next.tools.every((t) => rights.tools.includes(t)) || (rights.readOnly && !next.readOnly)) return false;
          rights = next;
        }
        return true;
      }),
    );
  });
});

describe('pickModel', () => {
  it('uses a declared model that is configured, else keeps the current one with a warning', () => {
    expect(pickModel({ name: 'a', model: null }, ['m1'], 'm0')).toEqual({ model: 'm0', warning: null });
    expect(pickModel({ name: 'a', model: 'm1' }, ['m0', 'm1'], 'm0')).toEqual({ model: 'm1', warning: null });
    expect(pickModel({ name: 'a', model: 'm0' }, [], 'm0')).toEqual({ model: 'm0', warning: null });
    expect(pickModel({ name: 'revue', model: 'big' }, ['m0'], 'm0')).toEqual({
      model: 'm0',
      warning: 'Agent "revue" asks for model "big", which is not configured; "m0" is used instead.',
    });
  });
});
