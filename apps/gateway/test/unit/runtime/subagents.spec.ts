import { initPolicyEngine, parsePolicy } from '@lemniscate/policy';
import { AgentCatalogue, BUILTIN_AGENTS, EXECUTION_DEFAULTS, SubagentTracker, type AgentDefinition, type ExecutionCeilings, type ExecutionConfig } from '@lemniscate/session';
import { ScriptedProvider, parseModelScript } from '../../../src/model';
import type { ModelProvider, ModelRequest, TurnResult } from '../../../src/model/model.types';
import { SessionRunner } from '../../../src/runtime/session-runner';
import { SubagentService, createLock } from '../../../src/runtime/subagents';
import { InMemoryExecHost, RecordingRecorder } from '../../support/runtime-fakes';
import type { SessionRecorder } from '../../../src/runtime/ports';

beforeAll(async () => {
  await initPolicyEngine();
});

// Task is sensitive by default (P3); these tests are about the cascade limits, not that approval.
const policy = parsePolicy({ version: 1, tools: { sensitive: [] }, commands: { free: ['npm test'] } });

const scripted = (turns: unknown[]) => new ScriptedProvider(parseModelScript({ turns }, 't.json'), 't.json');

function agent(name: string, extra: Partial<AgentDefinition> = {}): AgentDefinition {
  return {
    name,
    description: name,
    mode: 'subagent',
    tools: null,
    model: null,
    readOnly: false,
    hidden: false,
    disabled: false,
    execution: {},
    systemPrompt: `${name} persona`,
    origin: 'project',
    location: `.lemniscate/agents/${name}.md`,
    ...extra,
  };
}

