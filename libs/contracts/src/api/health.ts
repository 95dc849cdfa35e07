import { z } from 'zod';

export const GatewayHealth = z.object({ status: z.literal('ok') });
export type GatewayHealth = z.infer<typeof GatewayHealth>;

export const GatewayReadinessCheck = z.object({ ok: z.boolean(), message: z.string().optional() });
export const GatewayReadiness = z.object({
  status: z.enum(['ready', 'not_ready']),
  checks: z.object({ database: GatewayReadinessCheck, execHost: GatewayReadinessCheck }),
});
export type GatewayReadiness = z.infer<typeof GatewayReadiness>;
