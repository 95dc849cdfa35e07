import { ExecHostHeartbeat, ExecHostHeartbeatResponse, GatewayRoutes, SandboxRuntime } from '@lemniscate/contracts';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as path from 'node:path';
import type { ExecHostConfig, ExecHostRegistration } from '../config';
import { runtimeFamily, type SandboxDriver } from '../driver/sandbox.driver';

/** A heartbeat never waits longer than this for the gateway's answer. */
export const HEARTBEAT_TIMEOUT_MS = 10_000;

/** The exec-host's version, from its package.json (beside src and dist alike). */
export function execHostVersion(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' && pkg.version ? pkg.version.slice(0, 64) : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** What a heartbeat reports, read fresh each time. */
export interface HeartbeatSources {
  driver: Pick<SandboxDriver, 'info' | 'imagePresent'>;
  /** Live sandboxes. */
  load(): number;
  /** Projects whose environment is ready here. */
  environments(): Promise<string[]>;
  /** The warm pool: ready and wanted (absent: no pool to report). */
  warm?(): { ready: number; target: number };
}

/**
 * The heartbeat body, or a sentence saying why none can be sent (an engine that does not answer has
 * no runtime: the gateway then hears nothing and, after a while, declares the host lost).
 */
export async function heartbeatBody(config: Pick<ExecHostConfig, 'image' | 'maxSandboxes'>, registration: ExecHostRegistration, sources: HeartbeatSources): Promise<ExecHostHeartbeat | string> {
  const engine = await sources.driver.info();
  if (!engine.reachable) return `the container engine does not answer${engine.message ? ` (${engine.message})` : ''}`;
  const runtimes = [...new Set(engine.runtimes.map(runtimeFamily))].filter((r) => SandboxRuntime.safeParse(r).success && engine.runtimes.includes(r)).sort();
  if (runtimes.length === 0) return 'the container engine has neither runc nor runsc registered';
  const images = (await sources.driver.imagePresent(config.image).catch(() => false)) ? [config.image] : [];
  const body: ExecHostHeartbeat = {
    id: registration.id,
    address: registration.address,
    runtimes: runtimes as ExecHostHeartbeat['runtimes'],
    images,
    environments: (await sources.environments()).slice(0, 10_000),
    capacity: config.maxSandboxes,
    load: sources.load(),
    ...(sources.warm ? { warm: sources.warm() } : {}),
    version: execHostVersion(),
  };
  return ExecHostHeartbeat.parse(body);
}

export interface GatewayAnswer {
  status: number;
  text: string;
}

/** POSTs JSON to the gateway with node:http(s) (a CA of its own for https), bounded by `timeoutMs` and `signal`. */
export function postJson(url: string, body: unknown, options: { token: string; ca: string | null; timeoutMs: number; signal?: AbortSignal }): Promise<GatewayAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const payload = Buffer.from(JSON.stringify(body));
    const requestOptions: https.RequestOptions = {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': payload.length, accept: 'application/json', authorization: `Bearer ${options.token}` },
      timeout: options.timeoutMs,
      signal: options.signal,
      ...(target.protocol === 'https:' && options.ca ? { ca: options.ca } : {}),
    };
    const req = (target.protocol === 'https:' ? https : http).request(target, requestOptions, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        if (text.length < 64 * 1024) text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    const deadline = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${Math.round(options.timeoutMs / 1000)} s`), { code: 'ETIMEDOUT' })), options.timeoutMs);
    req.on('close', () => clearTimeout(deadline));
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${Math.round(options.timeoutMs / 1000)} s`), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    req.end(payload);
  });
}

function messageOf(text: string): string | null {
  try {
    const m = (JSON.parse(text) as { message?: unknown }).message;
    return typeof m === 'string' && m ? m.slice(0, 500) : null;
  } catch {
    return null;
  }
}

/**
 * Registers the exec-host with a pool gateway and keeps it registered: a heartbeat at once, then one
 * every period. A refusal or an unreachable gateway is logged once per change of state, as a sentence,
 * and the heartbeats go on (the gateway may be restarted or reconfigured).
 */
export class Registration {
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private readonly abort = new AbortController();
  private lastState: string | null = null;
  private closed = false;
  /** The gateway's last answer, for tests and the start-up line. */
  last: ExecHostHeartbeatResponse | null = null;

