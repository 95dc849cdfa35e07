import { mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelRequest, ToolDefinition } from '../../../src/model/model.types';
import { COMPACTION_TEXT, EXHAUSTED_TEXT, ScriptedProvider, loadModelScript } from '../../../src/model/scripted.provider';

const tools: ToolDefinition[] = [{ name: 'Bash', description: 'Run a command', parameters: { type: 'object' } }];
const withTools = (overrides: Partial<ModelRequest> = {}): ModelRequest => ({ messages: [], tools, signal: new AbortController().signal, ...overrides });
const withoutTools = (overrides: Partial<ModelRequest> = {}): ModelRequest => withTools({ tools: [], ...overrides });

/** The example of DESIGN.md, "The scripted model", verbatim. */
const designExample = {
  turns: [{ tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] }, { repeat: 200, tool_calls: [{ name: 'Bash', arguments: { command: 'echo {{i}}' } }] }, { text: 'Done: tests pass.' }],
};

describe('ScriptedProvider', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lemni-script-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function scripted(script: unknown, name = 'script.json'): Promise<ScriptedProvider> {
    const path = join(dir, name);
    await writeFile(path, JSON.stringify(script));
    return new ScriptedProvider(await loadModelScript(path), path);
  }

  it('replays the DESIGN.md example: one call, 200 repeated calls with {{i}}, then the text', async () => {
    const model = await scripted(designExample);
    const first = await model.complete(withTools());
    expect(first).toEqual({ toolCalls: [{ id: 'scripted_0_0', name: 'Bash', arguments: { command: 'npm test' } }], stopReason: 'tool_use' });

    const commands: unknown[] = [];
    for (let i = 0; i < 200; i++) {
      const turn = await model.complete(withTools());
      commands.push(turn.toolCalls[0]?.arguments.command);
    }
    expect(commands).toEqual(Array.from({ length: 200 }, (_, i) => `echo ${i}`));
    expect(new Set(commands).size).toBe(200);

    const deltas: string[] = [];
    await expect(model.complete(withTools({ onTextDelta: (d) => deltas.push(d) }))).resolves.toEqual({
      text: 'Done: tests pass.',
      toolCalls: [],
      stopReason: 'end_turn',
    });
    expect(deltas).toEqual(['Done: tests pass.']);
  });

  it('replaces {{i}} in every string of the arguments, nested ones included, and in the text', async () => {
    const model = await scripted({
      turns: [
        {
          repeat: 2,
          text: 'step {{i}} of 2',
          tool_calls: [{ name: 'Write', arguments: { path: 'f{{i}}.txt', content: '{{i}}-{{i}}', meta: { tags: ['t{{i}}', 3, true], n: null } } }],
        },
      ],
    });
    const a = await model.complete(withTools());
    const b = await model.complete(withTools());
    expect(a.text).toBe('step 0 of 2');
    expect(a.toolCalls[0]?.arguments).toEqual({ path: 'f0.txt', content: '0-0', meta: { tags: ['t0', 3, true], n: null } });
    expect(b.text).toBe('step 1 of 2');
    expect(b.toolCalls[0]?.arguments).toEqual({ path: 'f1.txt', content: '1-1', meta: { tags: ['t1', 3, true], n: null } });
  });

  it('leaves {{i}} as written in a turn without repeat', async () => {
    const model = await scripted({ turns: [{ tool_calls: [{ name: 'Write', arguments: { path: 't.mustache', content: 'row {{i}}' } }] }] });
    expect((await model.complete(withTools())).toolCalls[0]?.arguments.content).toBe('row {{i}}');
  });

  it('answers the final request without tools with the next text turn, skipping tool turns', async () => {
    const model = await scripted(designExample);
    await model.complete(withTools());
    await model.complete(withTools()); // echo 0
    await expect(model.complete(withoutTools({ purpose: 'final_summary' }))).resolves.toEqual({
      text: 'Done: tests pass.',
      toolCalls: [],
      stopReason: 'end_turn',
    });
    await expect(model.complete(withoutTools())).resolves.toEqual({ text: EXHAUSTED_TEXT, toolCalls: [], stopReason: 'end_turn' });
  });

  it('skips a turn that has both text and tool calls when no tools are offered', async () => {
    const model = await scripted({ turns: [{ text: 'calling', tool_calls: [{ name: 'Bash', arguments: { command: 'ls' } }] }, { text: 'summary' }] });
    expect((await model.complete(withoutTools())).text).toBe('summary');
  });

  it('answers "script exhausted" with no tool calls once the script is used up, with or without tools', async () => {
    const model = await scripted({ turns: [{ tool_calls: [{ name: 'Bash', arguments: { command: 'ls' } }] }] });
    await model.complete(withTools());
    await expect(model.complete(withTools())).resolves.toEqual({ text: 'script exhausted', toolCalls: [], stopReason: 'end_turn' });
    await expect(model.complete(withTools())).resolves.toEqual({ text: 'script exhausted', toolCalls: [], stopReason: 'end_turn' });
    await expect(model.complete(withoutTools())).resolves.toEqual({ text: 'script exhausted', toolCalls: [], stopReason: 'end_turn' });
  });

  it('answers the final request with "script exhausted" when only tool turns remain', async () => {
    const model = await scripted({ turns: [{ repeat: 5, tool_calls: [{ name: 'Bash', arguments: { command: 'echo {{i}}' } }] }] });
    expect((await model.complete(withoutTools())).text).toBe(EXHAUSTED_TEXT);
  });

  it('answers compaction requests without consuming a scripted turn', async () => {
    const model = await scripted(designExample);
    await expect(model.complete(withoutTools({ purpose: 'compaction' }))).resolves.toEqual({ text: COMPACTION_TEXT, toolCalls: [], stopReason: 'end_turn' });
    expect((await model.complete(withTools())).toolCalls[0]?.arguments).toEqual({ command: 'npm test' });
  });

  it('is deterministic: two providers on one script answer identically, ids included', async () => {
    const path = join(dir, 'same.json');
    await writeFile(path, JSON.stringify(designExample));
    const script = await loadModelScript(path);
    const run = async () => {
      const model = new ScriptedProvider(script, path);
      const out = [];
      for (let i = 0; i < 203; i++) out.push(await model.complete(i === 150 ? withoutTools() : withTools()));
      return out;
    };
    expect(await run()).toEqual(await run());
  });

  it('refuses a request whose signal is already aborted', async () => {
    const model = await scripted(designExample);
    const controller = new AbortController();
    controller.abort();
    await expect(model.complete(withTools({ signal: controller.signal }))).rejects.toMatchObject({ code: 'model_aborted' });
    // The refused request consumed nothing.
    expect((await model.complete(withTools())).toolCalls[0]?.arguments).toEqual({ command: 'npm test' });
  });

  describe('a bad script file is reported with its path and what is wrong', () => {
    it('a missing file', async () => {
      const path = join(dir, 'nope.json');
      await expect(loadModelScript(path)).rejects.toMatchObject({ code: 'model_script_invalid', message: `The model script ${path} does not exist.` });
    });

    it('a directory', async () => {
      await expect(loadModelScript(dir)).rejects.toMatchObject({ code: 'model_script_invalid', message: `The model script ${dir} is not a regular file.` });
    });

    // Root reads everything, so the permission failure can only be exercised as another user.
    (process.getuid?.() === 0 ? it.skip : it)('an unreadable file', async () => {
      const path = join(dir, 'locked.json');
      await writeFile(path, '{"turns":[]}');
      await chmod(path, 0o000);
      await expect(loadModelScript(path)).rejects.toMatchObject({ message: `The model script ${path} cannot be read (permission denied).` });
    });

    it('text that is not JSON, with the line and column but without quoting the content', async () => {
      const path = join(dir, 'broken.json');
      await writeFile(path, '{\n "turns": [\n {"text": "a"}\n {"text": "b"}\n ]\n}');
      await expect(loadModelScript(path)).rejects.toMatchObject({
        code: 'model_script_invalid',
        message: `The model script ${path} is not valid JSON (expected ',' or ']' after array element at line 4, column 2).`,
      });
      await writeFile(path, '{"turns": [{"text": "secret-looking content"},]}');
      await expect(loadModelScript(path)).rejects.toMatchObject({ message: `The model script ${path} is not valid JSON (unexpected token ']').` });
    });

    it.each([
      [{}, 'turns: Invalid input: expected array, received undefined'],
      [{ turns: [{}] }, 'turns[0]: a turn needs "text", "tool_calls" or both'],
      [{ turns: [{ tool_call: [] }] }, 'turns[0]: Unrecognized key: "tool_call"; turns[0]: a turn needs "text", "tool_calls" or both'],
      [{ turns: [{ repeat: 0, text: 'x' }] }, 'turns[0].repeat: repeat must be at least 1'],
      [{ turns: [{ repeat: 1.5, text: 'x' }] }, 'turns[0].repeat: repeat must be a whole number'],
      [{ turns: [{ text: 'ok' }, { tool_calls: [{ arguments: {} }] }] }, 'turns[1].tool_calls[0].name: Invalid input: expected string, received undefined'],
      [{ turns: [{ tool_calls: [{ name: 'Bash', arguments: 'ls' }] }] }, 'turns[0].tool_calls[0].arguments: Invalid input: expected record, received string'],
      [{ turns: [{ tool_calls: [] }] }, 'turns[0].tool_calls: list at least one tool call, or leave "tool_calls" out'],
      [[], 'the file: Invalid input: expected object, received array'],
    ])('%j', async (script, problem) => {
      const path = join(dir, 'bad.json');
      await writeFile(path, JSON.stringify(script));
      await expect(loadModelScript(path)).rejects.toMatchObject({ code: 'model_script_invalid', message: `The model script ${path} is invalid: ${problem}.` });
    });
  });

  it('accepts notes beside the turns and a turn with no arguments', async () => {
    const model = await scripted({ description: 'demo', turns: [{ tool_calls: [{ name: 'List' }] }] });
    expect((await model.complete(withTools())).toolCalls).toEqual([{ id: 'scripted_0_0', name: 'List', arguments: {} }]);
  });
});
