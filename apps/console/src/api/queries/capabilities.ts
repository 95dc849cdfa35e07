import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { ApiClient } from '../client';

const OpenApiPaths = z.object({ paths: z.record(z.string(), z.record(z.string(), z.unknown())) });
const docs = new ApiClient('/api');

interface Capabilities {
  /** `offers('post', '/api/v1/projects/{projectId}/policy/dry-run')`, in the OpenAPI path syntax. */
  offers: (method: string, path: string) => boolean;
}

/**
 * What this gateway offers, read from its OpenAPI document, so features a gateway version lacks
 * (a policy dry run, say) are not offered rather than failing when used.
 */
export const capabilitiesQuery = () =>
  queryOptions({
    queryKey: ['capabilities'],
    queryFn: async ({ signal }): Promise<Capabilities> => {
      const doc = await docs.json(OpenApiPaths, '/docs', { signal });
      return { offers: (method, path) => Object.keys(doc.paths[path] ?? {}).includes(method.toLowerCase()) };
    },
    staleTime: Infinity,
    retry: false,
  });
