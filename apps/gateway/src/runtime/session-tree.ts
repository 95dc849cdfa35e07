import { Inject, Injectable } from '@nestjs/common';
import type { EnvironmentRequest, RepositorySource, SandboxInfo, SessionView } from '@lemniscate/contracts';
import { SubagentTracker, type AgentCatalogue, type AgentDefinition, type ExecutionCeilings, type ExecutionConfig } from '@lemniscate/session';
import { withDbRetry } from '../db/retry';
import { EXEC_HOST, type ExecHostPort } from '../exec-host/exec-host.port';
import type { ModelProvider } from '../model';
import { PoliciesService } from '../projects/policies.service';
import { SessionsService } from '../sessions/sessions.service';
import { McpClients, McpCredentials } from '../mcp/mcp-clients';
import { DbRecorders } from './db-recorder';
import type { SessionRecorder } from './ports';
import { SessionRunner, type DelegationContext } from './session-runner';
import { SubagentService, createLock } from './subagents';
import { sessionCatalogue } from './tool-catalogue';

/** What a session tree is built from: its recorded root session and what was resolved for it. */
export interface SessionTreeSpec {
  root: SessionView;
  project: { id: string; name: string };
  repository: RepositorySource;
  /** The project's environment (S8): the sandbox starts from it. */
  environment?: EnvironmentRequest;
  instruction: string;
  /** The developer's uncommitted work, applied over the base before the agent starts. */
  startingPatch?: string;
  headless: boolean;
  agent: AgentDefinition;
  agents: AgentCatalogue;
  execution: ExecutionConfig;
  ceilings: ExecutionCeilings;
  /** One provider for the whole tree: a scripted model answers the tree's requests in order. */
  model: ModelProvider;
  /** The tools the policy in force at the start disables (for the subagents a mention starts). */
  disabledTools: readonly string[];
  /** Aborted by a stop or a revocation; the reason says which. */
  signal: AbortSignal;
}

/** A root session and the subagents it delegates to, sharing one sandbox and one approval point. */
export interface SessionTree {
  /** Runs the root session, then waits for the background subagents it left running. */
  run(): Promise<void>;
  /** For `@general …` mentions: starts a background subagent in the running root session. */
  subagents: SubagentService;
  context: DelegationContext;
}

/**
 * Wires a session tree: a recorder per session, the tracker that counts delegations (AG4), the lock
 * that serialises changes to the shared working copy, the subagent service, and the root's runner.
 */
@Injectable()
export class SessionTrees {
  constructor(
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
    private readonly recorders: DbRecorders,
    private readonly sessions: SessionsService,
    private readonly policies: PoliciesService,
    @Inject(McpCredentials) private readonly mcpCredentials: McpCredentials,
  ) {}

