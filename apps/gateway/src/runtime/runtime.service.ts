import { readFileSync } from 'node:fs';
import { Inject, Injectable, Logger, Optional, type OnApplicationShutdown } from '@nestjs/common';
import { refusesApprovals, type CreateSessionRequest, type SandboxInfo, type SessionView } from '@lemniscate/contracts';
import { initPolicyEngine } from '@lemniscate/policy';
import {
  AgentUnavailableError,
  BUILTIN_AGENTS,
  ExecutionConfigError,
  SubagentTracker,
  discoverAgents,
  pickModel,
  resolveExecutionConfig,
  type AgentCatalogue,
  type AgentDefinition,
} from '@lemniscate/session';
import { parse as parseYaml } from 'yaml';
import { AuditService } from '../audit/audit.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { describeFailure } from '../db/errors';
import { ApprovedCommandsRepository } from '../db/repositories/approved-commands.repository';
import { ApprovalsRepository } from '../db/repositories/approvals.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { ToolCallsRepository } from '../db/repositories/tool-calls.repository';
import { withDbRetry } from '../db/retry';
import { EventsService } from '../events/events.service';
import { ModelError, ModelsConfig, createModelProvider, type ModelProvider } from '../model';
import { PoliciesService } from '../projects/policies.service';
import { ApprovalsService } from '../sessions/approvals.service';
import { SessionLeaseService } from '../sessions/session-lease.service';
import { SessionRunRegistry } from '../sessions/session-run.registry';
import { SessionsService } from '../sessions/sessions.service';
import { repositoryAgentDirectory, uploadedAgentDirectory } from './agent-sources';
import { DbSessionRecorder, type DbRecorderDeps } from './db-recorder';
import { HttpExecHost, type ExecHostPort } from './exec-host.port';
import { ceilingsOf } from './policy-execution';
import { SessionRunner, type DelegationContext } from './session-runner';
import { sessionCatalogue } from './tool-catalogue';
import { SubagentService, createLock } from './subagents';

/** Whether sessions run their loop (`run`) or are only recorded (`record`, HTTP-layer tests). */
export type SessionLoops = 'run' | 'record';
export const SESSION_LOOPS = Symbol('SESSION_LOOPS');

/**
 * Starts and supervises session loops on this gateway: resolves the agent, the limits and the model,
 * records the session, and runs the loop in the background under the run registry so a stop or a
 * revocation reaches it at once. One run per session (X5): every instruction opens its own session.
 */
