/**
 * Small hand-made SVG charts. Each one is an image with a text alternative and carries its numbers
 * in a visually hidden table, so the dashboard reads the same with a screen reader.
 */

interface Point {
  label: string;
  value: number;
  /** Where the item drills down to (the sessions behind a bar). */
  href?: string;
}

function niceMax(max: number): number {
  if (max <= 5) return 5;
  const magnitude = 10 ** Math.floor(Math.log10(max));
  const steps = [1, 2, 2.5, 5, 10];
  for (const s of steps) if (max <= s * magnitude) return s * magnitude;
  return 10 * magnitude;
}

function DataTable({ caption, rows, valueLabel }: { caption: string; rows: Point[]; valueLabel: string }) {
  return (
    <table className="visually-hidden">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Item</th>
          <th scope="col">{valueLabel}</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.label}>
            <th scope="row">{r.label}</th>
            <td>{r.value}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ColumnChart({ title, data, valueLabel = 'Count', height = 180 }: { title: string; data: Point[]; valueLabel?: string; height?: number }) {
  const width = 560;
  const pad = { top: 12, right: 8, bottom: 28, left: 36 };
  const max = niceMax(Math.max(0, ...data.map((d) => d.value)));
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const band = data.length ? innerW / data.length : innerW;
  const ticks = [0, max / 2, max];
  const total = data.reduce((s, d) => s + d.value, 0);
  const every = Math.ceil(data.length / 7);
  const linked = data.some((d) => d.href);
  return (
    <figure className="chart">
      {/* With links the chart is a group of them (each named), not one image whose parts a reader skips. */}
      <svg viewBox={`0 0 ${width} ${height}`} role={linked ? 'group' : 'img'} aria-label={`${title}: ${total} in total over ${data.length} days`} preserveAspectRatio="xMidYMid meet">
        {ticks.map((t) => {
          const y = pad.top + innerH - (t / max) * innerH;
          return (
            <g key={t}>
              <line x1={pad.left} x2={width - pad.right} y1={y} y2={y} className="grid" />
              <text x={pad.left - 6} y={y + 4} className="tick" textAnchor="end">
                {t}
              </text>
            </g>
          );
        })}
        {data.map((d, i) => {
          const h = (d.value / max) * innerH;
          const x = pad.left + i * band + band * 0.18;
          return (
            <g key={d.label}>
              {d.href ? (
                <a href={d.href} aria-label={`${d.label}: ${d.value} ${valueLabel.toLowerCase()}`} className="bar-link">
                  {/* The whole column's height is the target, so a day with few sessions is still easy to hit. */}
                  <rect x={pad.left + i * band} y={pad.top} width={band} height={innerH} className="bar-hit" />
                  <rect x={x} y={pad.top + innerH - h} width={band * 0.64} height={Math.max(h, d.value > 0 ? 1 : 0)} rx={3} className="bar" />
                </a>
              ) : (
                <rect x={x} y={pad.top + innerH - h} width={band * 0.64} height={Math.max(h, d.value > 0 ? 1 : 0)} rx={3} className="bar">
                  <title>{`${d.label}: ${d.value}`}</title>
                </rect>
              )}
              {i % every === 0 && (
                <text x={x + band * 0.32} y={height - 8} className="tick" textAnchor="middle">
                  {d.label.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <DataTable caption={title} rows={data} valueLabel={valueLabel} />
    </figure>
  );
}

export function RankedBars({ title, data, tone = 'neutral', emptyText }: { title: string; data: Point[]; tone?: 'neutral' | 'deny' | 'ask'; emptyText: string }) {
  if (data.length === 0) return <p className="muted">{emptyText}</p>;
  const max = Math.max(...data.map((d) => d.value), 1);
  return (
    <figure className="chart">
      <ol className={`ranked ${tone}`} aria-label={title}>
        {data.map((d) => (
          <li key={d.label}>
            {d.href ? (
              <a className="ranked-label" href={d.href} title={d.label}>
                {d.label}
              </a>
            ) : (
              <code className="ranked-label" title={d.label}>
                {d.label}
              </code>
            )}
            <span className="ranked-track" aria-hidden="true">
              <span className="ranked-fill" style={{ width: `${(d.value / max) * 100}%` }} />
            </span>
            <span className="ranked-value">{d.value}</span>
          </li>
        ))}
      </ol>
    </figure>
  );
}

const EFFECT_ORDER = ['allow', 'ask', 'deny'] as const;

export function EffectDonut({ title, counts }: { title: string; counts: Record<(typeof EFFECT_ORDER)[number], number> }) {
  const total = EFFECT_ORDER.reduce((s, k) => s + counts[k], 0);
  const r = 52;
  const c = 2 * Math.PI * r;
  let offset = 0;
  const label = `${title}: ${EFFECT_ORDER.map((k) => `${counts[k]} ${k}`).join(', ')}`;
  return (
    <figure className="chart donut-wrap">
      <svg viewBox="0 0 140 140" width="140" height="140" role="img" aria-label={label}>
        <circle cx="70" cy="70" r={r} className="donut-bg" />
        {total > 0 &&
          EFFECT_ORDER.map((k) => {
            const len = (counts[k] / total) * c;
            const el = <circle key={k} cx="70" cy="70" r={r} className={`donut-seg ${k}`} strokeDasharray={`${len} ${c - len}`} strokeDashoffset={-offset} transform="rotate(-90 70 70)" />;
            offset += len;
            return el;
          })}
        <text x="70" y="66" textAnchor="middle" className="donut-total">
          {total}
        </text>
        <text x="70" y="84" textAnchor="middle" className="tick">
          decisions
        </text>
      </svg>
      <ul className="legend">
        {EFFECT_ORDER.map((k) => (
          <li key={k}>
            <span className={`swatch ${k}`} aria-hidden="true" />
            <span className="legend-label">{k}</span>
            <span className="legend-value">{counts[k]}</span>
            <span className="muted small">{total ? `${Math.round((counts[k] / total) * 100)}%` : '–'}</span>
          </li>
        ))}
      </ul>
    </figure>
  );
}
