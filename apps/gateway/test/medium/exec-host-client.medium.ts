import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/config';
import { ExecHostCallError, destroyOrLeaveToReaper, toAppError } from '../../src/exec-host/exec-host.port';
import { HttpExecHost } from '../../src/exec-host/http-exec-host';
import { ErrorCode } from '../../src/common/errors';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';

/** The client as the gateway makes it: from its configuration. */
const client = (url: string, token?: string) => {
  const config = loadConfig({ LEMNISCATE_EXEC_HOST_URL: url, ...(token ? { LEMNISCATE_EXEC_HOST_TOKEN: token } : {}) });
  return new HttpExecHost({ url: config.execHost.url, token: config.execHost.token });
};

describe('HttpExecHost (the gateway side of the control channel)', () => {
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
    await expect(destroyOrLeaveToReaper(c, 'sbx-5')).resolves.toEqual({ sandboxDestroyed: true, sandboxNote: null });
    await expect(destroyOrLeaveToReaper(c, null)).resolves.toEqual({ sandboxDestroyed: false, sandboxNote: null });
  });

  it('says when the exec-host refuses the token', async () => {
    await expect(client(execHost.url, 'wrong').health()).resolves.toEqual({ ok: false, message: 'The exec-host refused the gateway token.' });
    const refused = await client(execHost.url, 'wrong')
      .destroy('sbx-2')
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ExecHostCallError);
    expect({ code: (refused as ExecHostCallError).code, status: (refused as ExecHostCallError).status }).toEqual({ code: 'unauthorized', status: 401 });
    expect(toAppError(refused, 'destroy sandbox sbx-2').message).toBe('The exec-host refused to destroy sandbox sbx-2 (HTTP 401).');
    await expect(destroyOrLeaveToReaper(client(execHost.url, 'wrong'), 'sbx-2')).resolves.toEqual({
      sandboxDestroyed: false,
      sandboxNote: "The exec-host refused to destroy sandbox sbx-2 (HTTP 401). The exec-host's reaper removes it by its session label.",
    });
  });

  it('turns a failing or unreachable exec-host into a coded error with a sentence', async () => {
    const failing = toAppError(
      await client(brokenUrl)
        .destroy('sbx-3')
        .catch((e: unknown) => e),
      'destroy sandbox sbx-3',
    );
    expect({ code: failing.code, message: failing.message }).toEqual({ code: ErrorCode.ExecHostUnavailable, message: 'The exec-host refused to destroy sandbox sbx-3 (HTTP 500).' });
    await expect(client(brokenUrl).health()).resolves.toEqual({ ok: false, message: 'The exec-host answered HTTP 500.' });
    await expect(client('http://127.0.0.1:9').destroy('sbx-4')).rejects.toThrow('The exec-host at http://127.0.0.1:9 could not be reached.');
    await expect(destroyOrLeaveToReaper(client('http://127.0.0.1:9'), 'sbx-4')).resolves.toEqual({
      sandboxDestroyed: false,
      sandboxNote: "The exec-host at http://127.0.0.1:9 could not be reached. The exec-host's reaper removes it by its session label.",
    });
  });
});
