import { GATEWAY_API_PREFIX } from '@lemniscate/contracts';

/** REST routes live under this prefix (`api/v1`, from libs/contracts); probes, metrics and the API description do not. */
export const API_PREFIX = GATEWAY_API_PREFIX.slice(1);
export const UNPREFIXED = ['healthz', 'readyz', 'metrics', 'api/docs'];
