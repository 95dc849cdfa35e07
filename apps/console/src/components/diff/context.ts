import type { DiffLine, Gap } from './diff-model';
import { highlightLines } from './highlight';

/** Lines a review expands at a time, as a pull request's "expand" does. */
export const EXPAND_STEP = 20;
/** The most the gateway reads in one request (CONTEXT_MAX_LINES): "show all" stops there. */
export const EXPAND_MAX = 500;

/** Reads unchanged lines of a changed file, numbered as in the file before the change. */
export type LoadContext = (path: string, from: number, to: number) => Promise<{ lines: string[]; totalLines: number }>;

/** What a file's review has read around its hunks so far. */
export interface FileContext {
  /** Old line number → its text and highlighted markup. */
  lines: ReadonlyMap<number, { text: string; html: string }>;
  /** The old file's length, once the gateway has said it. */
  total: number | null;
  /** The gap (by the hunk it comes before) whose lines are being read. */
  busyGap: number | null;
  /** Why the last read for a gap failed, shown in that gap. */
  error: { gap: number; message: string } | null;
}

export const NO_CONTEXT: FileContext = { lines: new Map(), total: null, busyGap: null, error: null };

/** Adds lines read from `from` to what is known (highlighted as one block so multi-line tokens keep their colour). */
export function withLines(ctx: FileContext, from: number, lines: string[], total: number, language: string | null): FileContext {
  const html = highlightLines(lines.join('\n'), language);
  const next = new Map(ctx.lines);
  lines.forEach((text, i) => next.set(from + i, { text, html: html[i] ?? '' }));
  return { lines: next, total, busyGap: null, error: null };
}

/** A gap's known lines from its top and from its bottom, and the hidden range between them. */
export interface GapView {
  top: DiffLine[];
  bottom: DiffLine[];
  /** The hidden lines (old numbering); `to` null while the file's end is unknown; null when nothing is hidden. */
  hidden: { from: number; to: number | null } | null;
}

export function viewOfGap(gap: Gap, ctx: FileContext): GapView {
  const line = (oldNo: number): DiffLine => {
    const known = ctx.lines.get(oldNo)!;
    return { kind: 'context', oldNo, newNo: oldNo + gap.delta, text: known.text, html: known.html };
  };
  const top: DiffLine[] = [];
  let n = gap.from;
  while ((gap.to === null || n <= gap.to) && ctx.lines.has(n)) top.push(line(n++));
  const end = gap.to ?? ctx.total;
  if (end !== null && n > end) return { top, bottom: [], hidden: null };
  const bottom: DiffLine[] = [];
  if (gap.to !== null) {
    let m = gap.to;
    while (m >= n && ctx.lines.has(m)) bottom.unshift(line(m--));
    return { top, bottom, hidden: { from: n, to: m } };
  }
  return { top, bottom, hidden: { from: n, to: ctx.total } };
}
