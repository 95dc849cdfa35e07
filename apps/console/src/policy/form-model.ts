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
 * A list field's rules, split: the plain lines the form edits, and the rules written as a mapping (a
 * command with the options that keep it free) that only the YAML editor edits. `labels` names those
 * by their command, so the form can say they are there.
 */
export function ruleLines(value: unknown): { lines: string[]; labels: string[] } {
  const list = Array.isArray(value) ? (value as unknown[]) : [];
  const lines: string[] = [];
  const labels: string[] = [];
  for (const item of list) {
    if (typeof item === 'string') {
      lines.push(item);
      continue;
    }
    const command = item !== null && typeof item === 'object' ? (item as { command?: unknown }).command : undefined;
    labels.push(typeof command === 'string' ? command : '?');
  }
  return { lines, labels };
}

/**
 * The list after the form changed its plain lines: every mapping rule kept where it stood (saving the
 * form never turns one into a plain prefix), the plain lines still there kept in place, new ones added
 * at the end.
 */
export function withRuleLines(value: unknown, lines: string[]): unknown[] {
  const list = Array.isArray(value) ? (value as unknown[]) : [];
  const wanted = new Set(lines);
  const kept = list.filter((item) => typeof item !== 'string' || wanted.has(item));
  const present = new Set(kept.filter((item): item is string => typeof item === 'string'));
  return [...kept, ...lines.filter((line) => !present.has(line))];
}

/**
 * The draft with these tool descriptions pinned under `mcp.servers.SERVER.pinned` (AG7): what an
 * administrator approves by publishing it. Other pins, comments and layout are kept.
 */
export function withPins(text: string, server: string, pins: Record<string, string>): string {
  const doc = parse(text);
  if (!doc) return text;
  for (const [tool, pin] of Object.entries(pins)) doc.setIn(['mcp', 'servers', server, 'pinned', tool], pin);
  return doc.toString();
}
