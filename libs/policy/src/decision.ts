import type { Effect } from './schema';

export interface ThirdPartyFile {
  path: string;
  class: string;
}

/** P8: what the engine decided, the rule that produced it, and why, in words a person reads. */
export interface Decision {
  effect: Effect;
  rule: string;
  reason: string;
  thirdParty?: ThirdPartyFile[];
  /**
   * True only on a command that asks and that the person may approve together with its identical
   * repeats in the session (P3, `commands.reapproval: exempt`); absent, each one is approved.
   */
  reapprovalExempt?: boolean;
  /** On a command allowed by an earlier "approve identical" answer: that approval's id. */
  approvalId?: string;
}

const SEVERITY: Record<Effect, number> = { allow: 0, ask: 1, deny: 2 };

/** Any deny wins; otherwise any ask; otherwise allow. Reasons of the winning effect are kept. */
export function combine(findings: Decision[]): Decision | null {
  let worst: Effect | null = null;
  for (const f of findings) if (worst === null || SEVERITY[f.effect] > SEVERITY[worst]) worst = f.effect;
  if (worst === null) return null;
  // A flagged third-party change leads: its dedicated approval is what the person must see first.
  const winners = findings.filter((f) => f.effect === worst).sort((a, b) => Number(!!b.thirdParty) - Number(!!a.thirdParty));
  const first = winners[0] as Decision;
  const reasons = [...new Set(winners.map((w) => w.reason))];
  const thirdParty = winners.flatMap((w) => w.thirdParty ?? []);
  const reason = reasons.length === 1 ? first.reason : worst === 'allow' ? reasons.join(' ') : `${reasons.slice(0, 3).join(' ')}${reasons.length > 3 ? ` (${reasons.length - 3} more.)` : ''}`;
  return { effect: worst, rule: first.rule, reason, ...(thirdParty.length > 0 ? { thirdParty } : {}) };
}