function tree(options: {
  parentModel: ModelProvider;
  childModel?: (a: AgentDefinition) => ModelProvider;
  agents?: AgentDefinition[];
  headless?: boolean;
  execution?: Partial<ExecutionConfig>;
  ceilings?: ExecutionCeilings;
}) {
  const execution = { ...EXECUTION_DEFAULTS, ...options.execution };
  const execHost = new InMemoryExecHost({ 'README.md': 'hi\n' });
  const recorders = new Map<string, RecordingRecorder>();
  const root = new RecordingRecorder();
  recorders.set('ses_root', root);
  const controller = new AbortController();
  let sandbox: ReturnType<InMemoryExecHost['create']> extends Promise<infer S> ? S | null : never = null;
  const tracker = new SubagentTracker(execution);
  tracker.openSession('ses_root');
  const wrappedHost = Object.assign(Object.create(execHost), {
    create: async (req: { sessionId: string }) => (sandbox = await execHost.create(req)),
  }) as InMemoryExecHost;
  const service = new SubagentService({
    tracker,
    agents: new AgentCatalogue([...BUILTIN_AGENTS, ...(options.agents ?? [])]),
    children: {
      create: async ({ sessionId }) => {
        const r = new RecordingRecorder();
        recorders.set(sessionId, r);
        return r;
      },
    },
    recorderOf: (id) => recorders.get(id) as SessionRecorder | undefined,
    registerRecorder: () => undefined,
    model: options.childModel ?? (() => options.parentModel),
    execHost: wrappedHost,
    sandbox: () => sandbox,
    policy: async () => policy,
    execution,
    ceilings: options.ceilings,
    project: 'demo',
    repository: { source: '/repo' },
    sandboxLock: createLock(),
    abortReason: () => 'stopped',
  });
  const runner = new SessionRunner(
    {
      sessionId: 'ses_root',
      project: 'demo',
      repository: { source: '/repo' },
      instruction: 'go',
      headless: options.headless ?? true,
      role: 'main',
      depth: 0,
      parentSessionId: null,
      agent: { name: 'main', prompt: null },
      execution,
    },
    {
      model: options.parentModel,
      execHost: wrappedHost,
      recorder: root,
      policy: async () => policy,
      signal: controller.signal,
      abortReason: () => 'stopped',
      subagents: service,
      sandboxLock: createLock(),
    },
  );
  return { runner, root, recorders, execHost, service, controller };
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const task = (instruction: string, extra: Record<string, unknown> = {}) => ({ tool_calls: [{ name: 'Task', arguments: { agent: 'general', instruction, ...extra } }] });

describe('SubagentService', () => {
  describe('P1: a delegated agent cannot lift the policy ceilings either', () => {
    const ceilings: ExecutionCeilings = {
      location: 'the policy of project "demo" (version 1)',
      values: { sessionMaxActions: 10, subagentMaxDepth: 3, toolLoopDetection: true },
      allowToolLoopDetectionOff: false,
    };
    const cases: Array<{ execution: Partial<ExecutionConfig>; refused: string | null }> = [
      {
        execution: { sessionMaxActions: 11 },
        refused: 'sessionMaxActions: 11 in .lemniscate/agents/fast.md is refused: the policy of project "demo" (version 1) sets the ceiling execution.sessionMaxActions at 10 actions',
      },
      { execution: { subagentMaxDepth: 4 }, refused: 'sets the ceiling execution.subagentMaxDepth at 3 levels' },
      { execution: { toolLoopDetection: false }, refused: 'does not allow a workstation to switch it off (execution.allowToolLoopDetectionOff)' },
      { execution: { sessionMaxActions: 10 }, refused: null },
      { execution: { sessionMaxActions: 3, toolLoopDetection: true }, refused: null },
    ];
    it.each(cases)('frontmatter $execution', async ({ execution, refused }) => {
      const model = scripted([{ tool_calls: [{ name: 'Task', arguments: { agent: 'fast', instruction: 'go fast' } }] }, { text: 'child done' }, { text: 'root done' }]);
      const t = tree({ parentModel: model, agents: [agent('fast', { execution })], ceilings });
      await t.runner.run();
      const started = [...t.recorders.values()].flatMap((rec) => rec.ofType('subagent_started'));
      const audits = t.root.audits.filter((a) => a.kind === 'subagent.refused');
      if (refused) {
        expect(started).toHaveLength(0);
        expect(audits).toHaveLength(1);
        expect(audits[0]!.payload.reason).toContain(refused);
      } else {
        expect(started).toHaveLength(1);
        expect(audits).toHaveLength(0);
      }
    });
  });

  it('AG4: with the default depth 3, a fourth level is refused and the agent is told to do the work itself', async () => {
    // One script for the whole tree: each request takes the next turn, in order.
    const model = scripted([task('level 1'), task('level 2'), task('level 3'), task('level 4'), { text: 'did level 4 myself' }, { text: 'l2 done' }, { text: 'l1 done' }, { text: 'root done' }]);
    const t = tree({ parentModel: model });
    const r = await t.runner.run();
    expect(r.outcome.status).toBe('completed');
    const refused = [...t.recorders.values()].flatMap((rec) => rec.ofType('subagent_refused'));
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ class: 'subagent_max_depth' });
    expect(refused[0]!.reason).toMatch(/Do this work yourself/);
    const depths = [...t.recorders.values()].flatMap((rec) => rec.ofType('subagent_started')).map((e) => e.depth);
    expect(depths).toEqual([1, 2, 3]);
  });

  it('AG4: the 201st subagent of a session is refused', async () => {
    const parent = scripted([{ repeat: 201, ...task('part {{i}}') }, { text: 'done' }]);
    const t = tree({ parentModel: parent, childModel: () => scripted([{ text: 'ok' }]), execution: { sessionMaxActions: 1000 } });
    await t.runner.run();
    expect(t.root.ofType('subagent_started')).toHaveLength(200);
    expect(t.root.ofType('subagent_refused')).toEqual([expect.objectContaining({ class: 'subagent_max_per_session' })]);
  });

  it('AG4/AG6: the 21st concurrent background subagent is refused; TaskResult reads a finished report', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const blocking: ModelProvider = {
      ref: 'blocking',
      complete: async (req: ModelRequest): Promise<TurnResult> => {
        await gate;
        if (req.signal.aborted) throw new Error('aborted');
        return { text: 'child report', toolCalls: [], stopReason: 'end_turn' };
      },
    };
    const parent = scripted([{ repeat: 21, ...task('bg {{i}}', { background: true }) }, { text: 'waiting' }]);
    const t = tree({ parentModel: parent, childModel: () => blocking, headless: false });
    const run = t.runner.run();
    // The parent's turns are over once the 21st is refused; its 20 children are still working.
    await until(() => t.root.ofType('subagent_refused').length > 0 && t.root.ofType('model_text').length > 0);
    expect(t.root.ofType('subagent_started').filter((e) => e.background)).toHaveLength(20);
    expect(t.root.ofType('subagent_refused')).toEqual([expect.objectContaining({ class: 'subagent_max_concurrent' })]);
    // AG6: the sandbox the children share is not destroyed under them.
    expect(t.execHost.destroyed).toEqual([]);
    release();
    const r = await run;
    expect(t.execHost.destroyed).toHaveLength(1);
    const firstChild = t.root.ofType('subagent_started')[0]!.childSessionId;
    const answer = await t.service.result({ sessionId: 'ses_root', depth: 0, headless: false, tools: [], readOnly: false, signal: new AbortController().signal }, firstChild);
    expect(answer.ok).toBe(true);
    expect(r.outcome.status).toBe('completed');
  });

  it('AG5: a child stopped by its own action limit reports "cut short"; headless background runs synchronously, announced', async () => {
    const capped = agent('capped', { execution: { sessionMaxActions: 1 } });
    const parent = scripted([{ tool_calls: [{ name: 'Task', arguments: { agent: 'capped', instruction: 'read twice', background: true } }] }, { text: 'parent done' }]);
    const child = scripted([
      { tool_calls: [{ name: 'Read', arguments: { path: 'README.md' } }] },
      { tool_calls: [{ name: 'Read', arguments: { path: 'README.md', limit: 1 } }] },
      { text: 'child summary' },
    ]);
    const t = tree({ parentModel: parent, childModel: () => child, agents: [capped] });
    await t.runner.run();
    expect(t.root.ofType('subagent_finished')[0]).toMatchObject({ report: 'cut_short', stopReason: 'limit_actions' });
    const toolAnswer = t.root.ofType('subagent_started')[0]!;
    expect(toolAnswer.background).toBe(false);
  });

  it('AG3: delegation only to mode subagent|all, and a read-only persona narrows the child', async () => {
    const primary = agent('lead', { mode: 'primary' });
    const parent = scripted([
      { tool_calls: [{ name: 'Task', arguments: { agent: 'lead', instruction: 'x' } }] },
      { tool_calls: [{ name: 'Task', arguments: { agent: 'explore', instruction: 'look' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] },
      { text: 'explored' },
      { text: 'done' },
    ]);
    const t = tree({ parentModel: parent, agents: [primary] });
    await t.runner.run();
    const child = [...t.recorders.entries()].find(([id]) => id !== 'ses_root')![1];
    expect(child.ofType('decision')[0]).toMatchObject({ effect: 'deny', class: 'tool_not_in_catalogue' });
    expect(t.execHost.commands).toEqual([]);
    expect(t.root.ofType('subagent_started')).toHaveLength(1);
  });

  it('AG6: a background child that outlives its completed parent keeps the sandbox until it ends, and its work is in the patch', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const parent = scripted([task('write later', { background: true }), { text: 'parent done' }]);
    let turn = 0;
    const child: ModelProvider = {
      ref: 'late-writer',
      complete: async (): Promise<TurnResult> => {
        turn += 1;
        if (turn === 1) {
          await gate;
          return { toolCalls: [{ id: 'w1', name: 'Bash', arguments: { command: 'npm test' } }], stopReason: 'tool_use' };
        }
        return { text: 'child done', toolCalls: [], stopReason: 'end_turn' };
      },
    };
    const t = tree({ parentModel: parent, childModel: () => child, headless: false });
    const run = t.runner.run();
    await until(() => t.root.ofType('model_text').some((e) => e.text === 'parent done'));
    await new Promise((r) => setTimeout(r, 50));
    expect(t.execHost.destroyed).toEqual([]);
    expect(t.root.end).toBeNull();
    release();
    const r = await run;
    expect(r.outcome.status).toBe('completed');
    // The child's command ran in the live sandbox, then the sandbox went with the tree's end.
    expect(t.execHost.commands).toEqual(['npm test']);
    expect(t.root.ofType('subagent_finished')[0]).toMatchObject({ report: 'finished' });
    expect(t.execHost.destroyed).toHaveLength(1);
  });

  it('AG6: interrupting the parent while a synchronous child works stops the child too (status stopped, sandbox destroyed)', async () => {
    const parent = scripted([task('work'), { text: 'never' }]);
    let entered!: () => void;
    const inChild = new Promise<void>((r) => (entered = r));
    const child: ModelProvider = {
      ref: 'slow-child',
      complete: (req: ModelRequest) =>
        new Promise<TurnResult>((_resolve, reject) => {
          entered();
          req.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        }),
    };
    const t = tree({ parentModel: parent, childModel: () => child });
    const run = t.runner.run();
    await inChild;
    t.controller.abort();
    const r = await run;
    expect(r.outcome).toMatchObject({ status: 'stopped' });
    const childId = t.root.ofType('subagent_started')[0]!.childSessionId;
    expect(t.recorders.get(childId)!.end).toMatchObject({ status: 'stopped' });
    expect(t.execHost.destroyed).toHaveLength(1);
    expect(t.execHost.commands).toEqual([]);
  });
});
