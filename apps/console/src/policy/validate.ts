import { isMap, isPair, isScalar, parseDocument, type Document, type Node } from 'yaml';

export interface SchemaError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}
export type SchemaValidator = ((data: unknown) => boolean) & { errors?: SchemaError[] | null };

export interface PolicyDiagnostic {
  /** Character offsets in the text, for the editor's underline. */
  from: number;
  to: number;
  line: number;
  /** `commands.free[2]`, as the gateway and `lemni policy check` name it. */
  path: string;
  message: string;
}

type Segment = string | number;

function pointerToPath(pointer: string): Segment[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

export function formatPath(path: readonly Segment[]): string {
  return path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${key}` : key), '');
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** The text range of the value at `path`, or of its key when `key` is asked, or of the closest parent. */
function rangeOf(doc: Document, path: Segment[], key?: string): [number, number] {
  if (key !== undefined) {
    const parent = path.length ? doc.getIn(path, true) : doc.contents;
    if (isMap(parent)) {
      const pair = parent.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === key);
      const k = pair?.key as Node | undefined;
      if (k?.range) return [k.range[0], k.range[1]];
    }
  }
  for (let n = path.length; n >= 0; n--) {
    const node = (n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true)) as Node | null | undefined;
    if (node && typeof node === 'object' && 'range' in node && node.range) {
      // A whole mapping would underline half the document: point at its first line instead.
      const [start, end] = node.range;
      return isMap(node) ? [start, Math.min(end, start + Math.max(1, firstLineLength(doc, start)))] : [start, end];
    }
  }
  return [0, 0];
}

function firstLineLength(doc: Document, start: number): number {
  const text = doc.toString();
  const nl = text.indexOf('\n', start);
  return (nl === -1 ? text.length : nl) - start;
}

function sentence(e: SchemaError): string {
  switch (e.keyword) {
    case 'additionalProperties':
      return 'unknown key (check its spelling against the policy reference)';
    case 'enum':
      return `must be one of ${((e.params.allowedValues as unknown[]) ?? []).map(String).join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(e.params.allowedValue)}`;
    case 'required':
      return `required: \`${String(e.params.missingProperty)}\` is missing`;
    case 'type':
      return `expected ${e.params.type === 'object' ? 'a mapping' : e.params.type === 'array' ? 'a list' : `a ${String(e.params.type)}`}`;
    default:
      return e.message ?? 'is not valid';
  }
}

/**
 * Checks the administrator's YAML (or JSON) against the policy JSON schema and says where each
 * problem is. The gateway validates again on publish; this is for finding mistakes while typing.
 */
export function diagnosePolicy(text: string, validate: SchemaValidator): PolicyDiagnostic[] {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    return doc.errors.map((e) => {
      const [from, to] = e.pos;
      const first = (e.message.split('\n')[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, '');
      return { from, to: Math.max(to, from + 1), line: lineOf(text, from), path: '', message: `YAML: ${first}` };
    });
  }
  const value: unknown = doc.toJS({ maxAliasCount: 100 });
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return [{ from: 0, to: Math.max(1, Math.min(text.length, 1)), line: 1, path: '', message: 'a policy is a mapping with at least `version: 1`' }];
  }
  if (validate(value)) return [];
  const seen = new Set<string>();
  const out: PolicyDiagnostic[] = [];
  for (const e of validate.errors ?? []) {
    // Combinator errors only repeat what their branches already said.
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf' || e.keyword === 'if') continue;
    const path = pointerToPath(e.instancePath);
    const extra = e.keyword === 'additionalProperties' ? String(e.params.additionalProperty) : undefined;
    const fullPath = extra !== undefined ? [...path, extra] : path;
    const message = sentence(e);
    const id = `${formatPath(fullPath)}|${message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const [from, to] = rangeOf(doc, path, extra);
    out.push({ from, to: Math.max(to, from + 1), line: lineOf(text, from), path: formatPath(fullPath), message });
  }
  return out.sort((a, b) => a.from - b.from);
}
