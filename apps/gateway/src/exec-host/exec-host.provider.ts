import type { Provider } from '@nestjs/common';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ExecHostClients } from './exec-host-clients';
import { ExecHostPool } from './exec-host-pool';
import { EXEC_HOST, type ExecHostPort } from './exec-host.port';

/**
 * The gateway's one exec-host port, injected as `@Inject(EXEC_HOST) execHost: ExecHostPort`: the pool
 * when LEMNISCATE_EXEC_HOST_POOL=true, else the client of the one exec-host LEMNISCATE_EXEC_HOST_URL names.
 */
export const execHostProvider: Provider = {
  provide: EXEC_HOST,
  useFactory: (config: GatewayConfig, clients: ExecHostClients, pool: ExecHostPool): ExecHostPort => (config.execHost.pool ? pool : clients.for(config.execHost.url)),
  inject: [GATEWAY_CONFIG, ExecHostClients, ExecHostPool],
};
