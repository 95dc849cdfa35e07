/**
 * JSON with object keys sorted at every level, so two argument objects that differ only in key
 * order give the same text. Follows JSON.stringify otherwise (undefined members dropped, non-finite
 * numbers as null), because tool arguments arrive as JSON from the model.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value, new Set())) ?? 'null';
}

function sortKeys(value: unknown, seen: Set<object>): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) throw new TypeError('canonicalJson cannot encode a value that contains itself.');
  seen.add(value);
  try {
    const json = (value as { toJSON?: () => unknown }).toJSON;
    if (typeof json === 'function') return sortKeys(json.call(value), seen);
    if (Array.isArray(value)) return value.map((item) => sortKeys(item, seen));
    // No prototype: a "__proto__" key sent by the model must stay an ordinary key.
    const out = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key], seen);
    return out;
  } finally {
    seen.delete(value);
  }
}
