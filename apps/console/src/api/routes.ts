import { GatewayRoutes as R } from '@lemniscate/contracts';
import { routePath } from './client';

/**
 * The gateway paths the console names outside `api.call` (downloads, links, the event stream),
 * relative to /api/v1, taken from libs/contracts' GatewayRoutes so a route renamed on the server is
 * renamed here too. Requests go through `api.call(GatewayRoutes.x, …)`, which takes method and path
 * from the same table.
 */
export const routes = {
  auditExport: routePath(R.auditExport),
  events: '/api/v1/events',
} as const;
