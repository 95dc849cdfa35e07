import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createProject, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';

jest.setTimeout(120_000);

/**
 * `lemni audit export` against the real gateway (T3): a kind the gateway never records is an error
 * with the server's sentence, not an empty success; a person is named by email.
 */
beforeAll(() => buildCli());

withTestDatabases((db) => {
  let gw: Gateway;
  let env: Record<string, string>;
  beforeAll(async () => {
    gw = await startGateway(db());
    const admin = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    await createProject(gw, admin.token, 'cli-audit');
    env = { LEMNISCATE_GATEWAY: gw.baseUrl, LEMNISCATE_TOKEN: admin.token };
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('lemni audit export --kind nope fails and says why', async () => {
    const r = await lemni(['audit', 'export', '--kind', 'nope'], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('The gateway records no audit entries of kind "nope"');
  });

  it('lemni audit export --kind with a recorded kind and --user with an email finds the entries', async () => {
    const r = await lemni(['audit', 'export', '--kind', 'project.create', '--user', ADMIN_EMAIL], { env });
    expect([r.code, r.stderr]).toEqual([0, '']);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string });
    expect(lines.map((l) => l.kind)).toEqual(['project.create']);
  });
});
