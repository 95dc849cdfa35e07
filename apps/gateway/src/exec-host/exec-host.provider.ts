import type { Provider } from '@nestjs/common';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { EXEC_HOST, type ExecHostPort } from './exec-host.port';
import { HttpExecHost } from './http-exec-host';

/** The gateway's one exec-host client, injected as `@Inject(EXEC_HOST) execHost: ExecHostPort`. */
export const execHostProvider: Provider = {
  provide: EXEC_HOST,
  useFactory: (config: GatewayConfig): ExecHostPort =>
    new HttpExecHost({ url: config.execHost.url, token: config.execHost.token, tls: config.execHost.url.startsWith('https:') ? config.execHost.tls : null }),
  inject: [GATEWAY_CONFIG],
};
