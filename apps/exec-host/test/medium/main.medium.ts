import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { probeLayout } from '../../src/driver/cgroups';
import { start } from '../../src/main';
import { TOKEN } from '../support/helpers';

jest.setTimeout(60_000);

function get(socketPath: string, url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: url, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('exec-host start-up from the environment', () => {
  it('listens on a unix socket of mode 600, token required', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-sock-'));
    const socket = path.join(dir, 'exec-host.sock');
    const running = await start(
      { LEMNISCATE_EXEC_HOST_TOKEN: TOKEN, LEMNISCATE_EXEC_HOST_SOCKET: socket, LEMNISCATE_EXEC_HOST_STATE_DIR: path.join(dir, 'state'), LEMNISCATE_EXEC_HOST_WARM_POOL: '0' },
      { logger: false },
    );
    try {
      expect(running.address).toBe(`unix:${socket}`);
      expect(fs.statSync(socket).mode & 0o777).toBe(0o600);
      expect((await get(socket, '/healthz')).status).toBe(401);
      const ok = await get(socket, '/v1/health', TOKEN);
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body).engine.reachable).toBe(true);
      expect(fs.statSync(path.join(dir, 'state')).mode & 0o777).toBe(0o700);
    } finally {
      await running.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('listens on 127.0.0.1 only', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-tcp-'));
    const running = await start({ LEMNISCATE_EXEC_HOST_TOKEN: TOKEN, LEMNISCATE_EXEC_HOST_PORT: '17171', LEMNISCATE_EXEC_HOST_STATE_DIR: dir, LEMNISCATE_EXEC_HOST_WARM_POOL: '0' }, { logger: false });
    try {
      expect(running.address).toBe('http://127.0.0.1:17171');
      const addr = running.host.app.getHttpServer().address() as { address: string };
      expect(addr.address).toBe('127.0.0.1');
    } finally {
      await running.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start without a token, before touching anything', async () => {
    await expect(start({ LEMNISCATE_EXEC_HOST_STATE_DIR: '/nonexistent/state' })).rejects.toThrow('The exec-host will not start without LEMNISCATE_EXEC_HOST_TOKEN');
    expect(fs.existsSync('/nonexistent/state')).toBe(false);
  });

  it('refuses to start with a cgroup layout this host does not have, in one sentence', async () => {
    const missing = probeLayout('/').layout === 'v2' ? 'v1' : 'v2';
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-cgroup-'));
    try {
      await expect(start({ LEMNISCATE_EXEC_HOST_TOKEN: TOKEN, LEMNISCATE_EXEC_HOST_STATE_DIR: dir, LEMNISCATE_CGROUP_LAYOUT: missing }, { logger: false })).rejects.toThrow(
        new RegExp(`^The exec-host will not start: LEMNISCATE_CGROUP_LAYOUT is ${missing}, but .+: set it to auto, or to the layout this host has\\.$`),
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
