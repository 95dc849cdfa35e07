import { z } from 'zod';

/** Identifier shapes shared by every boundary. */
export const SessionId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must be 1–64 letters, digits, "-" or "_"');
export type SessionId = z.infer<typeof SessionId>;

/** Every error body on every transport: a code for machines, a sentence for people, a correlation id. */
export const ErrorBody = z.object({
  code: z.string(),
  message: z.string(),
  requestId: z.string().optional(),
  details: z.unknown().optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
