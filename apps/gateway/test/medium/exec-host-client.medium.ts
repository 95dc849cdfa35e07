import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError, ErrorCode } from '../../src/common/errors';
import { loadConfig } from '../../src/config/config';
import { ExecHostClient } from '../../src/exec-host/exec-host.client';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';

const client = (url: string, token?: string) => new ExecHostClient(loadConfig({ LEMNISCATE_EXEC_HOST_URL: url, ...(token ? { LEMNISCATE_EXEC_HOST_TOKEN: token } : {}) }));

describe('ExecHostClient', () => {
  let execHost: ExecHostDouble;
  let broken: Server;
  let brokenUrl: string;
  beforeAll(async () => {
    execHost = await startExecHostDouble();
    // An exec-host that fails every call: 500 on destroy, a body that is not its health document.
    broken = createServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"code":"internal"}');
    });
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await execHost.close();
    await new Promise((resolve) => broken.close(resolve));
  });

  it('sends its bearer token, destroys a sandbox and reads health', async () => {
    const c = client(execHost.url, execHost.token);
    await c.destroy('sbx-1');
    expect(execHost.destroyed).toContain('sbx-1');
    await expect(c.health()).resolves.toEqual({ ok: true });
  });

  it('says when the exec-host refuses the token', async () => {
    await expect(client(execHost.url, 'wrong').health()).resolves.toEqual({ ok: false, message: 'The exec-host refused the gateway token.' });
    await expect(client(execHost.url, 'wrong').destroy('sbx-2')).rejects.toThrow('The exec-host refused to destroy sandbox sbx-2 (HTTP 401).');
  });

  it('turns a failing or unreachable exec-host into a coded error with a sentence', async () => {
    const failing = await client(brokenUrl).destroy('sbx-3').catch((e: unknown) => e);
    expect(failing).toBeInstanceOf(AppError);
    expect((failing as AppError).code).toBe(ErrorCode.ExecHostUnavailable);
    await expect(client(brokenUrl).health()).resolves.toEqual({ ok: false, message: 'The exec-host answered HTTP 500.' });
    await expect(client('http://127.0.0.1:9').destroy('sbx-4')).rejects.toThrow('The exec-host at http://127.0.0.1:9 could not be reached.');
  });
});
