import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ErrorBody, fillPath, GatewayRoutes, ProjectAgentsView, RepositoryAccessView, type GatewayRouteName, type RepositoryAccess } from '@lemniscate/contracts';
import { EnvironmentsService } from '../../src/environments/environments.service';
import { SessionRuntimeService } from '../../src/runtime/runtime.service';
import { withTestDatabases, type TestDatabase } from '../support/db';
import { startExecHostDouble, type ExecHostDouble, type RecordedCall } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';
import { EventsClient } from '../support/ws-client';

jest.setTimeout(300_000);

/**
 * A project's repository access (ADR 0012) through the real gateway on both databases, with the
 * exec-host double: who may read, set and clear it (every route × every kind of caller × own,
 * foreign and unknown project); that the secret never comes back in any view, export, event or log
 * and is sealed in the database; the sentence for every access that does not fit the project's
 * transport and for every malformed body; what happens when a sealed credential does not open (copied
 * to another project, another secret key); and that the stored access, exactly, goes to the
 * exec-host with each sandbox creation, environment request and agents read, and nowhere once cleared.
 */

type Caller = 'admin' | 'developer member' | 'developer non-member' | 'officer member' | 'officer non-member' | 'revoked user' | 'no token';
const CALLERS: readonly Caller[] = ['admin', 'developer member', 'developer non-member', 'officer member', 'officer non-member', 'revoked user', 'no token'];
const MEMBERS: readonly Caller[] = ['admin', 'developer member', 'officer member'];
const ROUTES = ['repositoryAccess', 'setRepositoryAccess', 'clearRepositoryAccess', 'projectAgents'] as const satisfies readonly GatewayRouteName[];
type Route = (typeof ROUTES)[number];
type Target = 'own' | 'foreign' | 'unknown';
const TARGETS: readonly Target[] = ['own', 'foreign', 'unknown'];
const UNKNOWN_PROJECT = '00000000-0000-4000-8000-000000000000';

/**
 * From the rules in libs/policy/src/abilities.ts and the guard: without a valid principal, 401; a write
 * is `update Project`, which only administrators have at all (refused before the project is looked
 * up); a read looks the project up (404) and then asks for `read Project` of that project, which
 * members have; an administrator is a member of the projects they created or were added to.
 */
function expectedStatus(route: Route, caller: Caller, target: Target): number {
  if (caller === 'no token' || caller === 'revoked user') return 401;
  const write = route === 'setRepositoryAccess' || route === 'clearRepositoryAccess';
  if (write && caller !== 'admin') return 403;
  if (target === 'unknown') return 404;
  return target === 'own' && MEMBERS.includes(caller) ? 200 : 403;
}

const SOURCE = (name: string) => `https://git.example.test/acme/${name}.git`;
const SSH_SOURCE = (name: string) => `ssh://git@git.example.test:2222/acme/${name}.git`;
const SCP_SOURCE = (name: string) => `git@git.example.test:acme/${name}.git`;
const LOCAL_SOURCE = (name: string) => `/srv/git/${name}.git`;
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUTestOnlyNotARealCertificate0wCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n';
const AGENTS_DIR = '.lemniscate/agents';
const HEX40 = 'a'.repeat(40);

interface SshKey {
  privateKey: string;
  publicKey: string;
  /** `ssh-keygen -lf <pub>`'s SHA256 value. */
  fingerprint: string;
}

let keyDir: string;
let counter = 0;
function makeKey(options: { type?: 'ed25519' | 'rsa'; passphrase?: string; pem?: boolean } = {}): SshKey {
  const file = path.join(keyDir, `key-${++counter}`);
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    options.type ?? 'ed25519',
    ...(options.type === 'rsa' ? ['-b', '2048'] : []),
    ...(options.pem ? ['-m', 'PEM'] : []),
    '-N',
    options.passphrase ?? '',
    '-C',
    `deploy-${counter}@acme`,
    '-f',
    file,
  ]);
  const listed = execFileSync('ssh-keygen', ['-lf', `${file}.pub`], { encoding: 'utf8' });
  return { privateKey: readFileSync(file, 'utf8'), publicKey: readFileSync(`${file}.pub`, 'utf8'), fingerprint: listed.split(/\s+/)[1] ?? '' };
}
const knownHostsFor = (key: SshKey) =>
  `# the server's host key\n[git.example.test]:2222 ${key.publicKey.split(' ').slice(0, 2).join(' ')}\ngit.example.test ${key.publicKey.split(' ').slice(0, 2).join(' ')}\n`;

/** Everything that would betray a secret: the text, its base64 forms, a Basic header, and every line of a key's body. */
function tellTales(secret: { password?: string; username?: string; privateKey?: string }): string[] {
  const out: string[] = [];
  if (secret.password) {
    const p = secret.password;
    out.push(p, Buffer.from(p).toString('base64'), Buffer.from(p).toString('base64url'), encodeURIComponent(p));
    if (secret.username) out.push(Buffer.from(`${secret.username}:${p}`).toString('base64'));
  }
  if (secret.privateKey) {
    out.push(Buffer.from(secret.privateKey).toString('base64'));
    for (const line of secret.privateKey.split('\n')) if (line.trim() !== '' && !line.startsWith('-----')) out.push(line.trim());
  }
  return out;
}

