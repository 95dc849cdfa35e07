import { Injectable } from '@nestjs/common';
import type { PolicyDecision, PolicyDryRunChange, PolicyDryRunRequest, PolicyDryRunResponse } from '@lemniscate/contracts';
import { PolicyValidationError, decide, initPolicyEngine, issueLine, parsePolicy, type Policy } from '@lemniscate/policy';
import { AccessService } from '../auth/access.service';
import type { Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { ToolCallsRepository } from '../db/repositories/tool-calls.repository';

/**
 * Replays what agents really asked for under a draft policy: the administrator sees which decisions
 * would change (a command now free, a write now forbidden) before publishing anything.
 */
@Injectable()
export class PolicyDryRunService {
  constructor(
    private readonly projects: ProjectsRepository,
    private readonly sessions: SessionsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly access: AccessService,
  ) {}

  async run(principal: Principal, projectId: string, input: PolicyDryRunRequest): Promise<PolicyDryRunResponse> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    await this.access.require(principal, 'publish', 'Policy', { projectId: project.id });
    let draft: Policy;
    try {
      draft = parsePolicy(input.sourceText);
    } catch (error) {
      if (error instanceof PolicyValidationError) {
        throw new AppError(ErrorCode.PolicyInvalid, `The draft is not a valid policy: ${error.issues.map(issueLine).join('; ')}.`, { issues: error.issues });
      }
      throw error;
    }
    await initPolicyEngine();
    const sessions = (await this.sessions.list({ projectId: project.id, limit: input.sessions })).filter((s) => s.parentSessionId === null);
    const changes: PolicyDryRunChange[] = [];
    let replayed = 0;
    for (const session of sessions) {
      for (const call of await this.toolCalls.listForSession(session.id)) {
        const before = call.decision as PolicyDecision | null;
        if (!before) continue;
        replayed += 1;
        const after = decide({ name: call.name, arguments: call.arguments as Record<string, unknown> }, draft, { root: '/workspace' });
        if (after.effect !== before.effect || after.rule !== before.rule) {
          changes.push({ sessionId: session.id, toolCallId: call.id, tool: call.name, subject: subjectOf(call.name, call.arguments as Record<string, unknown>), before, after: strip(after) });
        }
      }
    }
    return { sessionsReplayed: sessions.length, toolCallsReplayed: replayed, changes };
  }
}

function subjectOf(tool: string, args: Record<string, unknown>): string {
  for (const key of ['command', 'path', 'pattern', 'agent']) {
    if (typeof args[key] === 'string') return args[key] as string;
  }
  return `${tool} ${JSON.stringify(args).slice(0, 200)}`;
}

function strip(d: PolicyDecision): PolicyDecision {
  return d.thirdParty?.length ? d : { effect: d.effect, rule: d.rule, reason: d.reason };
}
