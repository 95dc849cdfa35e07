import { isSeq, parseDocument, type Document } from 'yaml';

type Json = Record<string, unknown>;

/** One setting the form edits, located by its path in the policy document. */
export interface FieldSpec {
  path: string[];
  label: string;
  kind: 'enum' | 'lines' | 'integer' | 'tools';
  /** From the JSON schema: the value that applies when the document leaves it out. */
  defaultValue: unknown;
  options: string[];
  description: string;
  max?: number;
}

function at(schema: Json, path: string[]): Json {
  let node: Json = schema;
  for (const key of path) node = ((node.properties as Json | undefined)?.[key] as Json | undefined) ?? {};
  return node;
}

const COMMON: { path: string[]; label: string; kind: FieldSpec['kind'] }[] = [
  { path: ['commands', 'default'], label: 'Commands no rule names', kind: 'enum' },
  { path: ['commands', 'free'], label: 'Free commands (one per line)', kind: 'lines' },
  { path: ['commands', 'forbidden'], label: 'Forbidden commands (one per line)', kind: 'lines' },
  { path: ['commands', 'reapproval'], label: 'Identical commands', kind: 'enum' },
  { path: ['commands', 'askEveryTime'], label: 'Commands asked every time, even identical (one per line)', kind: 'lines' },
  { path: ['tools', 'disabled'], label: 'Disabled tools', kind: 'tools' },
  { path: ['thirdPartyFiles', 'mode'], label: 'Third-party files', kind: 'enum' },
  { path: ['execution', 'sessionMaxActions'], label: 'Actions per session', kind: 'integer' },
  { path: ['execution', 'sessionMaxMinutes'], label: 'Minutes per session', kind: 'integer' },
];

/** The common settings, with their options and defaults read from the policy JSON schema. */
export function commonFields(schema: Json): FieldSpec[] {
  return COMMON.map((f) => {
    const s = at(schema, f.path);
    const items = (s.items as Json | undefined) ?? {};
    return {
      ...f,
      defaultValue: s.default,
      options: ((f.kind === 'tools' ? items.enum : s.enum) as string[] | undefined) ?? [],
      description: typeof s.description === 'string' ? s.description : '',
      max: typeof s.maximum === 'number' ? s.maximum : undefined,
    };
  });
}

function parse(text: string): Document | null {
  const doc = parseDocument(text, { uniqueKeys: true });
  return doc.errors.length ? null : doc;
}

/** The value each field has in the text (or its default); null when the YAML cannot be read. */
export function readFields(text: string, fields: FieldSpec[]): Record<string, unknown> | null {
  const doc = parse(text);
  if (!doc) return null;
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const node = doc.getIn(f.path, true);
    const value = doc.getIn(f.path);
    out[f.path.join('.')] = node === undefined ? f.defaultValue : isSeq(node) ? (value as { toJSON(): unknown }).toJSON() : value;
  }
  return out;
}

/**
 * Writes one setting into the text. The yaml Document keeps the administrator's comments and
 * layout everywhere else, so the form and the editor can be used in turn.
 */
export function writeField(text: string, field: FieldSpec, value: unknown): string {
  const doc = parse(text);
  if (!doc) return text;
  doc.setIn(field.path, doc.createNode(value));
  return doc.toString();
}

/**
 * A list field's lines. A free rule written as a mapping (a command with its options) has no line
 * of its own: `structured` says so, and the form then shows the list without editing it, so saving
 * the form never turns such a rule into a plain prefix.
 */
export function ruleLines(value: unknown): { lines: string[]; structured: number } {
  const list = Array.isArray(value) ? (value as unknown[]) : [];
  let structured = 0;
  const lines = list.map((item) => {
    if (typeof item === 'string') return item;
    structured++;
    const command = item !== null && typeof item === 'object' ? (item as { command?: unknown }).command : undefined;
    return `${typeof command === 'string' ? command : '?'}  (with options)`;
  });
  return { lines, structured };
}
