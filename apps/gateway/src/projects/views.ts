import type { PolicyVersionSummary, PolicyVersionView, ProjectView } from '@lemniscate/contracts';
import type { PolicyVersionRow, ProjectRow } from '../db/schema';

export function toProjectView(p: ProjectRow): ProjectView {
  return { id: p.id, name: p.name, repositorySource: p.repositorySource, defaultRef: p.defaultRef, createdAt: p.createdAt.toISOString() };
}

export function toPolicySummary(v: PolicyVersionRow): PolicyVersionSummary {
  return { id: v.id, projectId: v.projectId, version: v.version, authorId: v.authorId, comment: v.comment ?? '', createdAt: v.createdAt.toISOString() };
}

export function toPolicyView(v: PolicyVersionRow): PolicyVersionView {
  return { ...toPolicySummary(v), document: v.document, sourceText: v.sourceText };
}
