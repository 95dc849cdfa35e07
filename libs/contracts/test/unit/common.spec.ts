import { SessionId } from '../../src/common';

describe('SessionId', () => {
  it('accepts ordinary ids and refuses path-like ones', () => {
    expect(SessionId.safeParse('ses_01HZX').success).toBe(true);
    expect(SessionId.safeParse('../etc').success).toBe(false);
    expect(SessionId.safeParse('').success).toBe(false);
  });
});
