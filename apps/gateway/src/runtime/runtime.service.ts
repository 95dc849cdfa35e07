import { Inject, Injectable, Logger, Optional, type OnApplicationShutdown } from '@nestjs/common';
import { refusesApprovals, type CreateSessionRequest, type SessionView } from '@lemniscate/contracts';
import { initPolicyEngine } from '@lemniscate/policy';
import { AgentUnavailableError, BUILTIN_AGENTS, ExecutionConfigError, discoverAgents, resolveExecutionConfig, type AgentCatalogue, type AgentDefinition } from '@lemniscate/session';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { EnvironmentsService } from '../environments/environments.service';
import { PoliciesService } from '../projects/policies.service';
import { SessionLeaseService } from '../sessions/session-lease.service';
import { SessionRunRegistry } from '../sessions/session-run.registry';
import { SessionsService } from '../sessions/sessions.service';
import { RepositoryAccessService } from '../projects/repository-access.service';
import { uploadedAgentDirectory } from './agent-sources';
import { ProjectAgentsService } from './project-agents.service';
import { ceilingsOf } from './policy-execution';
import { SessionModels } from './session-model';
import { SessionTrees, type SessionTree } from './session-tree';

/** Whether sessions run their loop (`run`) or are only recorded (`record`, HTTP-layer tests). */
export type SessionLoops = 'run' | 'record';
export const SESSION_LOOPS = Symbol('SESSION_LOOPS');

/**
 * Starts and supervises session loops on this gateway: resolves the agent, the limits and the model,
 * records the session, and runs its tree (session-tree.ts) in the background under the run registry
 * so a stop or a revocation reaches it at once. One run per session (X5): every instruction opens
 * its own session.
 */
@Injectable()
export class SessionRuntimeService implements OnApplicationShutdown {
  private readonly logger = new Logger('SessionRuntime');
  private readonly running = new Map<string, Promise<void>>();
  /** The session trees running here, for `@general …` mentions. */
  private readonly trees = new Map<string, SessionTree>();
  private readonly models: SessionModels;

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly sessionsService: SessionsService,
    private readonly projects: ProjectsRepository,
    private readonly policies: PoliciesService,
    private readonly audit: AuditService,
    private readonly access: AccessService,
    private readonly registry: SessionRunRegistry,
    private readonly lease: SessionLeaseService,
    private readonly sessionTrees: SessionTrees,
    private readonly environments: EnvironmentsService,
    private readonly projectAgents: ProjectAgentsService,
    private readonly repositoryAccess: RepositoryAccessService,
    @Optional() @Inject(SESSION_LOOPS) private readonly loops: SessionLoops = 'run',
  ) {
    this.models = new SessionModels(config.models);
  }

  /** Records the instruction as a new session and starts its loop; answers as soon as it is recorded. */
  async start(principal: Principal, request: CreateSessionRequest): Promise<SessionView> {
    const project = await this.projects.findById(request.projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${request.projectId}.`);
    // Before anything of the project is read: its agents come from its repository (through the
    // exec-host, with the project's credential, for a URL) and its policy sets the ceilings, and a
    // refusal would quote them ("Available: …"). Someone who may not start a session here causes no
    // fetch and learns neither.
    await this.access.require(principal, 'create', 'Session', { projectId: project.id, userId: principal.userId });
    await initPolicyEngine();
    const { policy, version } = await this.policies.inForce(project.id);
    // Opened once for the whole start (the agents' read, the environment, the sandboxes); a credential
    // that does not open is a notice of the agents' listing first, then the start's refusal.
    const opened = this.repositoryAccess.accessFor(project);
    opened.catch(() => undefined);
    const ref = request.baseCommit ?? project.defaultRef ?? undefined;

    const agents = await discoverAgents({
      project: this.projectAgents.directoryFor(project, ref, () => opened),
      user: request.userAgents?.length ? uploadedAgentDirectory(request.userAgents) : undefined,
    });
    const agent = this.pickAgent(agents, request.agent);
    const ceilings = ceilingsOf(policy, `the policy of project "${project.name}"${version ? ` (version ${version})` : ' (built-in default)'}`);
    let execution;
    try {
      execution = resolveExecutionConfig({
        env: request.environment ?? this.config.sessionEnvironment,
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
    const model = await this.models.choose(request.model, agent);
    // S8: every sandbox of the session starts from the project's environment, prepared for its default
    // ref; a start is refused with a sentence while it is not ready (and one never prepared starts now).
    // Asked only of someone who may start the session (checked above), so a refused person cannot cause a preparation.
    const environment = await this.environments.forSession(principal, project, policy, await opened);

    // Only "headless" refuses at once; "headless_with_approvals" waits for a person like an interactive session.
    const headless = refusesApprovals(request.mode);
    const view = await this.sessionsService.create(principal, { ...request, agent: agent.name, includedUncommitted: !!request.startingPatch });
    const warnings = [...agents.notices.filter((n) => n.level === 'warning').map((n) => n.message), ...execution.warnings, ...(model.warning ? [model.warning] : [])];
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'session.configured',
      projectId: project.id,
      sessionId: view.id,
      payload: {
        agent: agent.name,
        agentLocation: agent.location,
        model: model.provider.ref,
        execution: execution.config,
        origin: execution.origin,
        warnings,
        mode: request.mode,
        waitForApprovals: request.mode === 'headless_with_approvals',
      },
    });

    await this.lease.hold(view.id);
    const { signal, done } = this.registry.register(view.id);
    const tree = this.sessionTrees.open({
      root: view,
      project: { id: project.id, name: project.name },
      // The project's access goes with the repository to the exec-host, for its fetch only (ADR 0012).
      repository: { source: project.repositorySource, ...(ref ? { ref } : {}), access: await opened },
      environment,
      instruction: request.instruction,
      startingPatch: request.startingPatch,
      headless,
      agent,
      agents,
      execution: execution.config,
      ceilings,
      model: model.provider,
      disabledTools: policy.tools.disabled,
      signal,
    });
    const run = tree
      .run()
      .catch(async (err: unknown) => {
        this.logger.error({ err, sessionId: view.id }, 'session loop failed');
        await this.sessionsService.endAfterFailure(view.id, project.id, err);
      })
      .finally(() => {
        done();
        this.lease.release(view.id);
        this.running.delete(view.id);
      });
    this.running.set(view.id, run);
    this.trees.set(view.id, tree);
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

  private pickAgent(agents: AgentCatalogue, name: string): AgentDefinition {
    // No --agent: the developer's session runs with the platform's own persona and every tool the
    // policy allows. (The built-in `general` agent proper is a delegation target, AG3.)
    if (name === 'general') return { ...BUILTIN_AGENTS[0]!, mode: 'primary', systemPrompt: '', location: 'the default agent' };
    try {
      return agents.forUser(name);
    } catch (err) {
      if (err instanceof AgentUnavailableError) {
        // An agent missing because its directory could not be read (a repository the exec-host could
        // not fetch, a credential that does not open) or its file was refused: say that, not only that it is missing.
        const why = err.code === 'agent_unknown' ? agents.notices.filter((n) => n.level === 'error' && (n.code === 'unreadable_directory' || n.location.endsWith(`/${name}.md`))) : [];
        throw new AppError(ErrorCode.ValidationFailed, [`agent: ${err.message}`, ...why.map((n) => n.message)].join(' '));
      }
      throw err;
    }
  }
}
