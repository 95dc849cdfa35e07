import { Injectable } from '@nestjs/common';
import type { PolicyDiffResponse, PolicyVersionSummary, PolicyVersionView, PublishPolicyRequest, RollbackPolicyRequest } from '@lemniscate/contracts';
import { defaultPolicy, issueLine, parsePolicy, PolicyValidationError, type Policy } from '@lemniscate/policy';
import { createTwoFilesPatch } from 'diff';
import { stringify } from 'yaml';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { PolicyVersionsRepository } from '../db/repositories/policy-versions.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import type { PolicyVersionRow, ProjectRow } from '../db/schema';
import { EventsService } from '../events/events.service';
import { toPolicySummary, toPolicyView } from './views';
import { UsersRepository } from '../db/repositories/users.repository';

interface PolicyInForce {
  policy: Policy;
  /** Null when the project has never had a version: the built-in default applies. */
  versionId: string | null;
  version: number | null;
}

/**
 * Policy versions (P1): immutable, published only after `parsePolicy` accepts them, every change
 * audited with what was in force before and after. `inForce` asks which version is in force on every
 * call, so a publish takes effect on the next action without a restart (P3): from the database on
 * PostgreSQL (another replica may have published), from memory on PGlite, where every publish goes
 * through this process (PolicyVersionsRepository).
 */
@Injectable()
export class PoliciesService {
  constructor(
    private readonly versions: PolicyVersionsRepository,
    private readonly projects: ProjectsRepository,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly users: UsersRepository,
  ) {}

  /** Each version's author by email, for display (one lookup for the lot). */
  private async withAuthors<T>(rows: PolicyVersionRow[], view: (row: PolicyVersionRow, email: string | null) => T): Promise<T[]> {
    const emails = await this.users.emailsOf(rows.flatMap((r) => (r.authorId ? [r.authorId] : [])));
    return rows.map((r) => view(r, r.authorId ? (emails.get(r.authorId) ?? null) : null));
  }

  async inForce(projectId: string): Promise<PolicyInForce> {
    // Which version is in force is asked every time; its document read only when this gateway has not parsed it yet.
    const current = await this.versions.currentVersion(projectId);
    if (!current) return { policy: defaultPolicy, versionId: null, version: null };
    const cached = this.parsed.get(current.id);
    if (cached) return { policy: cached, versionId: current.id, version: current.version };
    const row = await this.versions.findById(current.id);
    if (!row) return { policy: defaultPolicy, versionId: null, version: null };
    return { policy: this.parsedVersion(row.id, row.document), versionId: row.id, version: row.version };
  }

  /**
   * Versions are immutable, so each is parsed once: the session loop reads the version in force
   * before every decision (P3), and the decision engine's rule index is kept per policy object.
   * Stored versions were validated when published; parsing again fills defaults added since.
   */
  private parsedVersion(versionId: string, document: unknown): Policy {
    const cached = this.parsed.get(versionId);
    if (cached) return cached;
    const policy = parsePolicy(document);
    if (this.parsed.size >= 256) this.parsed.delete(this.parsed.keys().next().value as string);
    this.parsed.set(versionId, policy);
    return policy;
  }

  private readonly parsed = new Map<string, Policy>();

  async current(principal: Principal, projectId: string): Promise<PolicyVersionView> {
    const project = await this.readable(principal, projectId);
    const row = await this.versions.current(project.id);
    if (!row) throw new AppError(ErrorCode.NotFound, `Project "${project.name}" has no published policy; the built-in default applies.`);
    return (await this.withAuthors([row], toPolicyView))[0] as PolicyVersionView;
  }

  async list(principal: Principal, projectId: string): Promise<PolicyVersionSummary[]> {
    const project = await this.readable(principal, projectId);
    return this.withAuthors(await this.versions.list(project.id), toPolicySummary);
  }

  async show(principal: Principal, projectId: string, version: number): Promise<PolicyVersionView> {
    const project = await this.readable(principal, projectId);
    return (await this.withAuthors([await this.version(project, version)], toPolicyView))[0] as PolicyVersionView;
  }

  async diff(principal: Principal, projectId: string, from: number, to: number): Promise<PolicyDiffResponse> {
    const project = await this.readable(principal, projectId);
    const [a, b] = [await this.version(project, from), await this.version(project, to)];
    const patch = createTwoFilesPatch(`policy v${from}`, `policy v${to}`, ensureNewline(a.sourceText), ensureNewline(b.sourceText), a.createdAt.toISOString(), b.createdAt.toISOString());
    return { from, to, patch };
  }

  async publish(principal: Principal, projectId: string, input: PublishPolicyRequest): Promise<PolicyVersionView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'publish', 'Policy', { projectId: project.id });
    const source = input.sourceText ?? input.document;
    let policy: Policy;
    try {
      policy = parsePolicy(source);
    } catch (error) {
      if (error instanceof PolicyValidationError) {
        throw new AppError(ErrorCode.PolicyInvalid, `The policy was not published: ${error.issues.map(issueLine).join('; ')}.`, { issues: error.issues });
      }
      throw error;
    }
    const sourceText = input.sourceText ?? stringify(input.document);
    return this.store(principal, project, policy, sourceText, input.comment, 'policy.publish');
  }

  /** Rolling back publishes the old version's text again as the newest version: history only grows. */
  async rollback(principal: Principal, projectId: string, input: RollbackPolicyRequest): Promise<PolicyVersionView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'publish', 'Policy', { projectId: project.id });
    const old = await this.version(project, input.version);
    const comment = `Rollback to version ${old.version}${input.comment ? `: ${input.comment}` : ''}`;
    return this.store(principal, project, parsePolicy(old.document), old.sourceText, comment, 'policy.rollback', old.version);
  }

  private async store(principal: Principal, project: ProjectRow, policy: Policy, sourceText: string, comment: string, kind: string, rolledBackTo?: number): Promise<PolicyVersionView> {
    const before = await this.versions.current(project.id);
    const row = await this.versions.publish(project.id, { document: policy, sourceText, authorId: principal.userId, comment });
    if (!row) throw new AppError(ErrorCode.NotFound, `There is no project ${project.id}.`);
    await this.audit.record({
      actor: actorOf(principal),
      kind,
      projectId: project.id,
      payload: {
        before: before ? { version: before.version, document: before.document } : null,
        after: { version: row.version, document: row.document },
        comment,
        ...(rolledBackTo === undefined ? {} : { rolledBackTo }),
      },
    });
    await this.events.publish({ type: 'policy_published', projectId: project.id, payload: { version: row.version, authorId: principal.userId, comment } });
    return toPolicyView(row, principal.email);
  }

  private async readable(principal: Principal, projectId: string): Promise<ProjectRow> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'read', 'Policy', { projectId: project.id });
    return project;
  }

  private async find(projectId: string): Promise<ProjectRow> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    return project;
  }

  private async version(project: ProjectRow, version: number): Promise<PolicyVersionRow> {
    const row = await this.versions.findByVersion(project.id, version);
    if (!row) throw new AppError(ErrorCode.NotFound, `Project "${project.name}" has no policy version ${version}.`);
    return row;
  }
}

function ensureNewline(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`;
}
