import type { PolicyVersionView } from '@lemniscate/contracts';
import { parseDocument, stringify } from 'yaml';

/** What the editor starts from when a project has no policy yet. */
export const STARTER = '# No policy has been published yet: every command asks (P2).\nversion: 1\ncommands:\n  default: ask\n';

/** A version's text as published (comments and order kept), or its document written out. */
export function textOf(v: PolicyVersionView): string {
  return v.sourceText ?? stringify(v.document);
}

export const RUNTIMES = ['runc', 'runsc'] as const;
export type SandboxRuntime = (typeof RUNTIMES)[number];

/** The sandbox runtime a policy asks for (`sandbox.runtime`); runc when it says nothing. */
export function runtimeOf(v: PolicyVersionView | null): string {
  const sandbox = (v?.document as { sandbox?: { runtime?: unknown } } | null | undefined)?.sandbox;
  return typeof sandbox?.runtime === 'string' ? sandbox.runtime : 'runc';
}

/**
 * The policy text with `sandbox.runtime` set, every other line as it was (comments and order kept),
 * as `lemni projects update --runtime` publishes it; null when the policy already says so.
 */
export function withRuntime(v: PolicyVersionView | null, runtime: SandboxRuntime): string | null {
  const doc = parseDocument(v ? textOf(v) : STARTER);
  if ((doc.getIn(['sandbox', 'runtime']) ?? 'runc') === runtime) return null;
  doc.setIn(['sandbox', 'runtime'], runtime);
  return doc.toString();
}
