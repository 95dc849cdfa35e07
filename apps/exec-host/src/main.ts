import 'reflect-metadata';
import * as fs from 'node:fs';
import type { Server } from 'node:http';
import { createExecHost, type ExecHost } from './app';
import { isLoopback, loadConfig } from './config';
import { CgroupError } from './driver/cgroups';
import { DockerSandboxDriver } from './driver/docker.driver';
import { ExecHostError, StartupError } from './errors';
import { Registration } from './pool/registration';
import { startTracing, TracingConfigError, type Tracing } from '@lemniscate/telemetry';

interface RunningExecHost {
  host: ExecHost;
  /** `http://127.0.0.1:PORT`, `https://ADDRESS:PORT` (mutual TLS) or `unix:/path/to.sock`. */
  address: string;
  /** The heartbeats to a pool gateway (LEMNISCATE_GATEWAY_URL), null without one. */
  registration: Registration | null;
  close(): Promise<void>;
}

type Log = { log(message: string): void; warn(message: string): void };

/** Starts the exec-host from environment variables and listens where they say. */
export async function start(env: NodeJS.ProcessEnv = process.env, options: { logger?: false; log?: Log } = {}): Promise<RunningExecHost> {
  const config = loadConfig(env);
  const driver = cgroupChecked(() => new DockerSandboxDriver({ cgroupLayout: config.cgroupLayout, runner: config.commandRunner }));
  const engine = await driver.info();
  if (!engine.reachable) throw new StartupError(`The exec-host will not start: ${engine.message ?? 'the container engine does not answer.'}`);
  const host = await createExecHost(config, driver, { ...(options.logger === false ? { logger: false as const } : {}) });
  // Longer than any client's idle keep-alive, so a client never reuses a socket the server just closed.
  const server = host.app.getHttpServer() as Server;
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  let address: string;
  if (config.listen.kind === 'socket') {
    fs.rmSync(config.listen.path, { force: true });
    // The socket is created 600 from the start: no window in which another user could connect.
    const previous = process.umask(0o177);
    try {
      await host.app.listen(config.listen.path);
    } finally {
      process.umask(previous);
    }
    fs.chmodSync(config.listen.path, 0o600);
    address = `unix:${config.listen.path}`;
  } else {
    await host.app.listen(config.listen.port, config.listen.host);
    const port = (server.address() as { port: number }).port;
    address = `${config.tls ? 'https' : 'http'}://${config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host}:${port}`;
  }
  const log: Log = options.log ?? { log: (m) => console.log(`lemniscate exec-host: ${m}`), warn: (m) => console.error(`lemniscate exec-host: ${m}`) };
  if (config.registration && /^http:/.test(config.registration.gatewayUrl) && !isLoopbackUrl(config.registration.gatewayUrl)) {
    log.warn(`LEMNISCATE_GATEWAY_URL (${config.registration.gatewayUrl}) is plain http:// to another machine: the heartbeat carries LEMNISCATE_EXEC_HOST_TOKEN unencrypted; use https://.`);
  }
  const registration = config.registration
    ? new Registration(
        config,
        config.registration,
        {
          driver,
          load: () => host.sandboxes.ids().length,
          environments: () => host.environments.readyProjects(),
          ...(config.warmPool.size > 0 ? { warm: () => (({ ready, target }) => ({ ready, target }))(host.sandboxes.poolStats()) } : {}),
        },
        log,
      )
    : null;
  registration?.start();
  return {
    host,
    address,
    registration,
    close: async () => {
      await registration?.close();
      await host.close();
    },
  };
}

/** A forced cgroup layout the host does not have stops the start, with the driver's sentence. */
function cgroupChecked(make: () => DockerSandboxDriver): DockerSandboxDriver {
  try {
    return make();
  } catch (e) {
    if (e instanceof CgroupError) throw new StartupError(`The exec-host will not start: ${e.message}`);
    throw e;
  }
}

function isLoopbackUrl(url: string): boolean {
  try {
    return isLoopback(new URL(url).hostname);
  } catch {
    return false;
  }
}

export async function main(): Promise<void> {
  // One sandbox's failure must not take every other session's sandbox down with the process: a stray
  // rejection is logged loudly, and the reaper and lost-sandbox checks deal with what it left.
  process.on('unhandledRejection', (reason) => {
    console.error(`lemniscate exec-host: an operation failed without a handler: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
  });
  // OpenTelemetry traces, when OTEL_EXPORTER_OTLP_ENDPOINT names a collector (docs/operator-guide.md).
  let tracing: Tracing;
  try {
    tracing = startTracing('lemniscate-exec-host');
  } catch (e) {
    if (e instanceof TracingConfigError) throw new StartupError(`The exec-host will not start: ${e.message}`);
    throw e;
  }
  const running = await start(process.env);
  console.log(`lemniscate exec-host listening on ${running.address}${tracing.enabled ? `; traces to ${tracing.url}` : ''}`);
  const stop = () => {
    void running
      .close()
      .then(() => tracing.shutdown())
      .finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

export function startupMessage(e: unknown): string {
  return e instanceof StartupError || e instanceof ExecHostError ? e.message : `The exec-host failed to start: ${(e as Error)?.message ?? String(e)}`;
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(startupMessage(e));
    process.exit(1);
  });
}
