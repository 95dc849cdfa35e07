/** The width tables are cut to unless `--wide` is given: a terminal split in two still shows whole lines. */
export const TABLE_WIDTH = 100;

/**
 * A plain aligned table: readable in a terminal, stable enough to grep. With `maxWidth`, the last
 * column (free text: an instruction, a command) is cut with "…" so that lines fit; the other columns
 * (ids, states) are never cut, and the last keeps at least 12 characters.
 */
export function table(header: string[], rows: string[][], maxWidth?: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const before = widths.slice(0, -1).reduce((sum, w) => sum + w + 2, 0);
  const room = maxWidth === undefined ? Infinity : Math.max(12, maxWidth - before);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? (c.length > room ? `${c.slice(0, room - 1)}…` : c) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

/** An id as tables show it: its first 8 characters, which every command taking an id accepts. */
export function shortId(id: string, wide: boolean): string {
  return wide ? id : id.slice(0, 8);
}

export function shorten(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** "1 file", "3 files", "1 pending approval": a count with its noun in the right number. */
export function count(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
