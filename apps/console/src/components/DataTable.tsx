import type { ReactNode } from 'react';

export interface Column<T> {
  header: ReactNode;
  cell: (row: T) => ReactNode;
  /** A numeric column: right-aligned, header and cells alike. */
  num?: boolean;
  /** Extra class of the cells (not the header), e.g. `truncate` or `row-actions`. */
  className?: string;
}

interface DataTableProps<T> {
  /** Read by screen readers only; the page's heading says it for the eye. */
  caption: string;
  columns: Column<T>[];
  rows: readonly T[];
  rowKey: (row: T) => string | number;
  rowClassName?: (row: T) => string | undefined;
  /** Extra class of the table beside `data`. */
  className?: string;
}

/** The console's list table: one header row of column headers, one row per item. */
export function DataTable<T>({ caption, columns, rows, rowKey, rowClassName, className }: DataTableProps<T>) {
  return (
    <table className={className ? `data ${className}` : 'data'}>
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          {columns.map((c, i) => (
            <th key={i} scope="col" className={c.num ? 'num' : undefined}>
              {c.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)} className={rowClassName?.(row)}>
            {columns.map((c, i) => (
              <td key={i} className={[c.num ? 'num' : '', c.className ?? ''].filter(Boolean).join(' ') || undefined}>
                {c.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A moment as the reader's locale writes it, machine-readable underneath. */
export function When({ at }: { at: string }) {
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}
