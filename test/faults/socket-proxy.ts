import { rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A unix-socket relay to the Docker engine that a test can cut: the exec-host is pointed at it
 * (`DOCKER_HOST=unix://PATH`), so "the engine became unreachable" is a real broken connection for
 * this exec-host alone, while the machine's engine goes on serving everyone else.
 */
export class EngineProxy {
  private server: Server | null = null;
  private readonly pairs = new Set<[Socket, Socket]>();
  /** Connections cut so far (each one the exec-host had open to the engine). */
  cutConnections = 0;

  constructor(
    readonly path: string,
    private readonly engine = '/var/run/docker.sock',
  ) {}

  get dockerHost(): string {
    return `unix://${this.path}`;
  }

  async open(): Promise<void> {
    if (this.server) return;
    rmSync(this.path, { force: true });
    const server = createServer((client) => {
      const upstream = connect(this.engine);
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      const drop = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
    this.server = server;
  }

  /** The engine is gone: every open connection is reset and nothing answers at the socket. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const [client, upstream] of [...this.pairs]) {
      client.destroy();
      upstream.destroy();
      this.cutConnections++;
    }
    this.pairs.clear();
    await closed;
    rmSync(this.path, { force: true });
  }

  async close(): Promise<void> {
    await this.cut();
  }
}
