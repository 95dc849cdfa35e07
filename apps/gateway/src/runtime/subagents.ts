import {
  AgentUnavailableError,
  ExecutionConfigError,
  SubagentLimitError,
  SubagentTracker,
  checkLayerCeilings,
  effectiveTools,
  type AgentCatalogue,
  type AgentDefinition,
  type ExecutionCeilings,
  type ExecutionConfig,
} from '@lemniscate/session';
import type { RepositorySource, SandboxInfo } from '@lemniscate/contracts';
import type { ModelProvider } from '../model/model.types';
import type { ExecHostPort } from '../exec-host/exec-host.port';
import type { SessionRecorder } from './ports';
import { SessionRunner, type DelegationContext, type SessionRunDeps, type SubagentLauncher, type TaskAnswer, type TaskStart } from './session-runner';

/** Creates the stored record of a child session and the recorder that writes to it. */
export interface ChildSessionFactory {
  create(child: { sessionId: string; parentSessionId: string; depth: number; agent: string; instruction: string; headless: boolean }): Promise<SessionRecorder>;
}

export interface SubagentServiceDeps {
  tracker: SubagentTracker;
  agents: AgentCatalogue;
  children: ChildSessionFactory;
  /** The recorder of each session of the tree, to announce delegations on the delegating session. */
  recorderOf: (sessionId: string) => SessionRecorder | undefined;
  registerRecorder: (sessionId: string, recorder: SessionRecorder) => void;
  model: (agent: AgentDefinition) => ModelProvider;
  execHost: ExecHostPort;
  sandbox: () => SandboxInfo | null;
  policy: SessionRunDeps['policy'];
  execution: ExecutionConfig;
  /** The project policy's ceilings, which a delegated agent's frontmatter cannot lift either (P1). */
  ceilings?: ExecutionCeilings;
  project: string;
  repository: RepositorySource;
  sandboxLock: NonNullable<SessionRunDeps['sandboxLock']>;
  abortReason: SessionRunDeps['abortReason'];
  /** The tree's MCP servers: a child is offered only its parent's MCP tools that its persona names. */
  mcp?: SessionRunDeps['mcp'];
}

interface BackgroundTask {
  childSessionId: string;
  agent: string;
  done: boolean;
  answer?: TaskAnswer;
  promise: Promise<TaskAnswer>;
}

/**
 * Delegation (AG3–AG6): only to agents that declare `mode: subagent | all`; depth, per-session and
 * concurrency limits counted by the gateway's tracker (a child cannot reset its depth); a child's
 * rights are its parent's narrowed by its persona; it shares the parent's sandbox and approval
 * point, has its own budget and duration, no extension, loop detection on.
 */
export class SubagentService implements SubagentLauncher {
  private readonly tasks = new Map<string, BackgroundTask>();

  constructor(private readonly deps: SubagentServiceDeps) {}

