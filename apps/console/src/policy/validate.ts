import { isMap, isPair, isScalar, parseDocument, type Document, type Node } from 'yaml';
import { checkPolicy } from '@lemniscate/policy/check';

export interface PolicyDiagnostic {
  /** Character offsets in the text, for the editor's underline. */
  from: number;
  to: number;
  line: number;
  /** `commands.free[2]`, as the gateway and `lemni policy check` name it. */
  path: string;
  /** The library's sentence, word for word what `lemni policy check` prints and the gateway refuses with. */
  message: string;
}

type Segment = string | number;

/** `commands.free[2]` back to `['commands', 'free', 2]`, to find the place in the text. */
function segmentsOf(path: string): Segment[] {
  const out: Segment[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : (m[1] as string));
  return out;
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** The offset of `line L, column C` (both from 1), as the library names a YAML syntax error. */
function offsetOfLine(text: string, line: number, column: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf('\n', offset);
    if (nl === -1) return text.length;
    offset = nl + 1;
  }
  return Math.min(text.length, offset + Math.max(0, column - 1));
}

/** The text range of the value at `path` (of its key when `key`), else of the closest parent. */
function rangeOf(doc: Document, text: string, path: Segment[], key: boolean): [number, number] {
  const last = path.at(-1);
  if (key && typeof last === 'string') {
    const parent = path.length > 1 ? doc.getIn(path.slice(0, -1), true) : doc.contents;
    if (isMap(parent)) {
      const pair = parent.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === last);
      const k = pair?.key as Node | undefined;
      if (k?.range) return [k.range[0], k.range[1]];
    }
  }
  for (let n = path.length; n >= 0; n--) {
    const node = (n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true)) as Node | null | undefined;
    if (node && typeof node === 'object' && 'range' in node && node.range) {
      // A whole mapping would underline half the document: point at its first line instead.
      const [start, end] = node.range;
      const nl = text.indexOf('\n', start);
      return isMap(node) ? [start, Math.min(end, Math.max(start + 1, nl === -1 ? text.length : nl))] : [start, end];
    }
  }
  return [0, 0];
}

/**
 * The administrator's YAML (or JSON) checked by the policy library's own validator — the function
 * `lemni policy check` and the gateway's publish use — with each problem placed in the text for the
 * editor. The gateway validates again on publish, with the same messages.
 */
export function diagnosePolicy(text: string): PolicyDiagnostic[] {
  const issues = checkPolicy(text);
  if (issues.length === 0) return [];
  const doc = parseDocument(text, { uniqueKeys: true });
  const out = issues.map((issue): PolicyDiagnostic => {
    const at = /^line (\d+), column (\d+): /.exec(issue.message);
    // A misspelt key is underlined itself; a wrong value is underlined where it is.
    const key = issue.message.startsWith('unknown key');
    let [from, to] = at ? [offsetOfLine(text, Number(at[1]), Number(at[2])), 0] : issue.path ? rangeOf(doc, text, segmentsOf(issue.path), key) : [0, 0];
    if (to <= from) to = from + 1;
    if (to > text.length) {
      to = text.length;
      from = Math.max(0, Math.min(from, to - 1));
    }
    return { from, to, line: lineOf(text, from), path: issue.path, message: issue.message };
  });
  return out.sort((a, b) => a.from - b.from);
}
