import 'reflect-metadata';
import * as fs from 'node:fs';
import { createExecHost } from './app';
import { loadConfig } from './config';
import { DockerSandboxDriver } from './driver/docker.driver';
import { ExecHostError, StartupError } from './errors';

/** Starts the exec-host from the environment; any refusal to start is one sentence and exit code 1. */
export async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const driver = new DockerSandboxDriver();
  const engine = await driver.info();
  if (!engine.reachable) throw new StartupError(`The exec-host will not start: ${engine.message ?? 'the container engine does not answer.'}`);
  const host = await createExecHost(config, driver);
  // Longer than any client's idle keep-alive, so a client never reuses a socket the server just closed.
  const server = host.app.getHttpServer() as import('node:http').Server;
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  if (config.listen.kind === 'socket') {
    fs.rmSync(config.listen.path, { force: true });
    const previous = process.umask(0o177);
    try {
      await host.app.listen(config.listen.path);
    } finally {
      process.umask(previous);
    }
    fs.chmodSync(config.listen.path, 0o600);
    console.log(`lemniscate exec-host listening on unix:${config.listen.path}`);
  } else {
    await host.app.listen(config.listen.port, config.listen.host);
    console.log(`lemniscate exec-host listening on http://${config.listen.host}:${config.listen.port}`);
  }
  const stop = () => {
    void host.close().finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((e: unknown) => {
    const message = e instanceof StartupError || e instanceof ExecHostError ? e.message : `The exec-host failed to start: ${(e as Error).message}`;
    console.error(message);
    process.exit(1);
  });
}