  async start(parent: DelegationContext, task: TaskStart): Promise<TaskAnswer> {
    const announce = this.deps.recorderOf(parent.sessionId);
    let agent: AgentDefinition;
    try {
      agent = this.deps.agents.forDelegation(task.agent);
    } catch (err) {
      if (err instanceof AgentUnavailableError) return { ok: false, text: err.message, class: err.code };
      throw err;
    }
    if (!task.instruction.trim()) return { ok: false, text: 'Task needs an instruction for the subagent.' };
    if (this.deps.ceilings) {
      try {
        checkLayerCeilings(agent.execution, agent.location, this.deps.ceilings);
      } catch (err) {
        if (err instanceof ExecutionConfigError) {
          await announce?.audit('subagent.refused', { agent: agent.name, code: err.code, reason: err.message });
          return { ok: false, text: err.message, class: err.code };
        }
        throw err;
      }
    }
    const sandbox = this.deps.sandbox();
    if (!sandbox) return { ok: false, text: 'The session has no sandbox yet; delegation is not possible.' };

    let record;
    try {
      record = this.deps.tracker.spawn(parent.sessionId);
    } catch (err) {
      if (err instanceof SubagentLimitError) {
        await announce?.emit({ type: 'subagent_refused', class: err.code, agent: agent.name, reason: err.message });
        await announce?.audit('subagent.refused', { agent: agent.name, code: err.code, reason: err.message });
        return { ok: false, text: err.message, class: err.code };
      }
      throw err;
    }
    // Headless: nobody would come back for a background task; it runs synchronously and says so.
    const background = task.background && !parent.headless;
    const rights = effectiveTools({ tools: parent.tools, readOnly: parent.readOnly }, agent, { delegated: true });
    const recorder = await this.deps.children.create({
      sessionId: record.sessionId,
      parentSessionId: parent.sessionId,
      depth: record.depth,
      agent: agent.name,
      instruction: task.instruction,
      headless: parent.headless,
    });
    this.deps.registerRecorder(record.sessionId, recorder);
    await announce?.emit({ type: 'subagent_started', childSessionId: record.sessionId, agent: agent.name, depth: record.depth, background });
    await announce?.audit('subagent.started', { childSessionId: record.sessionId, agent: agent.name, depth: record.depth, background, requestedBackground: task.background });

    const runner = new SessionRunner(
      {
        sessionId: record.sessionId,
        project: this.deps.project,
        repository: this.deps.repository,
        instruction: task.instruction,
        headless: parent.headless,
        role: 'child',
        depth: record.depth,
        parentSessionId: parent.sessionId,
        agent: { name: agent.name, prompt: agent.systemPrompt || null, tools: [...rights.tools], readOnly: rights.readOnly, maxActions: agent.execution.sessionMaxActions },
        execution: { ...this.deps.execution, ...agent.execution },
        sharedSandbox: sandbox,
      },
      {
        model: this.deps.model(agent),
        execHost: this.deps.execHost,
        recorder,
        policy: this.deps.policy,
        // Interrupting the parent interrupts its children.
        signal: parent.signal,
        abortReason: this.deps.abortReason,
        subagents: this,
        sandboxLock: this.deps.sandboxLock,
        mcp: this.deps.mcp,
      },
    );
    const run = runner.run().then(async (result): Promise<TaskAnswer> => {
      this.deps.tracker.finish(record.sessionId);
      const report = result.report;
      await announce?.emit({ type: 'subagent_finished', childSessionId: record.sessionId, agent: agent.name, report: reportKind(report), stopReason: (result.outcome.stopReason ?? null) as never });
      await announce?.audit('subagent.finished', { childSessionId: record.sessionId, agent: agent.name, report, stopReason: result.outcome.stopReason });
      return { ok: true, text: `Subagent ${agent.name} (${record.sessionId}) ${report}.${result.summary ? `\n${result.summary}` : ''}` };
    });
    if (!background) {
      const note = task.background ? 'Headless run: the background task ran synchronously. ' : '';
      const answer = await run;
      return answer.ok ? { ok: true, childSessionId: record.sessionId, text: `${note}${answer.text}` } : answer;
    }
    const entry: BackgroundTask = { childSessionId: record.sessionId, agent: agent.name, done: false, promise: run };
    run.then(
      (answer) => Object.assign(entry, { done: true, answer }),
      (err: unknown) => Object.assign(entry, { done: true, answer: { ok: false, text: `Subagent ${agent.name} failed: ${String(err)}` } }),
    );
    this.tasks.set(record.sessionId, entry);
    return {
      ok: true,
      childSessionId: record.sessionId,
      text: `Started background task ${record.sessionId} (agent ${agent.name}). Read its report with TaskResult {"task_id":"${record.sessionId}"}.`,
    };
  }

  async result(_parent: DelegationContext, taskId: string): Promise<TaskAnswer> {
    const task = this.tasks.get(taskId);
    if (!task) return { ok: false, text: `There is no background task ${taskId || '(empty id)'} in this session.` };
    if (!task.done) return { ok: true, text: `Task ${taskId} (agent ${task.agent}) is still running; ask again later.` };
    return task.answer!;
  }

  /** Waits for background tasks still running (the parent's end interrupts them through its signal). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.tasks.values()].map((t) => t.promise));
  }
}

function reportKind(report: string): 'finished' | 'cut_short' | 'interrupted' {
  if (report === 'finished') return 'finished';
  if (report.startsWith('cut short')) return 'cut_short';
  return 'interrupted';
}

/** A promise chain per key: one holder at a time, in arrival order. */
export function createLock(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(fn: () => Promise<T>) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
}
