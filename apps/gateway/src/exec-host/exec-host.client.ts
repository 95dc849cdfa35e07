import { Inject, Injectable } from '@nestjs/common';
import { DestroySandboxResponse, ExecHostHealth as ExecHostHealthBody, ExecHostRoutes } from '@lemniscate/contracts';
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
    const res = await this.call('DELETE', ExecHostRoutes.sandbox(sandboxId));
    if (res.status === 404) return;
    if (res.ok) {
      const body = DestroySandboxResponse.safeParse(await res.json().catch(() => undefined));
      if (body.success) return;
      throw new AppError(ErrorCode.ExecHostUnavailable, `The exec-host answered the destruction of sandbox ${sandboxId} with a body the gateway does not understand.`);
    }
    throw new AppError(ErrorCode.ExecHostUnavailable, `The exec-host refused to destroy sandbox ${sandboxId} (HTTP ${res.status}).`);
  }

  /**
   * For the endings (stop, revocation, orphan): destroys the session's sandbox if it has one, and on
   * failure says, in a sentence for the record, that the exec-host's reaper will remove it instead.
   */
  async destroyOrLeaveToReaper(sandboxId: string | null): Promise<{ sandboxDestroyed: boolean; sandboxNote: string | null }> {
    if (!sandboxId) return { sandboxDestroyed: false, sandboxNote: null };
    try {
      await this.destroy(sandboxId);
      return { sandboxDestroyed: true, sandboxNote: null };
    } catch (error) {
      return { sandboxDestroyed: false, sandboxNote: `${(error as Error).message} The exec-host's reaper removes it by its session label.` };
    }
  }

  async health(): Promise<ExecHostHealth> {
    try {
      const res = await this.call('GET', ExecHostRoutes.health());
      if (!res.ok) return { ok: false, message: res.status === 401 ? 'The exec-host refused the gateway token.' : `The exec-host answered HTTP ${res.status}.` };
      const body = ExecHostHealthBody.safeParse(await res.json().catch(() => undefined));
      if (!body.success) return { ok: false, message: 'The exec-host answered its health check with a body the gateway does not understand.' };
      if (!body.data.engine.reachable) return { ok: false, message: `The exec-host cannot reach its container engine${body.data.engine.message ? `: ${body.data.engine.message}` : '.'}` };
      return body.data.status === 'ok' ? { ok: true } : { ok: true, message: 'The exec-host runs degraded (see its /v1/health).' };
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
