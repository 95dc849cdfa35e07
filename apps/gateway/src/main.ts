import 'reflect-metadata';
import type { Server } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule, type AppModuleOptions } from './app.module';
import { ConfigError, loadConfig, type GatewayConfig } from './config/config';
import { DatabaseError, migrate, redactUrl } from './db/database';
import { MigrationError } from './db/migrate';
import { configureApp } from './setup';
import { startTracing, TracingConfigError } from '@lemniscate/telemetry';

const USAGE = 'Usage: lemni-gateway [serve] | lemni-gateway migrate';

/** The gateway as `serve` runs it, not yet listening. */
async function createGatewayApp(config: GatewayConfig, options: Pick<AppModuleOptions, 'sessionLoops' | 'onShutdown'> = {}): Promise<INestApplication> {
  const app = await NestFactory.create(AppModule.forRoot({ config, ...options }), { bodyParser: false, bufferLogs: true });
  configureApp(app, config);
  app.enableShutdownHooks();
  // Longer than any client's idle keep-alive (undici's, the console's browser), so a client never
  // sends a request on a socket the gateway has just closed (an ECONNRESET the client cannot retry).
  const server = app.getHttpServer() as Server;
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  return app;
}

/** `options` is for test entry points (a gateway that records sessions without running loops). */
export async function serve(options: Pick<AppModuleOptions, 'sessionLoops'> = {}): Promise<INestApplication> {
  const config = loadConfig();
  // OpenTelemetry traces, when OTEL_EXPORTER_OTLP_ENDPOINT names a collector (docs/operator-guide.md).
  const tracing = startTracing('lemniscate-gateway');
  const app = await createGatewayApp(config, { ...options, onShutdown: () => tracing.shutdown() });
  await app.listen(config.port, config.host);
  const where = config.databaseUrl ? redactUrl(config.databaseUrl) : `PGlite in ${config.dataDir}`;
  process.stdout.write(`Lemniscate gateway listening on ${await app.getUrl()} (database: ${where}${tracing.enabled ? `; traces to ${tracing.url}` : ''})\n`);
  return app;
}

export async function runMigrations(): Promise<void> {
  const config = loadConfig();
  const report = await migrate(config.databaseUrl ? { url: config.databaseUrl } : { dataDir: config.dataDir });
  const applied = report.applied.length ? `applied ${report.applied.join(', ')}` : 'nothing to apply';
  process.stdout.write(`Migrations: ${applied}; the database carries ${report.total} migration(s).\n`);
}

export async function main(argv: string[]): Promise<number> {
  const [command = 'serve', ...rest] = argv;
  if (rest.length > 0 || !['serve', 'migrate'].includes(command)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  try {
    if (command === 'migrate') await runMigrations();
    else await serve();
    return 0;
  } catch (error) {
    // Known start-up failures already carry a sentence; anything else gets its message.
    const known = error instanceof ConfigError || error instanceof DatabaseError || error instanceof MigrationError || error instanceof TracingConfigError;
    process.stderr.write(`lemni-gateway: ${known ? (error as Error).message : `failed to start: ${(error as Error).stack ?? String(error)}`}\n`);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    if (code !== 0) process.exit(code);
  });
}
