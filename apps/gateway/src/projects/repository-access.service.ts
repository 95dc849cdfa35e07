import { Inject, Injectable, Logger } from '@nestjs/common';
import { repositoryAccessProblem, repositoryTransport, RepositoryCredential, type RepositoryAccess, type RepositoryAccessView, type SetRepositoryAccessRequest } from '@lemniscate/contracts';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { RepositoryAccessRepository } from '../db/repositories/repository-access.repository';
import type { ProjectRow, RepositoryAccessRow } from '../db/schema';
import { SECRET_BOX, SecretBoxError, type SecretBox } from '../secrets/secret-box';

const run = promisify(execFile);

type Project = Pick<ProjectRow, 'id' | 'name' | 'repositorySource' | 'defaultRef'>;

/** The context a project's credential is sealed under: it opens for this project and kind only. */
function sealContext(projectId: string, kind: string): string {
  return `repository-credential:${projectId}:${kind}`;
}

/**
 * How the platform fetches each project's repository (ADR 0012). Administrators of the project set
 * or clear it; members read what may be shown (the user name, the key's fingerprint, known hosts, the
 * CA); the credential itself is sealed at rest, opened only to hand it to an exec-host for a fetch,
 * and never appears in a view, an event, the audit log or an export.
 */
@Injectable()
export class RepositoryAccessService {
  private readonly logger = new Logger('RepositoryAccess');

  constructor(
    private readonly projects: ProjectsRepository,
    private readonly rows: RepositoryAccessRepository,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    @Inject(SECRET_BOX) private readonly box: SecretBox,
  ) {}

  async view(principal: Principal, projectId: string): Promise<RepositoryAccessView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'read', 'Project', { id: project.id });
    return toView(project, await this.rows.find(project.id));
  }

  async set(principal: Principal, projectId: string, body: SetRepositoryAccessRequest): Promise<RepositoryAccessView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    const problem = repositoryAccessProblem(project.repositorySource, body);
    if (problem) throw new AppError(ErrorCode.ValidationFailed, `The repository access of project "${project.name}" cannot be set: ${problem}.`, { repositorySource: project.repositorySource });
    // A key pasted from an editor that ends lines with CRLF is the same key; ssh reads it only with LF.
    const credential = body.credential?.kind === 'ssh' ? { ...body.credential, privateKey: body.credential.privateKey.replace(/\r\n?/g, '\n') } : body.credential;
    const keyFingerprint = credential?.kind === 'ssh' ? await sshKeyFingerprint(credential.privateKey) : null;
    const row = await this.rows.put(project.id, {
      credentialKind: credential?.kind ?? null,
      credentialSealed: credential ? this.box.seal(JSON.stringify(credential), sealContext(project.id, credential.kind)) : null,
      username: credential?.kind === 'https' ? credential.username : null,
      keyFingerprint,
      knownHosts: body.knownHosts ?? null,
      caPem: body.caPem ?? null,
      updatedBy: principal.userId,
    });
    const view = toView(project, row);
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'project.repository_access_set',
      projectId: project.id,
      // What was set, never the secret: the kind, the user name, the key's fingerprint, how many host keys, whether a CA.
      payload: {
        credential: view.credential,
        knownHosts: body.knownHosts ? body.knownHosts.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#')).length : 0,
        caCertificate: body.caPem !== undefined,
      },
    });
    return view;
  }

  async clear(principal: Principal, projectId: string): Promise<RepositoryAccessView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    const removed = await this.rows.remove(project.id);
    if (removed) await this.audit.record({ actor: actorOf(principal), kind: 'project.repository_access_cleared', projectId: project.id, payload: {} });
    return toView(project, undefined);
  }

  /**
   * What an exec-host needs to fetch the project's repository, opened for this one request; undefined
   * for a local path or a URL without access. A credential that does not open is refused with a
   * sentence, never sent half-way.
   */
  async accessFor(project: Project): Promise<RepositoryAccess | undefined> {
    if (repositoryTransport(project.repositorySource) === 'local') return undefined;
    const row = await this.rows.find(project.id);
    if (!row) return undefined;
    const access: RepositoryAccess = {};
    if (row.knownHosts !== null) access.knownHosts = row.knownHosts;
    if (row.caPem !== null) access.caPem = row.caPem;
    if (row.credentialKind !== null && row.credentialSealed !== null) {
      let opened: string;
      try {
        opened = this.box.open(row.credentialSealed, sealContext(project.id, row.credentialKind));
      } catch (err) {
        if (!(err instanceof SecretBoxError)) throw err;
        this.logger.error({ projectId: project.id, reason: err.reason }, 'a repository credential does not open');
        throw new AppError(ErrorCode.Internal, `The repository credential of project "${project.name}" cannot be opened by this gateway: ${err.message} An administrator can set it again.`);
      }
      const credential = RepositoryCredential.safeParse(JSON.parse(opened));
      if (!credential.success) throw new AppError(ErrorCode.Internal, `The repository credential of project "${project.name}" is not one this gateway reads; an administrator can set it again.`);
      access.credential = credential.data;
    }
    return access;
  }

  private async find(projectId: string): Promise<ProjectRow> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    return project;
  }
}

function toView(project: Project, row: RepositoryAccessRow | undefined): RepositoryAccessView {
  return {
    projectId: project.id,
    repositorySource: project.repositorySource,
    transport: repositoryTransport(project.repositorySource) ?? 'local',
    defaultRef: project.defaultRef,
    credential: row?.credentialKind ? { kind: row.credentialKind, username: row.username, keyFingerprint: row.keyFingerprint } : null,
    knownHosts: row?.knownHosts ?? null,
    caPem: row?.caPem ?? null,
    updatedAt: row ? row.updatedAt.toISOString() : null,
    updatedBy: row?.updatedBy ?? null,
  };
}

/**
 * The SHA256 fingerprint of a private key's public half, as `ssh-keygen -lf` prints it; the key is
 * refused with a sentence when ssh-keygen cannot read it: protected by a passphrase, or damaged
 * (cut short, altered). The key is written to a private temporary file for ssh-keygen and removed at
 * once; what ssh-keygen prints is never quoted.
 */
async function sshKeyFingerprint(privateKey: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `lemniscate-key-${randomBytes(4).toString('hex')}-`));
  try {
    const file = join(dir, 'key');
    await writeFile(file, privateKey.endsWith('\n') ? privateKey : `${privateKey}\n`, { mode: 0o600 });
    let publicKey: string;
    try {
      ({ stdout: publicKey } = await run('ssh-keygen', ['-y', '-P', '', '-f', file], { timeout: 10_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new AppError(ErrorCode.Internal, 'The gateway cannot read SSH keys: ssh-keygen (Debian package openssh-client) is not installed on its host.');
      }
      const stderr = String((err as { stderr?: unknown }).stderr ?? '');
      throw new AppError(
        ErrorCode.ValidationFailed,
        /passphrase/i.test(stderr)
          ? 'The SSH private key cannot be read without a passphrase: give an unencrypted OpenSSH key made for this repository (ssh-keygen -t ed25519 -N "").'
          : 'The SSH private key cannot be read: it is damaged or incomplete. Give the whole key file, from its -----BEGIN line to its -----END line, with its line breaks.',
        { field: 'credential.privateKey' },
      );
    }
    const blob = publicKey.trim().split(/\s+/)[1] ?? '';
    return `SHA256:${createHash('sha256').update(Buffer.from(blob, 'base64')).digest('base64').replace(/=+$/, '')}`;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
