import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';
import { SessionsService } from '../../apps/gateway/src/sessions/sessions.service';

/**
 * `lemni policy dry-run` against a real gateway: an administrator sees which past decisions the
 * recommended policy would change (read-only inspection freed, a hidden execution still asking), grouped by
 * change of effect; a developer is refused by the gateway; nothing is ever published.
 */
jest.setTimeout(240_000);

withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let developer: string;
  let home: string;
  let draft: string;
  let projectId: string;
  const asked = { effect: 'ask' as const, rule: 'commands.default', reason: 'No rule names it.' };

  beforeAll(async () => {
    buildCli();
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    projectId = await createProject(gw, admin, 'dry-cli');
    developer = (await createUser(gw, admin, 'dev@example.test', 'developer', [projectId])).token;
    const sessions = gw.app.get(SessionsService);
    for (const instruction of ['look around', 'look again']) {
      const session = await gw.http().post('/api/v1/sessions').set(bearer(developer)).send({ projectId, instruction });
      for (const command of ['ls -la', 'git status', 'go test -exec "sh -c id" ./...', 'npm test']) {
        await sessions.recordToolCall(session.body.id, { name: 'Bash', arguments: { command }, decision: asked, agent: 'general' });
      }
    }
    home = mkdtempSync(path.join(os.tmpdir(), 'lemni-dry-'));
    const init = await lemni(['policy', 'init', '--recommended'], { env: { HOME: home } });
    expect(init.code).toBe(0);
    draft = path.join(home, 'recommended.yaml');
    writeFileSync(draft, init.stdout);
  });
  afterAll(async () => {
    await gw?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const run = (token: string, ...args: string[]) =>
    lemni(['policy', 'dry-run', draft, '--project', 'dry-cli', ...args], { env: { HOME: home, LEMNISCATE_GATEWAY: gw.baseUrl, LEMNISCATE_TOKEN: token } });

  it('shows an administrator what the recommended policy frees, grouped, and keeps hidden execution asking', async () => {
    const r = await run(admin);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(`Replayed 8 tool calls from 2 sessions of dry-cli under ${draft}: 8 decisions would change.`);
    expect(lines).toContain('ask → allow (6)');
    for (const subject of ['ls -la', 'git status', 'npm test']) expect(r.stdout).toMatch(new RegExp(`Bash +${subject} +2× in 2 sessions`));
    // The hidden execution still asks: only the rule that decides it changes (the free rule `go test`, and the option that makes it ask).
    expect(lines).toContain('ask, decided by another rule (2)');
    expect(r.stdout).toMatch(/Bash +go test -exec "sh -c id" \.\/\.\.\. +2× in 2 sessions +`go test -exec "sh -c id" \.\/\.\.\.` matches the free rule `go test`, but `-exec`/);
    const json = await run(admin, '--json', '--sessions', '1');
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body).toMatchObject({ sessionsReplayed: 1, toolCallsReplayed: 4 });
    expect(body.changes.map((c: { subject: string }) => c.subject).sort()).toEqual(['git status', 'go test -exec "sh -c id" ./...', 'ls -la', 'npm test']);
  });

  it('refuses a developer with the gateway’s sentence, and nothing is ever published', async () => {
    const r = await run(developer);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().length).toBeGreaterThan(20);
    const versions = await gw.http().get(`/api/v1/projects/${projectId}/policy/versions`).set(bearer(admin));
    expect(versions.body).toEqual([]);
  });
});