  constructor(
    private readonly config: Pick<ExecHostConfig, 'image' | 'maxSandboxes' | 'token'>,
    private readonly registration: ExecHostRegistration,
    private readonly sources: HeartbeatSources,
    private readonly log: { log(message: string): void; warn(message: string): void },
    private readonly timeoutMs = HEARTBEAT_TIMEOUT_MS,
  ) {}

  get url(): string {
    return `${this.registration.gatewayUrl}${GatewayRoutes.execHostHeartbeat.path}`;
  }

  start(): void {
    if (this.closed || this.inFlight || this.timer) return;
    this.tick();
  }

  /** Stops the heartbeats; an answer awaited is abandoned. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.abort.abort();
    await this.inFlight;
  }

  private tick(): void {
    this.timer = null;
    this.inFlight = this.beat().finally(() => {
      this.inFlight = null;
      if (!this.closed) {
        this.timer = setTimeout(() => this.tick(), this.registration.heartbeatMs);
        this.timer.unref();
      }
    });
  }

  /** One heartbeat; never throws. */
  async beat(): Promise<void> {
    const gateway = this.registration.gatewayUrl;
    const every = `retrying every ${this.registration.heartbeatMs / 1000} s`;
    let body: ExecHostHeartbeat | string;
    try {
      body = await heartbeatBody(this.config, this.registration, this.sources);
    } catch (e) {
      body = `its state could not be read (${(e as Error).message})`;
    }
    if (typeof body === 'string') return this.state('unready', 'warn', `The exec-host ${this.registration.id} sends no heartbeat to ${gateway}: ${body}; ${every}.`);
    let answer: GatewayAnswer;
    try {
      answer = await postJson(this.url, body, { token: this.config.token, ca: this.registration.gatewayCa, timeoutMs: this.timeoutMs, signal: this.abort.signal });
    } catch (e) {
      if (this.closed) return;
      const err = e as NodeJS.ErrnoException;
      const tlsCode = typeof err.code === 'string' && /CERT|SELF_SIGNED|ALTNAME|SSL|TLS/.test(err.code);
      const why = tlsCode
        ? `its certificate was not trusted (${err.code}: ${err.message}); set LEMNISCATE_GATEWAY_CA to the CA that signed it`
        : `it could not be reached (${err.code ?? err.message})`;
      return this.state(`unreachable:${tlsCode ? 'tls' : 'net'}`, 'warn', `The exec-host ${this.registration.id} cannot register with the gateway at ${gateway}: ${why}; ${every}.`);
    }
    const said = messageOf(answer.text);
    const detail = said ? `: ${said}` : '';
    switch (answer.status) {
      case 200:
      case 201: {
        const parsed = ExecHostHeartbeatResponse.safeParse(
          (() => {
            try {
              return JSON.parse(answer.text);
            } catch {
              return undefined;
            }
          })(),
        );
        if (!parsed.success)
          return this.state('invalid', 'warn', `The gateway at ${gateway} answered the heartbeat of ${this.registration.id} with a body the exec-host does not understand; ${every}.`);
        this.last = parsed.data;
        return this.state(
          `ok:${parsed.data.state}`,
          'log',
          `The exec-host ${this.registration.id} is registered with the gateway at ${gateway} as ${this.registration.address} (${parsed.data.state}; a heartbeat every ${this.registration.heartbeatMs / 1000} s).`,
        );
      }
      case 401:
        return this.state('401', 'warn', `The gateway at ${gateway} refused the token of exec-host ${this.registration.id} (HTTP 401): LEMNISCATE_EXEC_HOST_TOKEN must be the gateway's; ${every}.`);
      case 403:
        return this.state('403', 'warn', `The gateway at ${gateway} refused to register exec-host ${this.registration.id} at ${this.registration.address} (HTTP 403)${detail}; ${every}.`);
      case 409:
        return this.state(
          '409',
          'warn',
          `The gateway at ${gateway} takes no registrations (HTTP 409${detail}): it has a fixed exec-host; set LEMNISCATE_EXEC_HOST_POOL=true on it, or unset LEMNISCATE_GATEWAY_URL here; ${every}.`,
        );
      default:
        return this.state(`http:${answer.status}`, 'warn', `The gateway at ${gateway} answered the heartbeat of ${this.registration.id} with HTTP ${answer.status}${detail}; ${every}.`);
    }
  }

  private state(key: string, level: 'log' | 'warn', message: string): void {
    if (key === this.lastState) return;
    this.lastState = key;
    this.log[level](message);
  }
}