/** A refusal a person can read: an error body whose message is a sentence, with no stack and no "undefined". */
function sentenceProblems(what: string, body: unknown): string[] {
  const parsed = ErrorBody.safeParse(body);
  if (!parsed.success) return [`${what}: not an error body: ${JSON.stringify(body)}`];
  const m = parsed.data.message;
  const problems: string[] = [];
  // A sentence, or a sentence after the name of what it is about ("agent: There is no agent…").
  if (!/^([A-Za-z0-9_.\/-]+: )?[A-Z`"]/.test(m) || !/[.)]$/.test(m)) problems.push(`${what}: not a sentence: ${m}`);
  if (/undefined|\[object Object\]|\n\s+at /.test(JSON.stringify(body))) problems.push(`${what}: carries "undefined", an object or a stack: ${JSON.stringify(body)}`);
  return problems;
}

const cells = { matrix: 0, grid: 0, malformed: 0, urls: 0, leakResponses: 0 };
afterAll(() => {
  process.stdout.write(
    `repository access: ${cells.matrix} access-matrix cells, ${cells.grid} transport × access cells, ${cells.malformed} malformed bodies, ${cells.urls} URLs with a secret, ${cells.leakResponses} responses searched for secrets\n`,
  );
});

/**
 * The gateway's log lines, of every gateway this file starts: nestjs-pino keeps one pino-http per
 * process, so the stream (and level) given to the first start is where every later start logs too.
 */
const logLines: string[] = [];
/** Every secret set in this file, to search the log and the audit for at the end. */
const secrets: { password?: string; username?: string; privateKey?: string }[] = [];

beforeAll(() => {
  keyDir = mkdtempSync(path.join(os.tmpdir(), 'lemni-keys-'));
});
afterAll(() => rmSync(keyDir, { recursive: true, force: true }));

withTestDatabases((db) => {
  let execHost: ExecHostDouble;
  let gw: Gateway;
  let scriptDir: string;
  const KEY_A = randomBytes(32).toString('base64');
  const KEY_B = randomBytes(32).toString('hex');
  let admin: string;
  let adminId: string;
  const tokens = {} as Record<Caller, string | null>;
  const ids = {} as Record<'developer' | 'officer', string>;
  const projects = {} as Record<'own' | 'foreign' | 'leakHttps' | 'leakSsh' | 'gridLocal' | 'gridHttps' | 'gridSsh' | 'gridScp' | 'malformed' | 'sealA' | 'sealB' | 'flow' | 'flowLocal', string>;

  const env = (key: string) => ({
    LEMNISCATE_EXEC_HOST_URL: execHost.url,
    LEMNISCATE_EXEC_HOST_TOKEN: execHost.token,
    LEMNISCATE_MODELS_CONFIG: path.join(scriptDir, 'models.yaml'),
    LEMNISCATE_DEFAULT_MODEL: `scripted:${path.join(scriptDir, 'done.json')}`,
    LEMNISCATE_SECRET_KEY: key,
    LEMNISCATE_LOG_LEVEL: 'debug',
  });
  const start = (database: TestDatabase, key = KEY_A) => startGateway(database, env(key), { write: (line: string) => logLines.push(line) }, { sessionLoops: 'run', environmentPollMs: 25 });

  const createUrlProject = async (token: string, name: string, repositorySource: string, defaultRef?: string) => {
    const res = await gw
      .http()
      .post('/api/v1/projects')
      .set(bearer(token))
      .send({ name, repositorySource, ...(defaultRef ? { defaultRef } : {}) });
    if (res.status !== 201) throw new Error(`create project ${name} failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.id as string;
  };
  const setAccess = (projectId: string, body: unknown, token = admin) =>
    gw
      .http()
      .post(`/api/v1/projects/${projectId}/repository/access`)
      .set(bearer(token))
      .send(body as object);
  const clearAccess = (projectId: string, token = admin) => gw.http().delete(`/api/v1/projects/${projectId}/repository/access`).set(bearer(token));
  const viewOf = async (projectId: string) => {
    const res = await gw.http().get(`/api/v1/projects/${projectId}/repository`).set(bearer(admin));
    expect(res.status).toBe(200);
    return RepositoryAccessView.parse(res.body);
  };
  const agentsOf = async (projectId: string, token = tokens['developer member'] as string) => {
    const res = await gw.http().get(`/api/v1/projects/${projectId}/agents`).set(bearer(token));
    expect(res.status).toBe(200);
    return ProjectAgentsView.parse(res.body);
  };
  const startSession = (projectId: string, extra: object = {}) =>
    gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(tokens['developer member'] as string))
      .send({ projectId, instruction: 'make the tests pass', mode: 'headless', ...extra });
  const runSession = async (projectId: string, extra: object = {}) => {
    const res = await startSession(projectId, extra);
    if (res.status !== 201) throw new Error(`session on ${projectId} failed to start: ${res.status} ${JSON.stringify(res.body)}`);
    await gw.app.get(SessionRuntimeService).settled(res.body.id as string);
    return res.body.id as string;
  };
  const row = async (projectId: string) =>
    (
      await db().superuser<{ credential_kind: string | null; credential_sealed: string | null; username: string | null; key_fingerprint: string | null }>(
        'SELECT credential_kind, credential_sealed, username, key_fingerprint FROM repository_access WHERE project_id = $1',
        [projectId],
      )
    )[0];
  const callsTo = (pathname: string, projectId: string, since = 0) =>
    execHost.calls
      .slice(since)
      .filter(
        (c): c is RecordedCall & { body: { projectId: string; repository: Record<string, unknown> } } => c.path === pathname && (c.body as { projectId?: string } | undefined)?.projectId === projectId,
      );

  beforeAll(async () => {
    scriptDir = mkdtempSync(path.join(os.tmpdir(), 'lemni-repo-access-'));
    writeFileSync(path.join(scriptDir, 'models.yaml'), 'scripted:\n  enabled: true\n');
    writeFileSync(path.join(scriptDir, 'done.json'), JSON.stringify({ turns: [{ text: 'Done.' }] }));
    execHost = await startExecHostDouble();
    gw = await start(db());
    ({ token: admin, userId: adminId } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD));
    const otherAdmin = await createUser(gw, admin, 'repo-admin2@example.test', 'admin', []);
    projects.own = await createUrlProject(admin, 'own', SOURCE('own'));
    projects.foreign = await createUrlProject(otherAdmin.token, 'foreign', SOURCE('foreign'));
    projects.leakHttps = await createUrlProject(admin, 'leak-https', SOURCE('leak-https'));
    projects.leakSsh = await createUrlProject(admin, 'leak-ssh', SSH_SOURCE('leak-ssh'));
    projects.gridLocal = await createUrlProject(admin, 'grid-local', LOCAL_SOURCE('grid-local'));
    projects.gridHttps = await createUrlProject(admin, 'grid-https', SOURCE('grid-https'));
    projects.gridSsh = await createUrlProject(admin, 'grid-ssh', SSH_SOURCE('grid-ssh'));
    projects.gridScp = await createUrlProject(admin, 'grid-scp', SCP_SOURCE('grid-scp'));
    projects.malformed = await createUrlProject(admin, 'malformed', SOURCE('malformed'));
    projects.sealA = await createUrlProject(admin, 'seal-a', SOURCE('seal-a'));
    projects.sealB = await createUrlProject(admin, 'seal-b', SOURCE('seal-b'));
    projects.flow = await createUrlProject(admin, 'flow', SOURCE('flow'), 'release');
    projects.flowLocal = await createUrlProject(admin, 'flow-local', LOCAL_SOURCE('flow-local'));
    const own = Object.entries(projects)
      .filter(([k]) => k !== 'foreign')
      .map(([, id]) => id);
    const developer = await createUser(gw, admin, 'repo-dev@example.test', 'developer', own);
    const officer = await createUser(gw, admin, 'repo-officer@example.test', 'security_officer', own);
    const revoked = await createUser(gw, admin, 'repo-revoked@example.test', 'developer', own);
    ids.developer = developer.userId;
    ids.officer = officer.userId;
    tokens.admin = admin;
    tokens['developer member'] = developer.token;
    tokens['developer non-member'] = (await createUser(gw, admin, 'repo-outsider@example.test', 'developer', [])).token;
    tokens['officer member'] = officer.token;
    tokens['officer non-member'] = (await createUser(gw, admin, 'repo-officer-out@example.test', 'security_officer', [])).token;
    tokens['revoked user'] = revoked.token;
    tokens['no token'] = null;
    expect((await gw.http().post(`/api/v1/users/${revoked.userId}/revoke`).set(bearer(admin)).send({})).status).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
    rmSync(scriptDir, { recursive: true, force: true });
  });

  it('answers every repository route for every caller on its own, a foreign and an unknown project as the role rules say', async () => {
    const failures: string[] = [];
    let counted = 0;
    const targetId: Record<Target, string> = { own: projects.own, foreign: projects.foreign, unknown: UNKNOWN_PROJECT };
    const body = { credential: { kind: 'https', username: 'matrix', password: `matrix-${randomBytes(6).toString('hex')}` } };
    secrets.push(body.credential);
    for (const name of ROUTES) {
      for (const caller of CALLERS) {
        for (const target of TARGETS) {
          const route = GatewayRoutes[name];
          const url = fillPath(route.path, { projectId: targetId[target] });
          let req = route.method === 'GET' ? gw.http().get(url) : route.method === 'POST' ? gw.http().post(url) : gw.http().delete(url);
          const token = tokens[caller];
          if (token) req = req.set(bearer(token));
          const res = await (route.method === 'POST' ? req.send(body) : req);
          cells.matrix += 1;
          counted += 1;
          const expected = expectedStatus(name, caller, target);
          const cell = `${name} by ${caller} on the ${target} project`;
          if (res.status !== expected) failures.push(`${cell}: ${res.status} (expected ${expected}) ${JSON.stringify(res.body)}`);
          if (res.status >= 400) failures.push(...sentenceProblems(cell, res.body));
          if (res.status === 403 && !/^As (an administrator|a developer|a security officer) you may not /.test(String(res.body.message))) failures.push(`${cell}: the refusal does not say why`);
          if (res.status === 404 && res.body.message !== `There is no project ${UNKNOWN_PROJECT}.`) failures.push(`${cell}: ${res.body.message}`);
          if (res.status === 200 && name !== 'projectAgents') RepositoryAccessView.parse(res.body);
          if (res.status === 200 && name === 'projectAgents') ProjectAgentsView.parse(res.body);
          if (JSON.stringify(res.body).includes(body.credential.password)) failures.push(`${cell}: the password came back`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(counted).toBe(ROUTES.length * CALLERS.length * TARGETS.length);
    // Nobody but the administrator changed anything: the foreign project has no access, the own one the admin's.
    expect(await row(projects.foreign)).toBeUndefined();
    const sets = (await auditKinds(gw, ['project.repository_access_set'])).filter((e) => e.projectId === projects.own || e.projectId === projects.foreign);
    expect(sets.map((e) => [e.actor, e.projectId])).toEqual([[`user:${adminId}`, projects.own]]);
  });

  describe('the secret never comes back', () => {
    let sshKey: SshKey;
    let password: string;
    const sessionIds: string[] = [];

    beforeAll(async () => {
      sshKey = makeKey();
      password = `pw-marker-${randomBytes(12).toString('hex')}`;
      secrets.push({ username: 'deploy', password }, { privateKey: sshKey.privateKey });
      const https = await setAccess(projects.leakHttps, { credential: { kind: 'https', username: 'deploy', password }, caPem: CA_PEM });
      expect(https.status).toBe(200);
      const ssh = await setAccess(projects.leakSsh, { credential: { kind: 'ssh', privateKey: sshKey.privateKey }, knownHosts: knownHostsFor(makeKey()) });
      expect(ssh.status).toBe(200);
      // A policy version (for the policy routes) and a prepared environment (for its log) on both projects.
      for (const id of [projects.leakHttps, projects.leakSsh]) {
        expect(
          (
            await gw
              .http()
              .post(`/api/v1/projects/${id}/policy`)
              .set(bearer(admin))
              .send({ document: { version: 1 } })
          ).status,
        ).toBe(201);
        execHost.setEnvironment(id, { outcome: 'ready', durationMs: 10 });
        expect((await gw.http().post(`/api/v1/projects/${id}/environment/prepare`).set(bearer(admin)).send({})).status).toBe(202);
      }
      await gw.app.get(EnvironmentsService).settled();
      for (const id of [projects.leakHttps, projects.leakSsh]) sessionIds.push(await runSession(id));
    });

    it("shows the key's fingerprint as ssh-keygen -lf prints it, and the user name, never the secret", async () => {
      const ssh = await viewOf(projects.leakSsh);
      expect(ssh.credential).toEqual({ kind: 'ssh', username: null, keyFingerprint: sshKey.fingerprint });
      expect(sshKey.fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
      expect((await row(projects.leakSsh))?.key_fingerprint).toBe(sshKey.fingerprint);
      const https = await viewOf(projects.leakHttps);
      expect(https).toMatchObject({ transport: 'https', credential: { kind: 'https', username: 'deploy', keyFingerprint: null }, caPem: CA_PEM, knownHosts: null, updatedBy: adminId });
    });

    it('is in no response a member, an officer or an administrator can read, nor in the event stream', async () => {
      const jobIds = [projects.leakHttps, projects.leakSsh].map((id) => execHost.latestJob(id)?.jobId as string);
      const responses: { what: string; status: number; text: string }[] = [];
      const covered = new Set<string>();
      const skipped = new Set<string>();
      const who: [Caller, string][] = [
        ['developer member', ids.developer],
        ['officer member', ids.officer],
        ['admin', adminId],
      ];
      for (const [caller, userId] of who) {
        const headers = bearer(tokens[caller] as string);
        for (const [name, route] of Object.entries(GatewayRoutes)) {
          if (route.method !== 'GET') continue;
          const params = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]);
          const fills: Record<string, string | number>[] = [];
          if (params.length === 0) fills.push({});
          else if (params.includes('projectId') && params.includes('jobId')) [projects.leakHttps, projects.leakSsh].forEach((projectId, i) => fills.push({ projectId, jobId: jobIds[i] as string }));
          else if (params.includes('projectId') && params.includes('version')) [projects.leakHttps, projects.leakSsh].forEach((projectId) => fills.push({ projectId, version: 1 }));
          else if (params.length === 1 && params[0] === 'projectId') [projects.leakHttps, projects.leakSsh].forEach((projectId) => fills.push({ projectId }));
          else if (params.length === 1 && params[0] === 'id' && route.path.startsWith('/api/v1/sessions/')) sessionIds.forEach((id) => fills.push({ id }));
          else if (params.length === 1 && params[0] === 'id' && route.path.startsWith('/api/v1/users/')) fills.push({ id: userId });
          if (fills.length === 0) {
            skipped.add(`${name} ${route.path}`);
            continue;
          }
          covered.add(name);
          const queries: string[] =
            name === 'listAudit'
              ? ['?limit=1000', `?limit=1000&projectId=${projects.leakHttps}`, `?limit=1000&projectId=${projects.leakSsh}`]
              : name === 'auditExport'
                ? ['?format=jsonl', '?format=csv']
                : name === 'policyDiff'
                  ? ['?from=1&to=1']
                  : name === 'listSessions'
                    ? ['?limit=500']
                    : [''];
          for (const values of fills) {
            for (const query of queries) {
              const url = `${fillPath(route.path, values)}${query}`;
              const res = await fetch(`${gw.baseUrl}${url}`, { headers });
              responses.push({ what: `${caller} GET ${url}`, status: res.status, text: await res.text() });
            }
          }
        }
        // The event stream: the projects' and the sessions' events from the start.
        const client = await EventsClient.connect(gw.baseUrl, { token: tokens[caller] as string });
        try {
          for (const subscription of [...[projects.leakHttps, projects.leakSsh].map((projectId) => ({ projectId })), ...sessionIds.map((sessionId) => ({ sessionId }))]) {
            client.send({ type: 'subscribe', ...subscription, sinceSeq: 0 });
            const messages = await client.until((m) => m.type === 'subscribed' || m.type === 'error');
            responses.push({ what: `${caller} events ${JSON.stringify(subscription)}`, status: 0, text: JSON.stringify(messages) });
          }
        } finally {
          await client.close();
        }
      }
      cells.leakResponses += responses.length;
      // Everything that shows these projects to these callers was read, and was read successfully by someone.
      for (const name of [
        'getProject',
        'listProjects',
        'repositoryAccess',
        'projectAgents',
        'projectMcp',
        'listAudit',
        'auditExport',
        'getSession',
        'sessionToolCalls',
        'listSessions',
        'dashboard',
        'apiDocs',
        'environmentStatus',
        'environmentLog',
        'currentPolicy',
      ]) {
        expect(covered).toContain(name);
      }
      // These sessions asked for no approval: nothing to read there (and an approval's file lines come
      // from the sandbox's working copy, never from the project's repository access).
      expect([...skipped]).toEqual(['getApproval /api/v1/approvals/:id', 'approvalContext /api/v1/approvals/:id/context']);
      const okByAdmin = (prefix: string) => responses.some((r) => r.what.startsWith(`admin GET ${prefix}`) && r.status === 200 && r.text.length > 2);
      for (const prefix of [
        '/api/v1/audit?limit=1000',
        '/api/v1/audit/export?format=jsonl',
        '/api/v1/audit/export?format=csv',
        '/api/docs',
        `/api/v1/sessions/${sessionIds[0]}`,
        `/api/v1/projects/${projects.leakHttps}/repository`,
      ]) {
        expect({ prefix, ok: okByAdmin(prefix) }).toEqual({ prefix, ok: true });
      }
      // The audit read by an administrator does show the access being set (so the search is over real entries).
      expect(responses.find((r) => r.what === 'admin GET /api/v1/audit?limit=1000')?.text).toContain('project.repository_access_set');
      expect(responses.filter((r) => r.what.includes('events')).some((r) => r.text.includes('session_started'))).toBe(true);

      const found: string[] = [];
      const markers = [...tellTales({ username: 'deploy', password }), ...tellTales({ privateKey: sshKey.privateKey })];
      for (const r of responses) for (const m of markers) if (r.text.includes(m)) found.push(`${r.what} (${r.status}) holds ${m.slice(0, 24)}…`);
      expect(found).toEqual([]);
    });

    it('is sealed in the database, bound to its project, and its row holds no part of it in clear', async () => {
      for (const [id, secret, kind] of [
        [projects.leakHttps, { username: 'deploy', password }, 'https'],
        [projects.leakSsh, { privateKey: sshKey.privateKey }, 'ssh'],
      ] as const) {
        const r = await row(id);
        expect(r?.credential_kind).toBe(kind);
        expect(r?.credential_sealed).toMatch(/^v1\.[0-9a-f]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
        const whole = JSON.stringify(await db().superuser('SELECT * FROM repository_access WHERE project_id = $1', [id]));
        for (const m of tellTales(secret)) expect(whole).not.toContain(m);
      }
      // The same secret sealed twice does not give the same text (a fresh nonce each time).
      const before = (await row(projects.leakHttps))?.credential_sealed;
      expect((await setAccess(projects.leakHttps, { credential: { kind: 'https', username: 'deploy', password }, caPem: CA_PEM })).status).toBe(200);
      expect((await row(projects.leakHttps))?.credential_sealed).not.toBe(before);
    });

    it('goes to the exec-host only, as it was set, with the sandbox creation and the environment requests', () => {
      const [httpsSession, sshSession] = sessionIds;
      expect(execHost.creates.find((c) => c.sessionId === httpsSession)?.repository).toEqual({
        source: SOURCE('leak-https'),
        ref: 'main',
        access: { credential: { kind: 'https', username: 'deploy', password }, caPem: CA_PEM },
      });
      expect(execHost.creates.find((c) => c.sessionId === sshSession)?.repository.access?.credential).toEqual({ kind: 'ssh', privateKey: sshKey.privateKey });
    });
  });

  describe('validation', () => {
    type CredentialChoice = 'none' | 'https' | 'ssh';
    type Transport = 'local' | 'https' | 'ssh' | 'scp';
    const TRANSPORTS: readonly Transport[] = ['local', 'https', 'ssh', 'scp'];
    const CREDENTIALS: readonly CredentialChoice[] = ['none', 'https', 'ssh'];

    /** Whether this access fits this transport, from the rules of ADR 0012 (written out here, not taken from the code). */
    function fits(transport: Transport, credential: CredentialChoice, knownHosts: boolean, ca: boolean): { ok: true } | { ok: false; about: RegExp } {
      if (transport === 'local') return { ok: false, about: /local path/ };
      if (transport === 'https') {
        if (credential === 'ssh') return { ok: false, about: /over https:\/\/.*not an SSH key/ };
        if (knownHosts) return { ok: false, about: /known hosts apply to an ssh:\/\/ repository/ };
        return { ok: true };
      }
      if (credential === 'https') return { ok: false, about: /over SSH.*not a user name and password/ };
      if (ca) return { ok: false, about: /CA certificate applies to an https:\/\/ repository/ };
      if (!knownHosts) return { ok: false, about: /needs the server's host key in knownHosts/ };
      return { ok: true };
    }

    it('refuses, with a sentence, every access that does not fit the transport of the project, and takes every one that does', async () => {
      const key = makeKey();
      const hostKeys = knownHostsFor(makeKey());
      const gridPassword = `grid-${randomBytes(8).toString('hex')}`;
      secrets.push({ password: gridPassword }, { privateKey: key.privateKey });
      const projectOf: Record<Transport, [string, string]> = {
        local: [projects.gridLocal, 'grid-local'],
        https: [projects.gridHttps, 'grid-https'],
        ssh: [projects.gridSsh, 'grid-ssh'],
        scp: [projects.gridScp, 'grid-scp'],
      };
      const failures: string[] = [];
      let counted = 0;
      for (const transport of TRANSPORTS) {
        for (const credential of CREDENTIALS) {
          for (const knownHosts of [false, true]) {
            for (const ca of [false, true]) {
              const [projectId, projectName] = projectOf[transport];
              const body: RepositoryAccess = {
                ...(credential === 'https' ? { credential: { kind: 'https' as const, username: 'grid', password: gridPassword } } : {}),
                ...(credential === 'ssh' ? { credential: { kind: 'ssh' as const, privateKey: key.privateKey } } : {}),
                ...(knownHosts ? { knownHosts: hostKeys } : {}),
                ...(ca ? { caPem: CA_PEM } : {}),
              };
              const cell = `${transport} project, credential ${credential}, knownHosts ${knownHosts}, CA ${ca}`;
              cells.grid += 1;
              counted += 1;
              await clearAccess(projectId);
              const res = await setAccess(projectId, body);
              const expected = fits(transport, credential, knownHosts, ca);
              const text = JSON.stringify(res.body);
              if (text.includes(gridPassword) || tellTales({ privateKey: key.privateKey }).some((m) => text.includes(m))) failures.push(`${cell}: the secret came back`);
              if (expected.ok) {
                if (res.status !== 200) {
                  failures.push(`${cell}: ${res.status} ${text}`);
                  continue;
                }
                const view = RepositoryAccessView.parse(res.body);
                const want = credential === 'none' ? null : { kind: credential, username: credential === 'https' ? 'grid' : null, keyFingerprint: credential === 'ssh' ? key.fingerprint : null };
                if (JSON.stringify(view.credential) !== JSON.stringify(want)) failures.push(`${cell}: shows ${JSON.stringify(view.credential)}`);
                if (view.knownHosts !== (knownHosts ? hostKeys : null) || view.caPem !== (ca ? CA_PEM : null)) failures.push(`${cell}: the view differs from what was set`);
                if (view.transport !== (transport === 'scp' ? 'ssh' : transport)) failures.push(`${cell}: transport ${view.transport}`);
              } else {
                if (res.status !== 400 || res.body.code !== 'validation_failed') failures.push(`${cell}: ${res.status} (expected 400 validation_failed) ${text}`);
                const prefix = `The repository access of project "${projectName}" cannot be set: `;
                if (!String(res.body.message).startsWith(prefix) || !expected.about.test(String(res.body.message))) failures.push(`${cell}: ${res.body.message}`);
                failures.push(...sentenceProblems(cell, res.body));
                if ((await row(projectId)) !== undefined) failures.push(`${cell}: a refused access was stored`);
              }
            }
          }
        }
      }
      expect(failures).toEqual([]);
      expect(counted).toBe(TRANSPORTS.length * CREDENTIALS.length * 4);
    });

    it('refuses a key protected by a passphrase, in either format, with a sentence that says so', async () => {
      const hostKeys = knownHostsFor(makeKey());
      const openssh = makeKey({ passphrase: 'pw-for-the-test' });
      const pem = makeKey({ type: 'rsa', pem: true, passphrase: 'pw-for-the-test' });
      expect(pem.privateKey).toContain('Proc-Type: 4,ENCRYPTED');
      secrets.push({ privateKey: openssh.privateKey }, { privateKey: pem.privateKey });
      for (const key of [openssh, pem]) {
        const res = await setAccess(projects.gridSsh, { credential: { kind: 'ssh', privateKey: key.privateKey }, knownHosts: hostKeys });
        expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_failed' });
        expect(res.body.message).toMatch(/passphrase/);
        expect(sentenceProblems('passphrase', res.body)).toEqual([]);
        expect(JSON.stringify(res.body)).toMatch(/credential\.privateKey/);
        for (const m of tellTales({ privateKey: key.privateKey })) expect(JSON.stringify(res.body)).not.toContain(m);
      }
    });

    it('refuses a damaged key with a sentence that says so (not that it has a passphrase), and reads a key pasted with CRLF line ends', async () => {
      const hostKeys = knownHostsFor(makeKey());
      const key = makeKey();
      secrets.push({ privateKey: key.privateKey });
      const lines = key.privateKey.split('\n');
      const damaged = [lines.map((l, i) => (i === 2 ? `${l.slice(0, 10)}AAAA${l.slice(14)}` : l)).join('\n'), [...lines.slice(0, 3), lines.at(-2), ''].join('\n')];
      for (const privateKey of damaged) {
        const res = await setAccess(projects.gridSsh, { credential: { kind: 'ssh', privateKey }, knownHosts: hostKeys });
        expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_failed' });
        expect(res.body.message).toMatch(/^The SSH private key cannot be read: it is damaged or incomplete/);
        expect(res.body.message).not.toMatch(/passphrase/);
        expect(sentenceProblems('damaged key', res.body)).toEqual([]);
        expect(res.body.details).toEqual({ field: 'credential.privateKey' });
      }
      // Pasted from an editor that ends lines with CRLF: the same key, stored and sent with LF.
      const crlf = key.privateKey.replace(/\n/g, '\r\n');
      const res = await setAccess(projects.gridScp, { credential: { kind: 'ssh', privateKey: crlf }, knownHosts: hostKeys });
      expect(res.status).toBe(200);
      expect(RepositoryAccessView.parse(res.body).credential?.keyFingerprint).toBe(key.fingerprint);
      const id = await runSession(projects.gridScp);
      expect(execHost.creates.find((c) => c.sessionId === id)?.repository.access?.credential).toEqual({ kind: 'ssh', privateKey: key.privateKey });
    });

    it('refuses every malformed body with a 400 that names the field, and never echoes the secret in it', async () => {
      const marker = `malformed-${randomBytes(8).toString('hex')}`;
      secrets.push({ password: marker });
      const key = makeKey();
      const cases: [string, unknown, string][] = [
        ['a user name with a space', { credential: { kind: 'https', username: 'a b', password: marker } }, 'body.credential.username'],
        ['a user name with ":"', { credential: { kind: 'https', username: 'a:b', password: marker } }, 'body.credential.username'],
        ['an empty user name', { credential: { kind: 'https', username: '', password: marker } }, 'body.credential.username'],
        ['no password', { credential: { kind: 'https', username: 'u' } }, 'body.credential.password'],
        ['an empty password', { credential: { kind: 'https', username: 'u', password: '' } }, 'body.credential.password'],
        ['a password on two lines', { credential: { kind: 'https', username: 'u', password: `${marker}\nsecond` } }, 'body.credential.password'],
        ['a password with a NUL', { credential: { kind: 'https', username: 'u', password: `${marker}\u0000` } }, 'body.credential.password'],
        ['a password too long', { credential: { kind: 'https', username: 'u', password: marker.repeat(300) } }, 'body.credential.password'],
        ['a password that is a number', { credential: { kind: 'https', username: 'u', password: 12345 } }, 'body.credential.password'],
        ['a key beside a password', { credential: { kind: 'https', username: 'u', password: marker, privateKey: key.privateKey } }, 'body.credential'],
        ['an unknown kind', { credential: { kind: 'token', password: marker } }, 'body.credential.kind'],
        ['no kind', { credential: { username: 'u', password: marker } }, 'body.credential.kind'],
        ['a credential that is a string', { credential: marker }, 'body.credential'],
        ['a key that is not one', { credential: { kind: 'ssh', privateKey: `not a key ${marker}` } }, 'body.credential.privateKey'],
        ['a public key for a private one', { credential: { kind: 'ssh', privateKey: key.publicKey } }, 'body.credential.privateKey'],
        ['a key that is a number', { credential: { kind: 'ssh', privateKey: 1 } }, 'body.credential.privateKey'],
        ['a password beside a key', { credential: { kind: 'ssh', privateKey: key.privateKey, password: marker } }, 'body.credential'],
        ['known hosts that are not', { knownHosts: `just text ${marker}` }, 'body.knownHosts'],
        ['a known hosts marker that is not one', { knownHosts: `@trusted git.example.test ${key.publicKey}` }, 'body.knownHosts'],
        ['a CA that is not PEM', { caPem: `not a certificate ${marker}` }, 'body.caPem'],
        ['a private key for a CA', { caPem: key.privateKey }, 'body.caPem'],
        ['an unknown field', { token: marker }, 'body'],
        ['an array', [{ credential: { kind: 'https', username: 'u', password: marker } }], 'body'],
      ];
      const failures: string[] = [];
      for (const [what, body, field] of cases) {
        cells.malformed += 1;
        const res = await gw.http().post(`/api/v1/projects/${projects.malformed}/repository/access`).set(bearer(admin)).set('content-type', 'application/json').send(JSON.stringify(body));
        const text = JSON.stringify(res.body);
        if (res.status !== 400 || res.body.code !== 'validation_failed') failures.push(`${what}: ${res.status} ${text}`);
        const issues = ((res.body.details as { issues?: { path: string }[] } | undefined)?.issues ?? []).map((i) => i.path);
        if (!issues.includes(field) || !String(res.body.message).includes(`${field}: `)) failures.push(`${what}: does not name ${field}: ${text}`);
        failures.push(...sentenceProblems(what, res.body));
        for (const m of [...tellTales({ password: marker }), ...tellTales({ privateKey: key.privateKey })]) if (text.includes(m)) failures.push(`${what}: echoes the secret`);
      }
      // Bodies that are not a JSON object at all: refused by the parser, with no field to name.
      for (const raw of [`{"credential": "${marker}`, 'null', `"${marker}"`, '42']) {
        cells.malformed += 1;
        const res = await gw.http().post(`/api/v1/projects/${projects.malformed}/repository/access`).set(bearer(admin)).set('content-type', 'application/json').send(raw);
        if (res.status !== 400 || res.body.code !== 'validation_failed') failures.push(`raw ${JSON.stringify(raw)}: ${res.status} ${JSON.stringify(res.body)}`);
        failures.push(...sentenceProblems(`raw ${JSON.stringify(raw)}`, res.body));
        if (JSON.stringify(res.body).includes(marker)) failures.push(`raw ${JSON.stringify(raw)}: echoes the secret`);
      }
      expect(failures).toEqual([]);
      expect(await row(projects.malformed)).toBeUndefined();
    });

    it('refuses a project whose URL carries a secret, without echoing the secret', async () => {
      const failures: string[] = [];
      const token = `ghp_${randomBytes(16).toString('hex')}`;
      const sources = [
        `https://x:${token}@git.example.test/acme/r.git`,
        `https://${token}@git.example.test/acme/r.git`,
        `https://x:${token}@git.example.test:8443/acme/r.git`,
        `https://:${token}@git.example.test/acme/r.git`,
        `https://x:${token}@git.example.test/acme/r.git/`,
        `HTTPS://x:${token}@git.example.test/acme/r.git`,
        `ssh://git:${token}@git.example.test/acme/r.git`,
        `ssh://git:${token}@git.example.test:2222/acme/r.git`,
        `https://git.example.test/acme/r.git?private_token=${token}`,
        `https://git.example.test/acme/r.git#${token}`,
        `http://x:${token}@git.example.test/acme/r.git`,
        `git://${token}@git.example.test/acme/r.git`,
      ];
      const before = (await gw.http().get('/api/v1/projects').set(bearer(admin))).body.length;
      for (const [i, repositorySource] of sources.entries()) {
        cells.urls += 1;
        const res = await gw
          .http()
          .post('/api/v1/projects')
          .set(bearer(admin))
          .send({ name: `with-secret-${i}`, repositorySource });
        const text = JSON.stringify(res.body);
        if (res.status !== 400 || res.body.code !== 'validation_failed') failures.push(`${repositorySource}: ${res.status} ${text}`);
        if (!String(res.body.message).includes('body.repositorySource: ')) failures.push(`${repositorySource}: does not name the field: ${text}`);
        if (text.includes(token) || text.includes(encodeURIComponent(token)) || text.includes(Buffer.from(token).toString('base64'))) failures.push(`${repositorySource}: echoes the token: ${text}`);
        failures.push(...sentenceProblems(repositorySource, res.body));
      }
      expect(failures).toEqual([]);
      expect((await gw.http().get('/api/v1/projects').set(bearer(admin))).body.length).toBe(before);
      // Nor is it in the audit log (the refusals are not project creations).
      const audit = JSON.stringify(await db().superuser('SELECT * FROM audit_log'));
      expect(audit).not.toContain(token);
      secrets.push({ password: token });
    });
  });

  describe('a sealed credential that does not open', () => {
    let passwordA: string;
    let passwordB: string;

    beforeAll(async () => {
      passwordA = `seal-a-${randomBytes(8).toString('hex')}`;
      passwordB = `seal-b-${randomBytes(8).toString('hex')}`;
      secrets.push({ username: 'a', password: passwordA }, { username: 'b', password: passwordB });
      expect((await setAccess(projects.sealA, { credential: { kind: 'https', username: 'a', password: passwordA } })).status).toBe(200);
      expect((await setAccess(projects.sealB, { credential: { kind: 'https', username: 'b', password: passwordB } })).status).toBe(200);
      execHost.directories.set(`${SOURCE('seal-a')}\0${AGENTS_DIR}`, [{ name: 'helper.md', text: '---\ndescription: Helps.\n---\nYou help.\n' }]);
    });

    const expectNotOpened = async (projectId: string, name: string, because: RegExp) => {
      const creates = execHost.creates.length;
      const sessionsBefore = (await gw.http().get(`/api/v1/sessions?projectId=${projectId}`).set(bearer(admin))).body.length;
      const res = await startSession(projectId);
      // A 500: the fault is the gateway's (its key, or its stored data), not the request's; the sentence says what to do.
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 500, code: 'internal' });
      expect(res.body.message).toMatch(new RegExp(`^The repository credential of project "${name}" cannot be opened by this gateway: `));
      expect(res.body.message).toMatch(because);
      expect(res.body.message).toMatch(/An administrator can set it again\.$/);
      expect(sentenceProblems('session start', res.body)).toEqual([]);
      // Nothing half-created, nothing sent.
      expect(execHost.creates.length).toBe(creates);
      expect((await gw.http().get(`/api/v1/sessions?projectId=${projectId}`).set(bearer(admin))).body.length).toBe(sessionsBefore);
      // The environment's status says the same; the agents route answers with the sentence as an error notice.
      const status = await gw
        .http()
        .get(`/api/v1/projects/${projectId}/environment`)
        .set(bearer(tokens['developer member'] as string));
      expect({ status: status.status, message: status.body.message }).toEqual({ status: 500, message: res.body.message });
      const agents = await agentsOf(projectId);
      expect(agents.agents).toEqual([]);
      expect(agents.commit).toBeNull();
      expect(agents.notices).toEqual([expect.objectContaining({ level: 'error', code: 'unreadable_directory', message: expect.stringContaining(res.body.message) })]);
      // What may be shown still is.
      expect((await viewOf(projectId)).credential).toMatchObject({ kind: 'https' });
    };

    it("refuses, with a sentence, a credential copied from another project's row", async () => {
      await db().superuser('UPDATE repository_access SET credential_sealed = (SELECT credential_sealed FROM repository_access WHERE project_id = $1) WHERE project_id = $2', [
        projects.sealA,
        projects.sealB,
      ]);
      await expectNotOpened(projects.sealB, 'seal-b', /does not open: it was changed, or belongs to something else/);
      // The project it was copied from still works.
      const id = await runSession(projects.sealA);
      expect(execHost.creates.find((c) => c.sessionId === id)?.repository.access).toEqual({ credential: { kind: 'https', username: 'a', password: passwordA } });
    });

    it('refuses, naming the key mismatch, after a restart with another secret key; the same key opens it again', async () => {
      await gw.close();
      gw = await start(db(), KEY_B);
      await expectNotOpened(
        projects.sealA,
        'seal-a',
        /sealed with another secret key \(id [0-9a-f]{16}; this gateway's is [0-9a-f]{16}\): every gateway of one database needs the same LEMNISCATE_SECRET_KEY/,
      );
      await gw.close();
      gw = await start(db(), KEY_A);
      const id = await runSession(projects.sealA);
      expect(execHost.creates.find((c) => c.sessionId === id)?.repository.access).toEqual({ credential: { kind: 'https', username: 'a', password: passwordA } });
      expect((await agentsOf(projects.sealA)).agents.map((a) => a.name)).toEqual(['helper']);
    });

    it('an administrator setting it again mends it; clearing it removes the row and the next session sends no access', async () => {
      expect((await setAccess(projects.sealB, { credential: { kind: 'https', username: 'b', password: passwordB } })).status).toBe(200);
      const mended = await runSession(projects.sealB);
      expect(execHost.creates.find((c) => c.sessionId === mended)?.repository.access).toEqual({ credential: { kind: 'https', username: 'b', password: passwordB } });

      const cleared = await clearAccess(projects.sealA);
      expect(cleared.status).toBe(200);
      expect(RepositoryAccessView.parse(cleared.body)).toMatchObject({ credential: null, knownHosts: null, caPem: null, updatedAt: null, updatedBy: null });
      expect(await row(projects.sealA)).toBeUndefined();
      const since = execHost.calls.length;
      const id = await runSession(projects.sealA);
      const created = execHost.creates.find((c) => c.sessionId === id);
      expect(created?.repository).toEqual({ source: SOURCE('seal-a'), ref: 'main' });
      expect(created?.environment?.repository).toEqual({ source: SOURCE('seal-a'), ref: 'main' });
      for (const c of [...callsTo('/v1/environments/status', projects.sealA, since), ...callsTo('/v1/repository/directory', projects.sealA, since)])
        expect(c.body.repository).not.toHaveProperty('access');
      // Clearing what is not there answers the same and audits nothing.
      expect((await clearAccess(projects.sealA)).status).toBe(200);
      expect((await auditKinds(gw, ['project.repository_access_cleared'])).filter((e) => e.projectId === projects.sealA)).toHaveLength(1);
    });
  });

  describe('the flow to the exec-host', () => {
    let access: RepositoryAccess;
    const flowSource = SOURCE('flow');

    beforeAll(async () => {
      const password = `flow-${randomBytes(8).toString('hex')}`;
      secrets.push({ username: 'ci', password });
      access = { credential: { kind: 'https', username: 'ci', password }, caPem: CA_PEM };
      expect((await setAccess(projects.flow, access)).status).toBe(200);
      execHost.directories.set(`${flowSource}\0${AGENTS_DIR}`, [
        { name: 'reviewer.md', text: '---\ndescription: Reviews the change.\nmode: primary\ntools: Read, Search\n---\nYou review changes.\n' },
        { name: 'lurker.md', text: '---\ndescription: Not listed.\nhidden: true\n---\nYou lurk.\n' },
        { name: 'broken.md', text: '---\nmode: sometimes\n---\nYou break.\n' },
        { name: 'notes.txt', text: 'not an agent' },
      ]);
      execHost.directories.set(`${SOURCE('other')}\0${AGENTS_DIR}`, [{ name: 'wrong.md', text: '---\ndescription: Of another repository.\n---\nNo.\n' }]);
    });

    it("reads the project's agents through the exec-host at its default ref, with its access", async () => {
      const since = execHost.calls.length;
      const view = await agentsOf(projects.flow, tokens['officer member'] as string);
      expect(view).toMatchObject({ projectId: projects.flow, ref: 'release', commit: HEX40 });
      expect(view.agents.map((a) => [a.name, a.location, a.origin, a.tools])).toEqual([['reviewer', `${AGENTS_DIR}/reviewer.md`, 'project', ['Read', 'Search']]]);
      expect(view.notices).toEqual([expect.objectContaining({ level: 'error', code: 'invalid_frontmatter', location: `${AGENTS_DIR}/broken.md` })]);
      expect(view.notices[0]?.message).toMatch(/^\.lemniscate\/agents\/broken\.md: mode must be primary, subagent or all/);
      const reads = callsTo('/v1/repository/directory', projects.flow, since);
      expect(reads).toHaveLength(1);
      expect(reads[0]?.body).toEqual({ projectId: projects.flow, repository: { source: flowSource, ref: 'release', access }, directory: AGENTS_DIR, suffix: '.md', maxFiles: 200 });
    });

    it("turns the exec-host's refusal into an error notice with its sentence, and still answers 200", async () => {
      const sentence = `The repository ${flowSource} could not be fetched: the server refused the credential (HTTP 403).`;
      execHost.directoryRefusal = (req) => (req.repository.source === flowSource ? sentence : null);
      try {
        const view = await agentsOf(projects.flow);
        expect({ agents: view.agents, commit: view.commit }).toEqual({ agents: [], commit: null });
        expect(view.notices).toEqual([{ level: 'error', code: 'unreadable_directory', location: AGENTS_DIR, message: expect.stringContaining(sentence) }]);
        expect(view.notices[0]?.message).toBe(`${AGENTS_DIR} could not be listed (${sentence}); no agent was read from it.`);
        // A session asking for one of the repository's agents is told why it is not there.
        const res = await startSession(projects.flow, { agent: 'reviewer' });
        expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_failed' });
        expect(res.body.message).toBe(`agent: There is no agent named "reviewer". Available: explore, general. ${AGENTS_DIR} could not be listed (${sentence}); no agent was read from it.`);
      } finally {
        execHost.directoryRefusal = null;
      }
    });

    it('sends exactly the stored access with the environment requests and the sandbox creation of a session, and reads agents at the default ref whatever the session starts from', async () => {
      execHost.setEnvironment(projects.flow, { outcome: 'ready', durationMs: 10 });
      const since = execHost.calls.length;
      expect((await gw.http().post(`/api/v1/projects/${projects.flow}/environment/prepare`).set(bearer(admin)).send({})).status).toBe(202);
      await gw.app.get(EnvironmentsService).settled();
      const id = await runSession(projects.flow, { baseCommit: 'b'.repeat(40), agent: 'reviewer' });
      const created = execHost.creates.find((c) => c.sessionId === id);
      expect(created?.repository).toEqual({ source: flowSource, ref: 'b'.repeat(40), access });
      expect(created?.environment?.repository).toEqual({ source: flowSource, ref: 'release', access });
      const environmentCalls = [...callsTo('/v1/environments/prepare', projects.flow, since), ...callsTo('/v1/environments/status', projects.flow, since)];
      expect(environmentCalls.length).toBeGreaterThanOrEqual(2);
      for (const c of environmentCalls) expect(c.body.repository).toEqual({ source: flowSource, ref: 'release', access });
      const reads = callsTo('/v1/repository/directory', projects.flow, since);
      expect(reads.length).toBeGreaterThanOrEqual(1);
      for (const c of reads) expect(c.body.repository).toEqual({ source: flowSource, ref: 'release', access });
      // The session runs the agent from the repository, as found at the default ref.
      const configured = (await auditKinds(gw, ['session.configured'])).find((e) => e.sessionId === id);
      expect(configured?.payload).toMatchObject({ agent: 'reviewer', agentLocation: `${AGENTS_DIR}/reviewer.md` });
      // A hidden agent is not listed but is invocable by name; one of another repository is not there.
      const hidden = await runSession(projects.flow, { agent: 'lurker' });
      expect((await auditKinds(gw, ['session.configured'])).find((e) => e.sessionId === hidden)?.payload).toMatchObject({ agent: 'lurker', agentLocation: `${AGENTS_DIR}/lurker.md` });
      const wrong = await startSession(projects.flow, { agent: 'wrong' });
      expect({ status: wrong.status, code: wrong.body.code }).toEqual({ status: 400, code: 'validation_failed' });
      expect(wrong.body.message).toBe('agent: There is no agent named "wrong". Available: explore, general, reviewer.');
      // One whose file was refused is said to be refused, and why.
      const broken = await startSession(projects.flow, { agent: 'broken' });
      expect({ status: broken.status, code: broken.body.code }).toEqual({ status: 400, code: 'validation_failed' });
      expect(broken.body.message).toMatch(
        /^agent: There is no agent named "broken"\. Available: explore, general, reviewer\. \.lemniscate\/agents\/broken\.md: mode must be primary, subagent or all .*The agent is not available until it is fixed\.$/,
      );
    });

    it('a person who may not start a session on the project causes no read with its access, and learns nothing of its agents or policy', async () => {
      const failures: string[] = [];
      for (const caller of ['developer non-member', 'officer member', 'officer non-member', 'admin'] as const) {
        const token = caller === 'admin' ? (await createUser(gw, admin, `repo-admin-out-${randomBytes(3).toString('hex')}@example.test`, 'admin', [])).token : (tokens[caller] as string);
        for (const extra of [{}, { agent: 'reviewer' }, { agent: 'no-such-agent' }, { agent: 'lurker', environment: { LEMNISCATE_SESSION_MAX_ACTIONS: 'not a number' } }]) {
          const since = execHost.calls.length;
          const res = await gw
            .http()
            .post('/api/v1/sessions')
            .set(bearer(token))
            .send({ projectId: projects.flow, instruction: 'look around', mode: 'headless', ...extra });
          const what = `${caller} ${JSON.stringify(extra)}`;
          if (res.status !== 403) failures.push(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
          if (/reviewer|lurker|Available|polic/.test(String(res.body.message))) failures.push(`${what}: the refusal names the project's agents: ${res.body.message}`);
          const sent = execHost.calls.slice(since).map((c) => c.path);
          if (sent.length > 0) failures.push(`${what}: the exec-host was asked ${sent.join(', ')}`);
        }
      }
      expect(failures).toEqual([]);
    });

    it('sends no access for a local project, nor after the access is cleared', async () => {
      execHost.setEnvironment(projects.flowLocal, { outcome: 'ready', durationMs: 10 });
      let since = execHost.calls.length;
      expect((await gw.http().post(`/api/v1/projects/${projects.flowLocal}/environment/prepare`).set(bearer(admin)).send({})).status).toBe(202);
      await gw.app.get(EnvironmentsService).settled();
      const local = await runSession(projects.flowLocal);
      const createdLocal = execHost.creates.find((c) => c.sessionId === local);
      expect(createdLocal?.repository).toEqual({ source: LOCAL_SOURCE('flow-local'), ref: 'main' });
      expect(createdLocal?.environment?.repository).toEqual({ source: LOCAL_SOURCE('flow-local'), ref: 'main' });
      for (const c of [...callsTo('/v1/environments/prepare', projects.flowLocal, since), ...callsTo('/v1/environments/status', projects.flowLocal, since)])
        expect(c.body.repository).not.toHaveProperty('access');
      // A local repository's agents are read by the gateway, never through the exec-host.
      expect(callsTo('/v1/repository/directory', projects.flowLocal)).toEqual([]);

      expect((await clearAccess(projects.flow)).status).toBe(200);
      since = execHost.calls.length;
      const after = await runSession(projects.flow);
      const created = execHost.creates.find((c) => c.sessionId === after);
      expect(created?.repository).toEqual({ source: flowSource, ref: 'release' });
      expect(created?.environment?.repository).toEqual({ source: flowSource, ref: 'release' });
      const later = [...callsTo('/v1/environments/status', projects.flow, since), ...callsTo('/v1/repository/directory', projects.flow, since)];
      expect(later.length).toBeGreaterThanOrEqual(2);
      for (const c of later) expect(c.body.repository).toEqual({ source: flowSource, ref: 'release' });
      // The agents route still reads the (now public) repository.
      expect((await agentsOf(projects.flow)).agents.map((a) => a.name)).toEqual(['reviewer']);
    });
  });

  it('audits each set and clear with its actor and project, and what was set without the secret', async () => {
    const entries = await auditKinds(gw, ['project.repository_access_set', 'project.repository_access_cleared']);
    const of = (projectId: string) => entries.filter((e) => e.projectId === projectId).map((e) => ({ kind: e.kind, actor: e.actor, payload: e.payload }));
    const sshFingerprint = (await viewOf(projects.leakSsh)).credential?.keyFingerprint;
    expect(of(projects.leakSsh)).toEqual([
      {
        kind: 'project.repository_access_set',
        actor: `user:${adminId}`,
        payload: { credential: { kind: 'ssh', username: null, keyFingerprint: sshFingerprint }, knownHosts: 2, caCertificate: false },
      },
    ]);
    expect(of(projects.flow)).toEqual([
      { kind: 'project.repository_access_set', actor: `user:${adminId}`, payload: { credential: { kind: 'https', username: 'ci', keyFingerprint: null }, knownHosts: 0, caCertificate: true } },
      { kind: 'project.repository_access_cleared', actor: `user:${adminId}`, payload: {} },
    ]);
    expect(of(projects.leakHttps).map((e) => e.payload)).toEqual([
      { credential: { kind: 'https', username: 'deploy', keyFingerprint: null }, knownHosts: 0, caCertificate: true },
      { credential: { kind: 'https', username: 'deploy', keyFingerprint: null }, knownHosts: 0, caCertificate: true },
    ]);
    // No refused or unauthorised attempt left an entry of these kinds.
    expect(of(projects.foreign)).toEqual([]);
    expect(of(projects.malformed)).toEqual([]);
    expect(of(projects.gridLocal)).toEqual([]);
    // The whole audit log, as stored, holds none of the secrets set in this file.
    const everything = JSON.stringify(await db().superuser('SELECT * FROM audit_log'));
    const found = secrets.flatMap((s) => tellTales(s).filter((m) => everything.includes(m)));
    expect(found).toEqual([]);
  });

  it("holds no secret in the gateway's log, at debug level, across every start", () => {
    expect(logLines.length).toBeGreaterThan(100);
    const log = logLines.join('\n');
    expect(log).toContain('a repository credential does not open');
    const found = secrets.flatMap((s) => tellTales(s).filter((m) => log.includes(m)));
    expect(found).toEqual([]);
  });

  it('sent the exec-host only requests its contract accepts', () => {
    expect(execHost.invalid).toEqual([]);
  });
});
