import { z } from 'zod';
import { Id, IsoTimestamp } from './common';

/**
 * One event on the live stream: the envelope below plus the fields of its type. Session events have
 * the shapes of `SessionEvent` (events.ts); gateway events (`policy_published`, `user_revoked`) carry
 * their own fields and a null `sessionId`.
 */
export const GatewayEvent = z.looseObject({
  seq: z.number().int().positive(),
  type: z.string(),
  sessionId: Id.nullable(),
  projectId: Id.nullable(),
  at: IsoTimestamp,
});
export type GatewayEvent = z.infer<typeof GatewayEvent>;

/**
 * Client → server on `/api/v1/events`. `sinceSeq` replays what was missed after a reconnect.
 * Exactly one of `sessionId` / `projectId` names the stream.
 */
export const EventsClientMessage = z.discriminatedUnion('type', [
  z
    .object({ type: z.literal('subscribe'), sessionId: Id.optional(), projectId: Id.optional(), sinceSeq: z.number().int().min(0).optional() })
    .strict()
    .refine((m) => (m.sessionId === undefined) !== (m.projectId === undefined), { message: 'give exactly one of "sessionId" or "projectId"', path: ['sessionId'] }),
  z.object({ type: z.literal('unsubscribe'), sessionId: Id.optional(), projectId: Id.optional() }).strict(),
]);
export type EventsClientMessage = z.infer<typeof EventsClientMessage>;

export const EventsServerMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('event'), event: GatewayEvent }),
  z.object({ type: z.literal('subscribed'), sessionId: Id.nullable(), projectId: Id.nullable(), replayed: z.number().int() }),
  z.object({ type: z.literal('error'), code: z.string(), message: z.string() }),
]);
export type EventsServerMessage = z.infer<typeof EventsServerMessage>;
