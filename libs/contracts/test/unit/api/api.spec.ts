import { CreateSessionRequest, EventsClientMessage, Id, PublishPolicyRequest, AuditVerifyQuery, ChangePasswordRequest } from '../../../src/api';

describe('API contracts', () => {
  it('ids never look like paths', () => {
    for (const bad of ['', '../x', 'a/b', '.hidden', 'x'.repeat(65)]) expect(Id.safeParse(bad).success).toBe(false);
    expect(Id.safeParse('0b5c1e4a-1f2d-4c3b-9a8e-7d6c5b4a3f21').success).toBe(true);
  });

  it('a policy is published as a document or as text, not both, not neither', () => {
    expect(PublishPolicyRequest.safeParse({ document: { version: 1 } }).success).toBe(true);
    expect(PublishPolicyRequest.safeParse({ sourceText: 'version: 1' }).success).toBe(true);
    expect(PublishPolicyRequest.safeParse({}).success).toBe(false);
    expect(PublishPolicyRequest.safeParse({ document: {}, sourceText: 'version: 1' }).success).toBe(false);
  });

  it('a subscription names exactly one stream', () => {
    expect(EventsClientMessage.safeParse({ type: 'subscribe', sessionId: 's1', sinceSeq: 4 }).success).toBe(true);
    expect(EventsClientMessage.safeParse({ type: 'subscribe', sessionId: 's1', projectId: 'p1' }).success).toBe(false);
    expect(EventsClientMessage.safeParse({ type: 'subscribe', sinceSeq: -1, projectId: 'p1' }).success).toBe(false);
  });

  it('a session instruction is not empty and has safe defaults', () => {
    const parsed = CreateSessionRequest.parse({ projectId: 'p1', instruction: 'fix it' });
    expect(parsed).toMatchObject({ mode: 'interactive', includedUncommitted: false });
    expect(CreateSessionRequest.safeParse({ projectId: 'p1', instruction: '   ' }).success).toBe(false);
  });

  it('an audit anchor comes whole, and a new password differs from the old one', () => {
    expect(AuditVerifyQuery.safeParse({ anchorSeq: '3' }).success).toBe(false);
    expect(AuditVerifyQuery.safeParse({ anchorSeq: '3', anchorHash: 'a'.repeat(64) }).success).toBe(true);
    expect(ChangePasswordRequest.safeParse({ currentPassword: 'same password!', newPassword: 'same password!' }).success).toBe(false);
  });
});
