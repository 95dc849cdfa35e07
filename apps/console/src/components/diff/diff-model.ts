import { parsePatch } from 'diff';
import { highlightLines, languageFor } from './highlight';

type LineKind = 'context' | 'add' | 'del';

export interface DiffLine {
  kind: LineKind;
  oldNo: number | null;
  newNo: number | null;
  /** Highlighted HTML produced by highlight.js from escaped text. */
  html: string;
  text: string;
}

export interface DiffHunk {
  header: string;
  lines: DiffLine[];
  /** Where the hunk sits in each file (1-based; a side with no lines starts where they would go). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  /** The hunk reaches the end of the file: a "no newline at end of file" mark, or less trailing context than a diff gives. */
  atEnd: boolean;
}

export interface DiffFile {
  path: string;
  oldPath: string | null;
  newPath: string | null;
  change: 'added' | 'deleted' | 'modified' | 'renamed';
  additions: number;
  deletions: number;
  hunks: DiffHunk[];
  binary: boolean;
  language: string | null;
}

interface SplitRow {
  left: DiffLine | null;
  right: DiffLine | null;
}

function stripPrefix(name: string | undefined): string | null {
  if (!name || name === '/dev/null') return null;
  return name.replace(/^[ab]\//, '').replace(/\t.*$/, '');
}

/**
 * Parses a unified diff (what the gateway stores and the CLI applies) into files and highlighted
 * lines. Each side of a hunk is highlighted as one block so multi-line tokens keep their colour.
 */
export function parseUnifiedDiff(patch: string, opts: { language?: string; oneDocument?: boolean } = {}): DiffFile[] {
  if (patch.trim() === '') return [];
  const binaryPaths = [...patch.matchAll(/^Binary files (?:a\/)?(\S+) and (?:b\/)?(\S+) differ$/gm)];
  const files: DiffFile[] = parsePatch(patch)
    .filter((p) => p.hunks.length > 0 || p.oldFileName || p.newFileName)
    .map((p) => {
      const oldPath = stripPrefix(p.oldFileName);
      const newPath = stripPrefix(p.newFileName);
      const path = newPath ?? oldPath ?? '(unnamed)';
      const language = opts.language ?? languageFor(path);
      let additions = 0;
      let deletions = 0;
      const hunks = p.hunks.map((h) => {
        const body = h.lines.filter((l) => !l.startsWith('\\'));
        const oldSide = body.filter((l) => l[0] !== '+').map((l) => l.slice(1));
        const newSide = body.filter((l) => l[0] !== '-').map((l) => l.slice(1));
        const oldHtml = highlightLines(oldSide.join('\n'), language);
        const newHtml = highlightLines(newSide.join('\n'), language);
        let o = 0;
        let n = 0;
        let oldNo = h.oldStart;
        let newNo = h.newStart;
        const lines: DiffLine[] = body.map((l) => {
          const text = l.slice(1);
          if (l[0] === '+') {
            additions += 1;
            return { kind: 'add', oldNo: null, newNo: newNo++, html: newHtml[n++] ?? '', text };
          }
          if (l[0] === '-') {
            deletions += 1;
            return { kind: 'del', oldNo: oldNo++, newNo: null, html: oldHtml[o++] ?? '', text };
          }
          o += 1;
          return { kind: 'context', oldNo: oldNo++, newNo: newNo++, html: newHtml[n++] ?? '', text };
        });
        let trailing = 0;
        while (trailing < lines.length && lines[lines.length - 1 - trailing]!.kind === 'context') trailing += 1;
        const atEnd = h.lines.some((l) => l.startsWith('\\')) || (trailing < DIFF_CONTEXT && trailing < lines.length);
        return { header: `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`, lines, oldStart: h.oldStart, oldLines: h.oldLines, newStart: h.newStart, newLines: h.newLines, atEnd };
      });
      const change: DiffFile['change'] = oldPath === null ? 'added' : newPath === null ? 'deleted' : oldPath !== newPath && !opts.oneDocument ? 'renamed' : 'modified';
      return { path, oldPath, newPath, change, additions, deletions, hunks, binary: false, language };
    });
  for (const m of binaryPaths) {
    const path = m[2] ?? m[1] ?? '';
    const existing = files.find((f) => f.path === path);
    if (existing) existing.binary = true;
    else files.push({ path, oldPath: m[1] ?? null, newPath: path, change: 'modified', additions: 0, deletions: 0, hunks: [], binary: true, language: null });
  }
  return files;
}

/** Lines of context a diff gives around each change (git's and the exec-host's default). */
const DIFF_CONTEXT = 3;

/** Unchanged lines between two hunks (or before the first, after the last) that a review can expand. */
export interface Gap {
  /** The index of the hunk the gap comes before; the number of hunks for the gap after the last. */
  before: number;
  /** First and last line of the gap, numbered in the old file; `to` is null while the file's end is unknown. */
  from: number;
  to: number | null;
  /** An unchanged line's number in the new file is its old number plus this. */
  delta: number;
}

/**
 * The gaps around a file's hunks. `totalOldLines` is the old file's length once the gateway has
 * said it; before that, a last hunk that visibly reaches the file's end closes the last gap.
 */
export function gapsOf(hunks: readonly DiffHunk[], totalOldLines: number | null): Gap[] {
  const gaps: Gap[] = [];
  let end = 0;
  let delta = 0;
  hunks.forEach((h, i) => {
    if (h.oldStart - 1 >= end + 1) gaps.push({ before: i, from: end + 1, to: h.oldStart - 1, delta: h.newStart - h.oldStart });
    end = h.oldStart + h.oldLines - 1;
    delta = h.newStart + h.newLines - (h.oldStart + h.oldLines);
  });
  const total = totalOldLines ?? (hunks.at(-1)?.atEnd ? end : null);
  if (total === null || total > end) gaps.push({ before: hunks.length, from: end + 1, to: total, delta });
  return gaps;
}

/** Pairs each run of deletions with the additions that follow it, as side-by-side views do. */
export function toSplitRows(lines: DiffLine[]): SplitRow[] {
  const rows: SplitRow[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.kind === 'context') {
      rows.push({ left: line, right: line });
      i += 1;
      continue;
    }
    const dels: DiffLine[] = [];
    const adds: DiffLine[] = [];
    while (i < lines.length && lines[i]!.kind === 'del') dels.push(lines[i++]!);
    while (i < lines.length && lines[i]!.kind === 'add') adds.push(lines[i++]!);
    for (let k = 0; k < Math.max(dels.length, adds.length); k++) rows.push({ left: dels[k] ?? null, right: adds[k] ?? null });
  }
  return rows;
}

/**
 * A long hunk drawn as tables of about CHUNK_LINES lines: each is its own layout island
 * (`content-visibility: auto`), so the browser lays out and paints only the parts near the screen
 * while every line stays in the page for find-in-page and screen readers. A cut falls on an
 * unchanged line when one comes soon, so a run of removals and additions stays side by side.
 */
export const CHUNK_LINES = 100;
export function chunksOf(lines: readonly DiffLine[]): DiffLine[][] {
  if (lines.length <= CHUNK_LINES * 1.5) return [[...lines]];
  const chunks: DiffLine[][] = [];
  let current: DiffLine[] = [];
  for (const line of lines) {
    if (current.length >= CHUNK_LINES && (line.kind === 'context' || current.length >= CHUNK_LINES * 2)) {
      chunks.push(current);
      current = [];
    }
    current.push(line);
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
