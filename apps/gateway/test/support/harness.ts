import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { AppModule } from '../../src/app.module';
import { loadConfig, type GatewayConfig } from '../../src/config/config';
import type { Database } from '../../src/db/database';
import { configureApp } from '../../src/setup';

// These tests exercise the HTTP layer over a real database; the session loop (model, exec-host,
// Docker) is exercised end to end in test/e2e. Sessions are recorded, no loop starts, unless a test
// asks for `sessionLoops: 'run'` (with the exec-host double and the scripted model).

export const ADMIN_EMAIL = 'admin@example.test';
export const ADMIN_PASSWORD = 'correct horse battery staple';
export const PASSWORD = 'a long enough password';

export interface Gateway {
  app: INestApplication;
  config: GatewayConfig;
  baseUrl: string;
  /** What the first start printed (generated credentials). */
  printed: string[];
  http: () => ReturnType<typeof request>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** `run` starts each session's loop (a model and an exec-host double are then needed); `record` by default. */
  sessionLoops?: 'run' | 'record';
  /** How often the gateway asks about a preparation of a project's environment. */
  environmentPollMs?: number;
  /** The port to listen on (a callback URL registered beforehand needs it); any free one by default. */
  port?: number;
  /** Audit sinks' lease and pauses (`AUDIT_SINK_TIMING`). */
  auditSinkTiming?: import('../../src/audit-sinks/audit-sinks.service').SinkTiming;
}

/** A real gateway on a loopback port, over the given database, exactly as main.ts configures it. */
/** The secret key of every test gateway that is given none (so none writes a key file into the home directory). */
export const TEST_SECRET_KEY = randomBytes(32).toString('base64');

export async function startGateway(database: Database, env: Record<string, string> = {}, logStream?: { write(line: string): void }, options: GatewayOptions = {}): Promise<Gateway> {
  const config = loadConfig({
    LEMNISCATE_ADMIN_EMAIL: ADMIN_EMAIL,
    LEMNISCATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    LEMNISCATE_LOG_LEVEL: 'silent',
    LEMNISCATE_EXEC_HOST_URL: 'http://127.0.0.1:9',
    ...(env.LEMNISCATE_SECRET_KEY_FILE === undefined ? { LEMNISCATE_SECRET_KEY: TEST_SECRET_KEY } : {}),
    ...env,
  });
  const printed: string[] = [];
  const moduleRef = await Test.createTestingModule({
    imports: [
      AppModule.forRoot({
        config,
        database,
        credentialsOutput: (t) => printed.push(t),
        logStream,
        sessionLoops: options.sessionLoops ?? 'record',
        environmentPollMs: options.environmentPollMs,
        auditSinkTiming: options.auditSinkTiming,
      }),
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ bodyParser: false, bufferLogs: true });
  configureApp(app, config);
  await app.listen(options.port ?? 0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;
  return { app, config, baseUrl, printed, http: () => request(app.getHttpServer()), close: () => app.close() };
}

export interface Session {
  cookie: string;
  csrf: string;
  userId: string;
}

export async function login(gw: Gateway, email: string, password: string): Promise<Session> {
  const res = await gw.http().post('/api/v1/auth/login').send({ email, password });
  if (res.status !== 200) throw new Error(`login ${email} failed: ${res.status} ${JSON.stringify(res.body)}`);
  const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
  const cookie = (setCookie[0] ?? '').split(';')[0] ?? '';
  return { cookie, csrf: res.body.csrfToken as string, userId: res.body.user.id as string };
}

export async function tokenFor(gw: Gateway, email: string, password: string): Promise<{ token: string; userId: string }> {
  const s = await login(gw, email, password);
  const res = await gw.http().post('/api/v1/auth/tokens').set('cookie', s.cookie).set('x-csrf-token', s.csrf).send({ name: 'tests' });
  if (res.status !== 201) throw new Error(`token for ${email} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { token: res.body.token as string, userId: s.userId };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export async function auditKinds(gw: Gateway, kinds: string[]): Promise<{ kind: string; actor: string; payload: unknown; projectId: string | null; sessionId: string | null }[]> {
  const { AuditService } = await import('../../src/audit/audit.service');
  return gw.app.get(AuditService).list({ kinds }, { order: 'asc', limit: 1000 });
}

/** Creates a user through the API as the given administrator, and returns a token for them. */
export async function createUser(gw: Gateway, adminToken: string, email: string, role: 'admin' | 'developer' | 'security_officer', projectIds: string[]): Promise<{ token: string; userId: string }> {
  const res = await gw
    .http()
    .post('/api/v1/users')
    .set(bearer(adminToken))
    .send({ email, displayName: email.split('@')[0], role, password: PASSWORD, projectIds });
  if (res.status !== 201) throw new Error(`create user ${email} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return tokenFor(gw, email, PASSWORD);
}

export async function createProject(gw: Gateway, adminToken: string, name: string): Promise<string> {
  const res = await gw
    .http()
    .post('/api/v1/projects')
    .set(bearer(adminToken))
    .send({ name, repositorySource: `/srv/git/${name}.git` });
  if (res.status !== 201) throw new Error(`create project ${name} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}
