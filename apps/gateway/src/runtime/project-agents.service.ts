import { Inject, Injectable } from '@nestjs/common';
import { repositoryTransport, type ProjectAgentsView, type RepositoryAccess } from '@lemniscate/contracts';
import { discoverAgents, type AgentDirectory } from '@lemniscate/session';
import { AccessService } from '../auth/access.service';
import type { Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import type { ProjectRow } from '../db/schema';
import { EXEC_HOST, type ExecHostPort } from '../exec-host/exec-host.port';
import { RepositoryAccessService } from '../projects/repository-access.service';
import { AGENTS_DIR, fetchedAgentDirectory, MAX_AGENT_FILES, repositoryAgentDirectory } from './agent-sources';

type Project = Pick<ProjectRow, 'id' | 'name' | 'repositorySource' | 'defaultRef'>;

/**
 * Where a project's own agents (AG1) are read from: a local repository by the gateway at the
 * session's ref; a repository reached by URL by the exec-host that reaches it, with the project's
 * access, at the project's default ref (the reviewed branch, whatever a session starts from).
 */
@Injectable()
export class ProjectAgentsService {
  constructor(
    private readonly projects: ProjectsRepository,
    private readonly access: AccessService,
    private readonly repositoryAccess: RepositoryAccessService,
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
  ) {}

  /**
   * The directory a session of the project reads its agents from. `access` opens the project's access
   * when the read happens, so a credential that does not open becomes a notice of the listing.
   */
  directoryFor(project: Project, sessionRef: string | undefined, access: () => Promise<RepositoryAccess | undefined>): AgentDirectory & { commit(): Promise<string | null> } {
    if (repositoryTransport(project.repositorySource) === 'local') return repositoryAgentDirectory(project.repositorySource, sessionRef);
    return fetchedAgentDirectory(async () =>
      this.execHost.readRepositoryDirectory({
        projectId: project.id,
        repository: { source: project.repositorySource, ref: project.defaultRef, access: await access() },
        directory: AGENTS_DIR,
        suffix: '.md',
        maxFiles: MAX_AGENT_FILES,
      }),
    );
  }

  /** The project's agents at its default ref, as its sessions find them (for anyone who may read the project). */
  async view(principal: Principal, projectId: string): Promise<ProjectAgentsView> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    await this.access.require(principal, 'read', 'Project', { id: project.id });
    const directory = this.directoryFor(project, project.defaultRef, () => this.repositoryAccess.accessFor(project));
    const catalogue = await discoverAgents({ project: directory });
    const commit = await directory.commit().catch(() => null);
    return {
      projectId: project.id,
      ref: project.defaultRef,
      commit,
      agents: catalogue
        .listed()
        .filter((a) => a.origin === 'project')
        .map((a) => ({
          name: a.name,
          description: a.description,
          mode: a.mode,
          tools: a.tools ? [...a.tools] : null,
          model: a.model ?? null,
          readOnly: a.readOnly,
          origin: a.origin,
          location: a.location,
        })),
      notices: catalogue.notices.map((n) => ({ level: n.level, code: n.code, location: n.location, message: n.message })),
    };
  }
}
