// PostgreSQL's jsonb cannot hold U+0000 nor a lone UTF-16 surrogate ("unsupported Unicode escape
// sequence"), yet command output and model-written arguments can contain both. A plain jsonb column
// would make recording such a tool call fail and take the session down with it. This column stores
// them as U+FFFD, the replacement character, and is used for what tools and models produce; the
// audit log keeps the exact text (see audit/README.md).
import { customType } from 'drizzle-orm/pg-core';

// An escape is real only when preceded by an even number of backslashes (`\\u0000` is text).
const NUL_OR_LONE_SURROGATE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89ab][0-9a-f]{2}|d[c-f][0-9a-f]{2})/gi;

/** JSON text PostgreSQL's jsonb accepts; JSON.stringify writes U+0000 and lone surrogates as \u escapes. */
export function toStorableJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError('A JSON column cannot hold undefined.');
  return text.replace(NUL_OR_LONE_SURROGATE, '$1\\ufffd');
}

export const storableJsonb = customType<{ data: unknown; driverData: string }>({
  dataType: () => 'jsonb',
  toDriver: (value) => toStorableJson(value),
  fromDriver: (value) => (typeof value === 'string' ? (JSON.parse(value) as unknown) : value),
});
