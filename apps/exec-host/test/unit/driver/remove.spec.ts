// A container's removal against an engine that fails it first: the engine's own kill can give up on a
// container still ending (gVisor after a fork bomb: "failed to exit within 10 seconds of kill"), and a
// moment later the container has exited. The driver asks again; what is already gone is not an error.
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { DockerSandboxDriver } from '../../../src/driver/docker.driver';

/** An engine on a unix socket that answers each DELETE of a container with the next status of `answers`. */
async function fakeEngine(answers: number[]): Promise<{ socketPath: string; deletes: string[]; close: () => Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-engine-'));
  const socketPath = path.join(dir, 'docker.sock');
  const deletes: string[] = [];
  const server = http.createServer((req, res) => {
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
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The driver on the fake engine; removal touches no cgroup, so none is located. */
const driverOn = (socketPath: string) => new DockerSandboxDriver({ docker: { socketPath }, removeRetryMs: 10, cgroupAccess: () => ({ layout: 'v2', locate: () => Promise.resolve(null) }) });

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
