import { z } from 'zod';
import { Id, UserRole } from './common';

export const CreateUserRequest = z
  .object({
    email: z.email().max(254),
    displayName: z.string().trim().min(1, 'must not be empty').max(200),
    role: UserRole,
    password: z.string().min(12, 'must be at least 12 characters').max(1024),
    projectIds: z.array(Id).max(1000).default([]),
  })
  .strict();
export type CreateUserRequest = z.infer<typeof CreateUserRequest>;

/** An administrator changes a person's role or the name shown for them; at least one of the two. */
export const UpdateUserRequest = z
  .object({
    role: UserRole.optional(),
    displayName: z.string().trim().min(1, 'must not be empty').max(200).optional(),
  })
  .strict()
  .refine((u) => u.role !== undefined || u.displayName !== undefined, { message: 'give "role", "displayName" or both' });
export type UpdateUserRequest = z.infer<typeof UpdateUserRequest>;

export const AddMemberRequest = z.object({ userId: Id }).strict();
export type AddMemberRequest = z.infer<typeof AddMemberRequest>;

export const RevokeUserResponse = z.object({
  userId: Id,
  tokensRevoked: z.number().int(),
  webSessionsRevoked: z.number().int(),
  sessionsRevoked: z.array(Id),
});
export type RevokeUserResponse = z.infer<typeof RevokeUserResponse>;
