import { EventsServerMessage, TERMINAL_EVENT_TYPES, type GatewayEvent } from '@lemniscate/contracts';
import WebSocket from 'ws';
import { CliError } from '../errors';

interface FollowOptions {
  /** Replays from here after a reconnect, so nothing is missed or seen twice. */
  sinceSeq?: number;
  signal?: AbortSignal;
  /**
   * How long a lost connection is retried before giving up (default `FOLLOW_RECONNECT_MS`): long
   * enough for a gateway restart or a rolling deploy, bounded so a CI job does not hang for ever.
   */
  reconnectForMs?: number;
  onReconnect?: (attempt: number) => void;
}

const STABLE_MS = 10_000;

/** Five minutes, or `LEMNISCATE_FOLLOW_RECONNECT_SECONDS`. */
export const FOLLOW_RECONNECT_MS = 5 * 60_000;

/** The reconnect window from the environment; a value that is not a positive number is refused by name. */
export function reconnectWindowMs(env: Record<string, string | undefined>): number {
  const raw = env['LEMNISCATE_FOLLOW_RECONNECT_SECONDS'];
  if (raw === undefined || raw.trim() === '') return FOLLOW_RECONNECT_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new CliError(`LEMNISCATE_FOLLOW_RECONNECT_SECONDS must be a positive number of seconds, not "${raw}".`, 'config');
  return seconds * 1000;
}

function duration(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}` : `${Math.round(ms / 1000)} s`;
}

export function isTerminal(event: GatewayEvent, sessionId: string): boolean {
  return event.sessionId === sessionId && (TERMINAL_EVENT_TYPES as readonly string[]).includes(event.type);
}

function eventsUrl(baseUrl: string): string {
  const url = new URL(`${baseUrl}/api/v1/events`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

function streamError(baseUrl: string, code: string, message: string): CliError {
  if (code === 'unauthenticated') {
    return new CliError(`The gateway at ${baseUrl} refused the API token for live events (${message.replace(/\.$/, '')}): run \`lemni login\` or pass a valid --token.`, 'unauthenticated');
  }
  return new CliError(message, code === 'forbidden' ? 'forbidden' : code === 'not_found' ? 'not_found' : 'gateway_error');
}

type Item = { kind: 'event'; event: GatewayEvent } | { kind: 'closed'; error?: Error } | { kind: 'error'; error: Error };

/**
 * Follows one session's live events over the gateway's WebSocket until the session ends, yielding
 * each event as it arrives. A dropped connection is re-opened with `sinceSeq`, so a flaky network
 * neither loses nor repeats events.
 */
export async function* followSession(baseUrl: string, token: string | undefined, sessionId: string, options: FollowOptions = {}): AsyncGenerator<GatewayEvent> {
  let lastSeq = options.sinceSeq ?? 0;
  let failures = 0;
  let lostSince: number | undefined;
  const windowMs = options.reconnectForMs ?? FOLLOW_RECONNECT_MS;
  for (;;) {
    if (options.signal?.aborted) return;
    const queue: Item[] = [];
    let wake: (() => void) | undefined;
    const push = (item: Item) => {
      queue.push(item);
      wake?.();
    };
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    const socket = new WebSocket(eventsUrl(baseUrl), { headers });
    let opened = false;
    let openedAt = 0;
    socket.on('open', () => {
      opened = true;
      openedAt = Date.now();
      socket.send(JSON.stringify({ type: 'subscribe', sessionId, sinceSeq: lastSeq }));
    });
    socket.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      const error =
        status === 401
          ? new CliError(`The gateway at ${baseUrl} refused the API token for live events: run \`lemni login\` or pass a valid --token.`, 'unauthenticated')
          : status === 403
            ? new CliError(`The gateway at ${baseUrl} does not let you follow session ${sessionId}.`, 'forbidden')
            : new CliError(`The gateway at ${baseUrl} refused the live-event connection (HTTP ${status}).`, 'gateway_error');
      push({ kind: 'error', error });
      res.resume();
      socket.terminate();
    });
    socket.on('message', (data) => {
      let parsed;
      try {
        parsed = EventsServerMessage.safeParse(JSON.parse(String(data)));
      } catch {
        return push({ kind: 'error', error: new CliError(`The gateway at ${baseUrl} sent a live event that is not JSON.`, 'gateway_contract') });
      }
      if (!parsed.success) {
        return push({
          kind: 'error',
          error: new CliError(`The gateway at ${baseUrl} sent a live message of an unknown shape; the CLI and the gateway are probably different versions.`, 'gateway_contract'),
        });
      }
      const message = parsed.data;
      if (message.type === 'event') push({ kind: 'event', event: message.event });
      else if (message.type === 'error') push({ kind: 'error', error: streamError(baseUrl, message.code, message.message) });
    });
    socket.on('error', (error) => push({ kind: 'closed', error }));
    socket.on('close', () => push({ kind: 'closed' }));
    const onAbort = () => socket.terminate();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        const item = queue.shift();
        if (!item) continue;
        if (item.kind === 'error') throw item.error;
        if (item.kind === 'closed') break;
        failures = 0;
        // Events flow again: a later loss gets the whole window anew.
        lostSince = undefined;
        if (item.event.seq <= lastSeq) continue;
        lastSeq = item.event.seq;
        yield item.event;
        if (isTerminal(item.event, sessionId)) return;
      }
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      socket.removeAllListeners();
      socket.on('error', () => undefined);
      if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.terminate();
    }
    if (options.signal?.aborted) return;
    failures += 1;
    if (!opened && failures === 1 && lastSeq === (options.sinceSeq ?? 0)) {
      // Never connected at all: the gateway is down rather than flaky.
      throw new CliError(`Cannot reach the gateway at ${baseUrl}: is it running? (\`npm start\`)`, 'gateway_unreachable');
    }
    // A connection that held a while (a quiet session waiting for a person) also counts as recovered.
    if (opened && Date.now() - openedAt >= STABLE_MS) lostSince = undefined;
    lostSince ??= Date.now();
    if (Date.now() - lostSince >= windowMs) {
      throw new CliError(
        `Lost the live-event connection to the gateway at ${baseUrl} and could not get it back for ${duration(windowMs)}; the session may still be running. Follow it again with \`lemni session follow ${sessionId}\`, or look at it with \`lemni session show ${sessionId}\`.`,
        'gateway_unreachable',
      );
    }
    options.onReconnect?.(failures);
    const backoff = Math.min(2000, 100 * 2 ** Math.min(failures, 5));
    const left = windowMs - (Date.now() - lostSince);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(backoff, left))));
  }
}
