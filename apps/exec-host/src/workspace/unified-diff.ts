import { structuredPatch } from 'diff';

interface DiffSide {
  content: string;
  mode: string;
}

/**
 * A git-style unified diff of one file (a/ and b/ prefixes, 3 lines of context), which both
 * `git apply` and jsdiff's parsePatch accept. `before` or `after` null means created or deleted.
 */
export function unifiedDiff(filePath: string, before: DiffSide | null, after: DiffSide | null): string {
  let header = `diff --git a/${filePath} b/${filePath}\n`;
  if (!before && after) header += `new file mode ${after.mode}\n`;
  else if (before && !after) header += `deleted file mode ${before.mode}\n`;
  else if (before && after && before.mode !== after.mode) header += `old mode ${before.mode}\nnew mode ${after.mode}\n`;
  const oldText = before?.content ?? '';
  const newText = after?.content ?? '';
  if (oldText === newText) return before && after && before.mode !== after.mode ? header : '';
  const patch = structuredPatch(`a/${filePath}`, `b/${filePath}`, oldText, newText, undefined, undefined, { context: 3 });
  let body = `--- ${before ? `a/${filePath}` : '/dev/null'}\n+++ ${after ? `b/${filePath}` : '/dev/null'}\n`;
  for (const h of patch.hunks) {
    const oldStart = h.oldLines === 0 ? h.oldStart - (h.oldStart > 0 ? 1 : 0) : h.oldStart;
    const newStart = h.newLines === 0 ? h.newStart - (h.newStart > 0 ? 1 : 0) : h.newStart;
    body += `@@ -${oldStart}${h.oldLines === 1 ? '' : `,${h.oldLines}`} +${newStart}${h.newLines === 1 ? '' : `,${h.newLines}`} @@\n`;
    for (const line of h.lines) body += `${line}\n`;
  }
  return header + body;
}
