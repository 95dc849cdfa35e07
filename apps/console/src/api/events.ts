import { useEffect, useRef, useState } from 'react';
import { EventsServerMessage, type EventsClientMessage, type GatewayEvent } from '@lemniscate/contracts';
import { routes } from './routes';

type StreamTarget = { sessionId: string } | { projectId: string };

function socketUrl(): string {
  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${window.location.host}${routes.events}`;
}

const keyOf = (t: StreamTarget) => ('sessionId' in t ? `s:${t.sessionId}` : `p:${t.projectId}`);

/**
 * Follows the gateway's live stream for some sessions or projects. The browser sends the session
 * cookie with the upgrade; after a dropped connection it resubscribes from the last sequence number
 * seen, so nothing is missed and nothing is shown twice.
 */
export function useLiveEvents(
  targets: StreamTarget[],
  onEvent: (event: GatewayEvent) => void,
  /** Replay everything recorded so far (a session page), or only what happens from now on (lists). */
  { replay = false, onSubscribed }: { replay?: boolean; onSubscribed?: () => void } = {},
): { connected: boolean; error: string | null } {
  const [connected, setConnected] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const subscribedHandler = useRef(onSubscribed);
  subscribedHandler.current = onSubscribed;
  const key = targets.map(keyOf).sort().join(',');

  useEffect(() => {
    if (targets.length === 0) return;
    const lastSeq = new Map<string, number>();
    let socket: WebSocket | null = null;
    let closed = false;
    let attempt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;

    const connect = () => {
      socket = new WebSocket(socketUrl());
      // Events of a socket this effect has let go of (targets changed, page left) are ignored: its
      // late close must not mark the newer connection as down.
      socket.onopen = () => {
        if (closed) return;
        attempt = 0;
        setConnected(true);
        setError(null);
        for (const t of targets) {
          const since = lastSeq.get(keyOf(t)) ?? (replay ? 0 : undefined);
          const msg: EventsClientMessage = { type: 'subscribe', ...t, ...(since !== undefined ? { sinceSeq: since } : {}) };
          socket?.send(JSON.stringify(msg));
        }
      };
      socket.onmessage = (m) => {
        if (closed) return;
        let raw: unknown;
        try {
          raw = JSON.parse(String(m.data));
        } catch {
          return;
        }
        const parsed = EventsServerMessage.safeParse(raw);
        if (!parsed.success) return;
        const msg = parsed.data;
        if (msg.type === 'error') setError(msg.message);
        // A list fetched before the subscription took effect may have missed what happened in
        // between (an approval requested meanwhile): it is read again once the stream is live.
        if (msg.type === 'subscribed') subscribedHandler.current?.();
        if (msg.type !== 'event') return;
        const e = msg.event;
        const k = e.sessionId && targets.some((t) => 'sessionId' in t && t.sessionId === e.sessionId) ? `s:${e.sessionId}` : `p:${e.projectId ?? ''}`;
        if ((lastSeq.get(k) ?? 0) >= e.seq) return;
        lastSeq.set(k, e.seq);
        handler.current(e);
      };
      socket.onclose = (ev) => {
        if (closed) return;
        setConnected(false);
        // 4401: the gateway does not accept these credentials; retrying cannot help.
        if (ev.code === 4401) return;
        // Back off up to 15 s so a restarting gateway is not hammered by every open console.
        const delay = Math.min(15_000, 500 * 2 ** attempt++);
        timer = setTimeout(connect, delay);
      };
    };
    connect();
    return () => {
      closed = true;
      if (timer) clearTimeout(timer);
      socket?.close();
      setConnected(false);
    };
    // `key` stands for the targets' identity; the array itself is a new object on every render.
  }, [key, replay]);

  return { connected, error };
}
