import { z } from 'zod';

/** Every identifier that travels in a URL: short, no path separators, no dots. */
export const Id = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must be 1–64 letters, digits, "-" or "_"');
export type Id = z.infer<typeof Id>;

export const IdParams = z.object({ id: Id }).strict();
export type IdParams = z.infer<typeof IdParams>;

export const UserRole = z.enum(['admin', 'developer', 'security_officer']);
export type UserRole = z.infer<typeof UserRole>;

/** Timestamps cross every boundary as ISO-8601 strings. */
export const IsoTimestamp = z.iso.datetime({ offset: true });

export const OkResponse = z.object({ ok: z.literal(true) });
export type OkResponse = z.infer<typeof OkResponse>;
