import type { PolicyVersionSummary, PolicyVersionView, ProjectView } from '@lemniscate/contracts';
import type { PolicyVersionRow, ProjectRow } from '../db/schema';

export function toProjectView(p: ProjectRow): ProjectView {
  return { id: p.id, name: p.name, repositorySource: p.repositorySource, defaultRef: p.defaultRef, createdAt: p.createdAt.toISOString() };
}

/** `authorEmail`: the email of `v.authorId`, looked up by the caller (null for the system or a removed account). */
export function toPolicySummary(v: PolicyVersionRow, authorEmail: string | null = null): PolicyVersionSummary {
  return { id: v.id, projectId: v.projectId, version: v.version, authorId: v.authorId, authorEmail, comment: v.comment ?? '', createdAt: v.createdAt.toISOString() };
}

export function toPolicyView(v: PolicyVersionRow, authorEmail: string | null = null): PolicyVersionView {
  return { ...toPolicySummary(v, authorEmail), document: v.document, sourceText: v.sourceText };
}
