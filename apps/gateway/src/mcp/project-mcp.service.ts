import { Injectable } from '@nestjs/common';
import type { ProjectMcpView } from '@lemniscate/contracts';
import { AccessService } from '../auth/access.service';
import type { Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { AuditLogRepository } from '../db/repositories/audit-log.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { PoliciesService } from '../projects/policies.service';
import { McpCredentials } from './mcp-clients';

interface Listed {
  servers: { server: string; tools: { name: string; pin: string; description: string }[] }[];
}

/** How far back the last listing of each server is looked for. */
const LISTINGS_READ = 200;

/**
 * A project's MCP servers for its members (AG7): what the policy in force declares, and what each
 * server listed the last time a session started it (the audit log's `mcp.listed`), with the status of
 * every tool's description against the pins: what an administrator reads before approving one.
 */
@Injectable()
export class ProjectMcpService {
  constructor(
    private readonly projects: ProjectsRepository,
    private readonly access: AccessService,
    private readonly policies: PoliciesService,
    private readonly audit: AuditLogRepository,
    private readonly credentials: McpCredentials,
  ) {}

  async view(principal: Principal, projectId: string): Promise<ProjectMcpView> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `No project with id ${projectId}.`);
    await this.access.require(principal, 'read', 'Project', { id: project.id });
    const { policy, version } = await this.policies.inForce(project.id);
    const rows = Object.keys(policy.mcp.servers).length ? await this.audit.list({ projectId: project.id, kinds: ['mcp.listed', 'mcp.unavailable'] }, { order: 'desc', limit: LISTINGS_READ }) : [];
    const entries = rows.map((r) => ({ kind: r.kind, seq: r.seq, at: r.at, sessionId: r.sessionId, payload: JSON.parse(r.payload) as unknown }));
    const servers = await Promise.all(
      Object.entries(policy.mcp.servers).map(async ([name, s]) => {
        const listing = entries.find((e) => e.kind === 'mcp.listed' && (e.payload as Listed).servers?.some((x) => x.server === name));
        const failure = entries.find((e) => e.kind === 'mcp.unavailable' && (e.payload as { server?: string }).server === name);
        const tools = (listing ? (listing.payload as Listed).servers.find((x) => x.server === name)!.tools : []).map((t) => ({
          name: t.name,
          description: t.description,
          pin: t.pin,
          status: s.pinned[t.name] === undefined ? ('unpinned' as const) : s.pinned[t.name] === t.pin ? ('pinned' as const) : ('changed' as const),
        }));
        const failedLater = failure && (!listing || failure.seq > listing.seq);
        return {
          name,
          kind: s.local ? ('local' as const) : ('remote' as const),
          ...(s.local ? { command: s.local.command } : { url: s.remote!.url }),
          credential: s.remote?.credential ? { name: s.remote.credential, held: await this.credentials.has(s.remote.credential).catch(() => false) } : null,
          tools: s.tools,
          pinned: s.pinned,
          lastListing: listing ? { at: listing.at.toISOString(), sessionId: listing.sessionId, tools } : null,
          lastError: failedLater ? { at: failure.at.toISOString(), message: String((failure.payload as { message?: unknown }).message ?? '') } : null,
        };
      }),
    );
    return { projectId: project.id, policyVersion: version, servers };
  }
}