  open(spec: SessionTreeSpec): SessionTree {
    const { root, project, agent, execution, signal } = spec;
    // One queue of deferred writes for the tree: a subagent's events keep their place on the root's stream.
    const writes = this.recorders.writes();
    const recorders = new Map<string, SessionRecorder>([[root.id, this.recorders.open({ id: root.id, projectId: project.id, rootId: root.id, agent: agent.name }, writes)]]);
    const tracker = new SubagentTracker(execution);
    tracker.openSession(root.id);
    const abortReason = () => (signal.reason === 'revoked' ? 'revoked' : 'stopped') as 'stopped' | 'revoked';
    const lock = createLock();
    // Read before every call, so it rides out a short database outage like the recorder's writes.
    const policy = async () => (await withDbRetry(() => this.policies.inForce(project.id))).policy;
    const execHost = new SandboxRecordingExecHost(this.execHost);
    // AG7: the tree's MCP clients; a local server runs in the tree's one sandbox.
    const mcp = new McpClients({ execHost, sandboxId: () => execHost.created?.sandboxId ?? null, credentials: this.mcpCredentials, signal });
    const subagents = new SubagentService({
      tracker,
      agents: spec.agents,
      children: {
        create: async (child) => {
          await this.sessions.createChild({ projectId: project.id, userId: root.userId, policyVersionId: root.policyVersionId, mode: root.mode, agent: agent.name }, child);
          return this.recorders.open({ id: child.sessionId, projectId: project.id, rootId: root.id, agent: child.agent }, writes);
        },
      },
      recorderOf: (id) => recorders.get(id),
      registerRecorder: (id, r) => recorders.set(id, r),
      model: () => spec.model,
      execHost,
      sandbox: () => execHost.created,
      policy,
      execution,
      ceilings: spec.ceilings,
      project: project.name,
      repository: spec.repository,
      sandboxLock: lock,
      abortReason,
      mcp,
    });
    const runner = new SessionRunner(
      {
        sessionId: root.id,
        project: project.name,
        repository: spec.repository,
        environment: spec.environment,
        uncommittedPatch: spec.startingPatch,
        instruction: spec.instruction,
        headless: spec.headless,
        role: 'main',
        depth: 0,
        parentSessionId: null,
        agent: { name: agent.name, prompt: agent.systemPrompt || null, tools: agent.tools ? [...agent.tools] : undefined, readOnly: agent.readOnly, maxActions: agent.execution.sessionMaxActions },
        execution,
        contextTokenBudget: execution.contextTokenBudget,
      },
      { model: spec.model, execHost, recorder: recorders.get(root.id)!, policy, signal, abortReason, subagents, sandboxLock: lock, mcp },
    );
    return {
      run: () =>
        runner
          .run()
          .then(() => subagents.settle())
          .finally(() => mcp.close()),
      subagents,
      context: {
        sessionId: root.id,
        depth: 0,
        headless: spec.headless,
        tools: sessionCatalogue({ disabled: spec.disabledTools, agentTools: agent.tools ?? undefined, readOnly: agent.readOnly }).map((t) => t.name),
        readOnly: agent.readOnly,
        signal,
      },
    };
  }
}

/**
 * The exec-host as a tree sees it: the gateway's own, remembering the sandbox the root session
 * creates, which its subagents then work in.
 */
export class SandboxRecordingExecHost implements ExecHostPort {
  created: SandboxInfo | null = null;

  constructor(private readonly execHost: ExecHostPort) {}

  async create(...args: Parameters<ExecHostPort['create']>): Promise<SandboxInfo> {
    this.created = await this.execHost.create(...args);
    return this.created;
  }
  health = () => this.execHost.health();
  destroy = (...args: Parameters<ExecHostPort['destroy']>) => this.execHost.destroy(...args);
  exec = (...args: Parameters<ExecHostPort['exec']>) => this.execHost.exec(...args);
  read = (...args: Parameters<ExecHostPort['read']>) => this.execHost.read(...args);
  list = (...args: Parameters<ExecHostPort['list']>) => this.execHost.list(...args);
  search = (...args: Parameters<ExecHostPort['search']>) => this.execHost.search(...args);
  proposeWrite = (...args: Parameters<ExecHostPort['proposeWrite']>) => this.execHost.proposeWrite(...args);
  proposeEdit = (...args: Parameters<ExecHostPort['proposeEdit']>) => this.execHost.proposeEdit(...args);
  apply = (...args: Parameters<ExecHostPort['apply']>) => this.execHost.apply(...args);
  changes = (...args: Parameters<ExecHostPort['changes']>) => this.execHost.changes(...args);
  accept = (...args: Parameters<ExecHostPort['accept']>) => this.execHost.accept(...args);
  revert = (...args: Parameters<ExecHostPort['revert']>) => this.execHost.revert(...args);
  patch = (...args: Parameters<ExecHostPort['patch']>) => this.execHost.patch(...args);
  mcpOpen = (...args: Parameters<ExecHostPort['mcpOpen']>) => this.execHost.mcpOpen(...args);
  mcpMessage = (...args: Parameters<ExecHostPort['mcpMessage']>) => this.execHost.mcpMessage(...args);
  mcpClose = (...args: Parameters<ExecHostPort['mcpClose']>) => this.execHost.mcpClose(...args);
  environmentStatus = (...args: Parameters<ExecHostPort['environmentStatus']>) => this.execHost.environmentStatus(...args);
  prepareEnvironment = (...args: Parameters<ExecHostPort['prepareEnvironment']>) => this.execHost.prepareEnvironment(...args);
  environmentLog = (...args: Parameters<ExecHostPort['environmentLog']>) => this.execHost.environmentLog(...args);
  readRepositoryDirectory = (...args: Parameters<ExecHostPort['readRepositoryDirectory']>) => this.execHost.readRepositoryDirectory(...args);
}
