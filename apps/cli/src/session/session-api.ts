import type { GatewayEvent, SessionView } from '@lemniscate/contracts';
import { followSession } from '../gateway/event-stream';
import type { GatewayClient, StartSessionRequest } from '../gateway/gateway-client';

/**
 * What running a session needs from the gateway. Headless and interactive runs depend on this port
 * only, so they can be exercised against any implementation of it.
 */
export interface SessionRunApi {
  startSession(request: StartSessionRequest): Promise<SessionView>;
  follow(sessionId: string, options: { signal?: AbortSignal; sinceSeq?: number }): AsyncIterable<GatewayEvent>;
  getSession(id: string): Promise<SessionView>;
  stopSession(id: string, reason?: string): Promise<unknown>;
  answerApproval(id: string, answer: 'approve' | 'reject', body: { rememberCommand?: boolean; reason?: string; response?: string }): Promise<unknown>;
  startSubagent(parentSessionId: string, agent: string, instruction: string): Promise<SessionView>;
}

export function gatewaySessionApi(client: GatewayClient, onReconnect?: (attempt: number) => void, reconnectForMs?: number): SessionRunApi {
  return {
    startSession: (r) => client.startSession(r),
    follow: (id, o) => followSession(client.baseUrl, client.bearer, id, { ...o, ...(onReconnect ? { onReconnect } : {}), ...(reconnectForMs !== undefined ? { reconnectForMs } : {}) }),
    getSession: (id) => client.getSession(id),
    stopSession: (id, reason) => client.stopSession(id, reason),
    answerApproval: (id, answer, body) => client.answerApproval(id, answer, body),
    startSubagent: (p, a, i) => client.startSubagent(p, a, i),
  };
}
