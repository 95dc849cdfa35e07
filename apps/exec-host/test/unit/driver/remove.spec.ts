// A container's removal against an engine that fails it first: the engine's own kill can give up on a
// container still ending (gVisor after a fork bomb: "failed to exit within 10 seconds of kill"), and a
// moment later the container has exited. The driver asks again; what is already gone is not an error.
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { DockerSandboxDriver } from '../../../src/driver/docker.driver';

/**
 * An engine on a unix socket that answers each DELETE of a container with the next status of `answers`,
 * a kill with `kill` and a wait for the container's end with `wait`; `calls` lists every request.
 */
async function fakeEngine(
  answers: number[],
  { kill = 204, wait = 200 }: { kill?: number; wait?: number } = {},
): Promise<{ socketPath: string; deletes: string[]; calls: string[]; close: () => Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-engine-'));
  const socketPath = path.join(dir, 'docker.sock');
  const deletes: string[] = [];
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    calls.push(`${req.method} ${(req.url ?? '').replace(/^\/v[\d.]+/, '').replace(/\?.*/, '')}`);
    if (req.method === 'POST' && /\/containers\/[^/?]+\/kill/.test(req.url ?? '')) {
      res.writeHead(kill, { 'content-type': 'application/json' }).end(kill === 204 ? '' : JSON.stringify({ message: 'Container is not running' }));
      return;
    }
    if (req.method === 'POST' && /\/containers\/[^/?]+\/wait/.test(req.url ?? '')) {
      if (wait === 0) return; // never answers
      res.writeHead(wait, { 'content-type': 'application/json' }).end(JSON.stringify(wait === 200 ? { StatusCode: 137 } : { message: 'No such container' }));
      return;
    }
    if (req.method === 'DELETE' && /\/containers\/[^/?]+/.test(req.url ?? '')) {
      deletes.push(req.url ?? '');
      const status = answers.shift() ?? 204;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        status === 204
          ? ''
          : JSON.stringify({ message: status === 404 ? 'No such container' : 'Could not kill running container, cannot remove - container PID 11197 is zombie and can not be killed' }),
      );
      return;
    }
    res.writeHead(404).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    deletes,
    calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The driver on the fake engine; removal touches no cgroup, so none is located. */
const driverOn = (socketPath: string, endedWaitMs?: number) =>
  new DockerSandboxDriver({ docker: { socketPath }, removeRetryMs: 10, ...(endedWaitMs ? { endedWaitMs } : {}), cgroupAccess: () => ({ layout: 'v2', locate: () => Promise.resolve(null) }) });

describe('DockerSandboxDriver.remove', () => {
  it.each([
    ['removed at once', [204], 1],
    ['removed at the second asking after the engine failed its kill', [500, 204], 2],
    ['removed at the third asking', [500, 500, 204], 3],
    ['already gone', [404], 1],
    ['already gone at the second asking', [500, 404], 2],
    ['being removed by someone else', [409], 1],
  ])('%s', async (_name, answers, asked) => {
    const engine = await fakeEngine([...answers]);
    try {
      await expect(driverOn(engine.socketPath).remove('c0ffee')).resolves.toBeUndefined();
      expect(engine.deletes).toHaveLength(asked);
      expect(engine.deletes[0]).toMatch(/^\/containers\/c0ffee\?.*force=true/);
    } finally {
      await engine.close();
    }
  });

  it('gives up after three failed askings and throws what the engine said', async () => {
    const engine = await fakeEngine([500, 500, 500, 204]);
    try {
      await expect(driverOn(engine.socketPath).remove('c0ffee')).rejects.toMatchObject({ statusCode: 500 });
      expect(engine.deletes).toHaveLength(3);
    } finally {
      await engine.close();
    }
  });

  it('kills the container and waits for its end before it asks for the removal', async () => {
    const engine = await fakeEngine([204]);
    try {
      await driverOn(engine.socketPath).remove('c0ffee');
      expect(engine.calls).toEqual(['POST /containers/c0ffee/kill', 'POST /containers/c0ffee/wait', 'DELETE /containers/c0ffee']);
    } finally {
      await engine.close();
    }
  });

  it.each([
    ['not running any more', { kill: 409, wait: 200 }],
    ['already gone', { kill: 404, wait: 404 }],
  ])('asks for the removal all the same when the kill finds the container %s', async (_name, answers) => {
    const engine = await fakeEngine([204], answers);
    try {
      await expect(driverOn(engine.socketPath).remove('c0ffee')).resolves.toBeUndefined();
      expect(engine.deletes).toHaveLength(1);
    } finally {
      await engine.close();
    }
  });

  it('asks for the removal once its wait for the end is over, when the engine never answers the wait', async () => {
    const engine = await fakeEngine([204], { wait: 0 });
    try {
      await expect(driverOn(engine.socketPath, 50).remove('c0ffee')).resolves.toBeUndefined();
      expect(engine.calls.at(-1)).toBe('DELETE /containers/c0ffee');
    } finally {
      await engine.close();
    }
  });

  it('does not ask again after a refusal of the request itself', async () => {
    const engine = await fakeEngine([400, 204]);
    try {
      await expect(driverOn(engine.socketPath).remove('c0ffee')).rejects.toMatchObject({ statusCode: 400 });
      expect(engine.deletes).toHaveLength(1);
    } finally {
      await engine.close();
    }
  });
});
