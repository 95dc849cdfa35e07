/** The width tables are cut to unless `--wide` is given: a terminal split in two still shows whole lines. */
export const TABLE_WIDTH = 100;

/**
 * A plain aligned table: readable in a terminal, stable enough to grep. With `maxWidth`, the last
 * column (free text: an instruction, a command) is cut with "…" so that no line is longer.
 */
export function table(header: string[], rows: string[][], maxWidth?: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => {
    const text = cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
    return maxWidth !== undefined && text.length > maxWidth ? `${text.slice(0, maxWidth - 1)}…` : text;
  };
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
