import type { SandboxInfo } from '@lemniscate/contracts';
import { AuditService } from '../../src/audit/audit.service';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { ApprovedCommandsRepository } from '../../src/db/repositories/approved-commands.repository';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { withTestDatabases } from '../support/db';
import { EventsService } from '../../src/events/events.service';
import { DbSessionRecorder } from '../../src/runtime/db-recorder';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

const fp = (c: string) => `sha256:${c.repeat(64)}`;
const START = fp('1');
const KEPT = fp('2');
const READ_AT_END = fp('3');

// X3 on the real tables: what the sessions row says about the tree at the end, whoever ends it.
withTestDatabases((db) => {
  let gw: Gateway;
  let project: string;
  let dev: { token: string; userId: string };

  beforeAll(async () => {
    gw = await startGateway(db());
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'fingerprints');
    dev = await createUser(gw, admin, 'fp@example.test', 'developer', [project]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  const recorder = (id: string, rootId: string) =>
    new DbSessionRecorder(
      {
        sessions: gw.app.get(SessionsRepository),
        toolCalls: gw.app.get(ToolCallsRepository),
        approvals: gw.app.get(ApprovalsRepository),
        approvalsService: gw.app.get(ApprovalsService),
        approvedCommands: gw.app.get(ApprovedCommandsRepository),
        audit: gw.app.get(AuditService),
        events: gw.app.get(EventsService),
      },
      { id, projectId: project, rootId, agent: 'general' },
    );
  const sandbox = (sessionId: string): SandboxInfo => ({
    sandboxId: `sbx-${sessionId}`,
    sessionId,
    runtime: 'runc',
    state: 'ready',
    baseCommit: 'a'.repeat(40),
    branch: 'main',
    includedUncommitted: false,
    fingerprint: START,
    excluded: [],
    limits: { cpus: 1, memoryMb: 512, pids: 64, diskMb: 64, commandTimeoutSeconds: 60, outputCapBytes: 4096, lifetimeMinutes: 60 },
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 3600_000).toISOString(),
  });

  const kepts = ['nothing', 'a change kept', 'a change being kept'] as const;
  const keepers = ['the session', 'its subagent'] as const;
  const enders = ['its loop', 'a person, then its loop'] as const;
  const reads = ['read at the end', 'unreadable at the end'] as const;
  const cells = kepts.flatMap((kept) => keepers.flatMap((keeper) => enders.flatMap((ender) => reads.map((read) => ({ kept, keeper, ender, read })))));

  it(`stores the end fingerprint for each of the ${cells.length} ways a session's tree can end`, async () => {
    for (const c of cells) {
      const res = await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'x', mode: 'headless' });
      expect(res.status).toBe(201);
      const id = res.body.id as string;
      const root = recorder(id, id);
      await root.recordWorkingCopy(sandbox(id));
      let keeper = root;
      if (c.keeper === 'its subagent') {
        const child = await gw.app
          .get(SessionsRepository)
          .create({ projectId: project, userId: dev.userId, parentSessionId: id, depth: 1, agent: 'explore', instruction: 'y', mode: 'headless', headless: true });
        keeper = recorder(child.id, id);
      }
      if (c.kept !== 'nothing') await keeper.keepingChange();
      if (c.kept === 'a change kept') await keeper.recordPatch('diff --git a/x b/x\n', KEPT);
      if (c.ender === 'a person, then its loop') expect((await gw.http().post(`/api/v1/sessions/${id}/stop`).set(bearer(dev.token)).send({})).status).toBe(200);
      await root.finish({
        status: 'completed',
        stopReason: null,
        summary: null,
        finalPatch: null,
        fingerprintEnd: c.read === 'read at the end' ? READ_AT_END : undefined,
        actionsUsed: 1,
        extensionsUsed: 0,
      });
      const [row] = await db().superuser<{ status: string; fingerprint_start: string; fingerprint_end: string | null; final_patch: string | null }>(
        'SELECT status, fingerprint_start, fingerprint_end, final_patch FROM sessions WHERE id = $1',
        [id],
      );
      const expected = c.read === 'read at the end' ? READ_AT_END : c.kept === 'nothing' ? START : c.kept === 'a change kept' ? KEPT : null;
      expect({ c, status: row!.status, start: row!.fingerprint_start, end: row!.fingerprint_end }).toEqual({
        c,
        status: c.ender === 'its loop' ? 'completed' : 'stopped',
        start: START,
        end: expected,
      });
      // The API says the same.
      const shown = await gw.http().get(`/api/v1/sessions/${id}`).set(bearer(dev.token));
      expect({ c, end: shown.body.fingerprintEnd }).toEqual({ c, end: expected });
      // An unread end keeps the patch that goes with the fingerprint it keeps.
      if (c.read === 'unreadable at the end' && c.kept === 'a change kept') expect(row!.final_patch).toBe('diff --git a/x b/x\n');
    }
  });
});
