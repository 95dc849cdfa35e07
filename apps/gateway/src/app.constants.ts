/** REST routes live under this prefix; probes, metrics and the API description do not. */
export const API_PREFIX = 'api/v1';
export const UNPREFIXED = ['healthz', 'readyz', 'metrics', 'api/docs'];
