import { Inject, Injectable } from '@nestjs/common';
import { GATEWAY_CONFIG, GatewayConfig } from '../config/config';
import { AppError, ErrorCode } from '../common/errors';

export interface ExecHostHealth {
  ok: boolean;
  message?: string;
}

/**
 * The gateway's side of the exec-host control channel: a bearer token on every call, a timeout on
 * every call, and failures turned into coded errors with a sentence.
 */
@Injectable()
export class ExecHostClient {
  private readonly timeoutMs = 5000;

  constructor(@Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig) {}

  /** Destroying a sandbox that is already gone is success: the goal is that it no longer exists. */
  async destroy(sandboxId: string): Promise<void> {
    const res = await this.call('DELETE', `/v1/sandboxes/${encodeURIComponent(sandboxId)}`);
    if (res.ok || res.status === 404) return;
    throw new AppError(ErrorCode.ExecHostUnavailable, `The exec-host refused to destroy sandbox ${sandboxId} (HTTP ${res.status}).`);
  }

  async health(): Promise<ExecHostHealth> {
    try {
      const res = await this.call('GET', '/healthz');
      return res.ok ? { ok: true } : { ok: false, message: `The exec-host answered HTTP ${res.status}.` };
    } catch (e) {
      return { ok: false, message: e instanceof AppError ? e.message : 'The exec-host did not answer.' };
    }
  }

  private async call(method: string, path: string): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.config.execHost.token) headers.authorization = `Bearer ${this.config.execHost.token}`;
    try {
      return await fetch(`${this.config.execHost.url}${path}`, { method, headers, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (e) {
      const why = (e as Error).name === 'TimeoutError' ? `did not answer within ${this.timeoutMs / 1000} s` : 'could not be reached';
      throw new AppError(ErrorCode.ExecHostUnavailable, `The exec-host at ${this.config.execHost.url} ${why}.`);
    }
  }
}