@Injectable()
export class SessionRuntimeService implements OnApplicationShutdown {
  private readonly logger = new Logger('SessionRuntime');
  private readonly execHost: ExecHostPort;
  private readonly running = new Map<string, Promise<void>>();
  /** Delegation entry points of the session trees running here, for `@general …` mentions. */
  private readonly trees = new Map<string, { subagents: SubagentService; context: DelegationContext; userId: string }>();
  private modelsConfig: ModelsConfig | undefined;

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly sessionsService: SessionsService,
    private readonly sessions: SessionsRepository,
    private readonly projects: ProjectsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly approvals: ApprovalsRepository,
    private readonly approvalsService: ApprovalsService,
    private readonly approvedCommands: ApprovedCommandsRepository,
    private readonly policies: PoliciesService,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly registry: SessionRunRegistry,
    private readonly lease: SessionLeaseService,
    @Optional() @Inject(SESSION_LOOPS) private readonly loops: SessionLoops = 'run',
  ) {
    this.execHost = new HttpExecHost({ url: config.execHost.url, token: config.execHost.token ?? '' });
  }

  /** Records the instruction as a new session and starts its loop; answers as soon as it is recorded. */
  async start(principal: Principal, request: CreateSessionRequest): Promise<SessionView> {
    if (request.parentSessionId) {
      throw new AppError(ErrorCode.ValidationFailed, 'parentSessionId: subagents are started by the agent with the Task tool, not by a request.');
    }
    const project = await this.projects.findById(request.projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${request.projectId}.`);
    await initPolicyEngine();
    const { policy, version } = await this.policies.inForce(project.id);
    const ref = request.baseCommit ?? project.defaultRef ?? undefined;

    const agents = await discoverAgents({
      project: repositoryAgentDirectory(project.repositorySource, ref),
      user: request.userAgents?.length ? uploadedAgentDirectory(request.userAgents) : undefined,
    });
    const agent = this.pickAgent(agents, request.agent);
    const ceilings = ceilingsOf(policy, `the policy of project "${project.name}"${version ? ` (version ${version})` : ' (built-in default)'}`);
    let execution;
    try {
      execution = resolveExecutionConfig({
        env: request.environment ?? pickSessionEnv(process.env),
        config: request.userConfig?.execution !== undefined ? [{ location: '~/.lemniscate/config.yaml', values: request.userConfig.execution }] : [],
        agent: Object.keys(agent.execution).length ? { location: agent.location, values: agent.execution } : undefined,
        ceilings,
      });
    } catch (err) {
      if (err instanceof ExecutionConfigError) throw new AppError(ErrorCode.ValidationFailed, err.message, { key: err.key, value: err.value, source: err.source });
      throw err;
    }
    if (this.loops === 'record') {
      // API-layer tests: the session is recorded as the loop would record it, and no loop starts.
      return this.sessionsService.create(principal, { ...request, agent: agent.name, includedUncommitted: !!request.startingPatch });
    }
    const model = await this.modelFor(request.model, agent);

    // Only "headless" refuses at once; "headless_with_approvals" waits for a person like an interactive session.
    const headless = refusesApprovals(request.mode);
    const view = await this.sessionsService.create(principal, { ...request, agent: agent.name, includedUncommitted: !!request.startingPatch });
    const warnings = [...agents.notices.filter((n) => n.level === 'warning').map((n) => n.message), ...execution.warnings, ...(model.warning ? [model.warning] : [])];
    await this.audit.append({
      actor: actorOf(principal),
      kind: 'session.configured',
      projectId: project.id,
      sessionId: view.id,
      payload: { agent: agent.name, agentLocation: agent.location, model: model.provider.ref, execution: execution.config, origin: execution.origin, warnings, mode: request.mode, waitForApprovals: request.mode === 'headless_with_approvals' },
    });

    const deps = this.recorderDeps();
    const recorder = new DbSessionRecorder(deps, { id: view.id, projectId: project.id, rootId: view.id, agent: agent.name });
    await this.lease.hold(view.id);
    const { signal, done } = this.registry.register(view.id);
    const recorders = new Map<string, DbSessionRecorder>([[view.id, recorder]]);
    const tracker = new SubagentTracker(execution.config);
    tracker.openSession(view.id);
    const abortReason = () => (signal.reason === 'revoked' ? 'revoked' : 'stopped') as 'stopped' | 'revoked';
    const lock = createLock();
    // Read before every call, so it rides out a short database outage like the recorder's writes.
    const policyNow = async () => (await withDbRetry(() => this.policies.inForce(project.id))).policy;
    const repository = { source: project.repositorySource, ...(ref ? { ref } : {}) };
    let sandboxInfo: SandboxInfo | null = null;
    const trackingHost: ExecHostPort = Object.assign(Object.create(this.execHost) as ExecHostPort, {
      create: async (...args: Parameters<ExecHostPort['create']>) => (sandboxInfo = await this.execHost.create(...args)),
    });
    const subagents = new SubagentService({
      tracker,
      agents,
      children: {
        create: async (child) => {
          await this.sessions.create({
            id: child.sessionId,
            projectId: project.id,
            userId: principal.userId,
            parentSessionId: child.parentSessionId,
            depth: child.depth,
            agent: child.agent,
            instruction: child.instruction,
            policyVersionId: view.policyVersionId,
            // A subagent is run the way its tree was started.
            mode: view.mode,
            headless: child.headless,
            baseCommit: null,
            branch: null,
            includedUncommitted: false,
          });
          await this.audit.append({ actor: `agent:${agent.name}`, kind: 'session.instruction', projectId: project.id, sessionId: child.sessionId, payload: { instruction: child.instruction, agent: child.agent, depth: child.depth, parentSessionId: child.parentSessionId } });
          return new DbSessionRecorder(deps, { id: child.sessionId, projectId: project.id, rootId: view.id, agent: child.agent });
        },
      },
      recorderOf: (id) => recorders.get(id),
      registerRecorder: (id, r) => recorders.set(id, r as DbSessionRecorder),
      // One provider for the whole tree: a scripted model answers the tree's requests in order.
      model: () => model.provider,
      execHost: trackingHost,
      sandbox: () => sandboxInfo,
      policy: policyNow,
      execution: execution.config,
      ceilings,
      project: project.name,
      repository,
      sandboxLock: lock,
      abortReason,
    });
    const runner = new SessionRunner(
      {
        sessionId: view.id,
        project: project.name,
        repository,
        uncommittedPatch: request.startingPatch,
        instruction: request.instruction,
        headless,
        role: 'main',
        depth: 0,
        parentSessionId: null,
        agent: { name: agent.name, prompt: agent.systemPrompt || null, tools: agent.tools ? [...agent.tools] : undefined, readOnly: agent.readOnly, maxActions: agent.execution.sessionMaxActions },
        execution: execution.config,
        contextTokenBudget: execution.config.contextTokenBudget,
      },
      { model: model.provider, execHost: trackingHost, recorder, policy: policyNow, signal, abortReason, subagents, sandboxLock: lock },
    );
    const run = runner
      .run()
      .then(() => subagents.settle())
      .catch(async (err: unknown) => {
        this.logger.error({ err, sessionId: view.id }, 'session loop failed');
        await this.endAfterFailure(view.id, project.id, err);
      })
      .finally(() => {
        done();
        this.lease.release(view.id);
        this.running.delete(view.id);
      });
    this.running.set(view.id, run);
    this.trees.set(view.id, {
      subagents,
      userId: principal.userId,
      context: {
        sessionId: view.id,
        depth: 0,
        headless,
        tools: sessionCatalogue({ disabled: policy.tools.disabled, agentTools: agent.tools ?? undefined, readOnly: agent.readOnly }).map((t) => t.name),
        readOnly: agent.readOnly,
        signal,
      },
    });
    void run.finally(() => this.trees.delete(view.id));
    return view;
  }

  /**
   * A mention in the developer's conversation (`@general …`, `@explore …`): a background subagent of
   * the running session, under the same limits and approval point as one the agent delegates to.
   */
  async startSubagent(principal: Principal, sessionId: string, request: { agent: string; instruction: string }): Promise<SessionView> {
    const session = await this.sessionsService.get(principal, sessionId);
    if (session.userId !== principal.userId) throw new AppError(ErrorCode.Forbidden, 'Only the developer of a session can start a subagent in it.');
    if (session.status !== 'running') throw new AppError(ErrorCode.SessionEnded, `Session ${sessionId} has ended (${session.status}); start a new one.`);
    const tree = this.trees.get(sessionId);
    if (!tree) throw new AppError(ErrorCode.SessionEnded, `Session ${sessionId} is not running on this gateway; start a new one.`);
    const answer = await tree.subagents.start(tree.context, { agent: request.agent, instruction: request.instruction, background: true });
    if (!answer.ok || !answer.childSessionId) throw new AppError(ErrorCode.ValidationFailed, answer.text);
    return this.sessionsService.get(principal, answer.childSessionId);
  }

  /** Resolves when the loop of a session started here has finished (tests, shutdown). */
  async settled(sessionId: string): Promise<void> {
    await this.running.get(sessionId);
  }

  async onApplicationShutdown(): Promise<void> {
    this.registry.cancelAll('stopped');
    await Promise.allSettled(this.running.values());
  }

  /**
   * The loop failed before it could record its ending (the database stayed away longer than the
   * retry window): the session is ended here as failed, with a sentence rather than the driver's
   * message, so it is not left `running` for the orphan sweep to misreport later.
   */
  private async endAfterFailure(sessionId: string, projectId: string, err: unknown): Promise<void> {
    const message = describeFailure(err);
    try {
      const ended = await withDbRetry(() => this.sessions.end(sessionId, { status: 'failed', stopReason: 'crash', summary: message }));
      if (!ended) return;
      await this.audit.append({ actor: 'system', kind: 'session.ended', projectId, sessionId, payload: { status: 'failed', stopReason: 'crash', message } });
      await withDbRetry(() => this.events.publish({ type: 'session_failed', sessionId, projectId, payload: { status: 'failed', stopReason: 'crash', class: 'crash', message, exitCode: 1 } }));
    } catch (error) {
      this.logger.error({ err: error, sessionId }, 'the failed session could not be recorded as ended; the orphan sweep will end it');
    }
  }

  private pickAgent(agents: AgentCatalogue, name: string): AgentDefinition {
    // No --agent: the developer's session runs with the platform's own persona and every tool the
    // policy allows. (The built-in `general` agent proper is a delegation target, AG3.)
    if (name === 'general') return { ...BUILTIN_AGENTS[0]!, mode: 'primary', systemPrompt: '', location: 'the default agent' };
    try {
      return agents.forUser(name);
    } catch (err) {
      if (err instanceof AgentUnavailableError) throw new AppError(ErrorCode.ValidationFailed, `agent: ${err.message}`);
      throw err;
    }
  }

  private async modelFor(requested: string | undefined, agent: AgentDefinition): Promise<{ provider: ModelProvider; warning: string | null }> {
    const config = this.loadModelsConfig();
    const fallback = requested ?? process.env.LEMNISCATE_DEFAULT_MODEL;
    const picked = agent.model ? pickModel(agent, configuredModels(config), fallback ?? agent.model) : { model: fallback, warning: null };
    if (!picked.model) {
      throw new AppError(ErrorCode.ValidationFailed, 'model: no model is configured for this gateway; pass one (for example --model scripted:PATH) or set LEMNISCATE_DEFAULT_MODEL.');
    }
    try {
      return { provider: await createModelProvider(picked.model, config), warning: picked.warning };
    } catch (err) {
      if (err instanceof ModelError) throw new AppError(ErrorCode.ValidationFailed, `model: ${err.message}`);
      throw err;
    }
  }

  private loadModelsConfig(): ModelsConfig {
    if (this.modelsConfig) return this.modelsConfig;
    const file = process.env.LEMNISCATE_MODELS_CONFIG;
    let raw: unknown = {};
    if (file) {
      try {
        raw = parseYaml(readFileSync(file, 'utf8')) ?? {};
      } catch (err) {
        throw new AppError(ErrorCode.ValidationFailed, `The model configuration ${file} cannot be read: ${(err as Error).message}`);
      }
    }
    const parsed = ModelsConfig.safeParse(raw);
    if (!parsed.success) throw new AppError(ErrorCode.ValidationFailed, `The model configuration is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    this.modelsConfig = parsed.data;
    return parsed.data;
  }

  private recorderDeps(): DbRecorderDeps {
    return {
      sessions: this.sessions,
      toolCalls: this.toolCalls,
      approvals: this.approvals,
      approvalsService: this.approvalsService,
      approvedCommands: this.approvedCommands,
      audit: this.audit,
      events: this.events,
    };
  }
}

function pickSessionEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[0].startsWith('LEMNISCATE_SESSION_') && typeof e[1] === 'string'));
}

function configuredModels(config: ModelsConfig): string[] {
  const refs: string[] = [];
  if (config.openai) refs.push(`openai:${(config.openai as { model?: string }).model ?? ''}`);
  if (config.anthropic) refs.push(`anthropic:${(config.anthropic as { model?: string }).model ?? ''}`);
  for (const name of Object.keys(config.openaiCompatible)) refs.push(`openai-compatible:${name}`);
  return refs;
}
