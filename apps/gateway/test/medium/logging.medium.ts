import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, login, startGateway, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

withTestDatabases(
  (db) => {
    let gw: Gateway;
    const lines: string[] = [];
    beforeAll(async () => {
      gw = await startGateway(db(), { LEMNISCATE_LOG_LEVEL: 'info' }, { write: (line: string) => lines.push(line) });
    });
    afterAll(async () => {
      await gw?.close();
    });

    it('logs each request as JSON with its request id, and never a credential', async () => {
      const s = await login(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
      const res = await gw.http().get('/api/v1/projects').set('cookie', s.cookie).set('x-request-id', 'trace-42').set(bearer('lemni_secretvalue'));
      expect(res.status).toBe(401);
      const line = lines.map((l) => JSON.parse(l) as { req?: { id?: string }; res?: { statusCode?: number } }).find((l) => l.req?.id === 'trace-42');
      expect(line?.res?.statusCode).toBe(401);
      const all = lines.join('\n');
      expect(all).not.toContain('lemni_secretvalue');
      expect(all).not.toContain(s.cookie.split('=')[1]);
      expect(all).not.toContain(s.csrf);
      expect(all).not.toContain(ADMIN_PASSWORD);
    });
  },
  ['pglite'],
);
