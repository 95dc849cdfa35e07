/** Whether the page follows the live event stream, and what that means on this page. */
export function LiveStatus({ live, on, off }: { live: boolean; on: string; off: string }) {
  return (
    <p className="muted small stream-status">
      <span className={`live-dot${live ? ' on' : ''}`} aria-hidden="true" /> {live ? on : off}
    </p>
  );
}

/** A labelled choice beside a page's heading: a filter, a period, a project. */
export function InlineSelect<V extends string | number>({
  id,
  label,
  value,
  options,
  onChange,
}: {
  id: string;
  label: string;
  value: V;
  options: readonly (readonly [V, string])[];
  onChange: (value: V) => void;
}) {
  return (
    <div className="field inline">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(options.find(([v]) => String(v) === e.target.value)?.[0] ?? value)}>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}
