import type { SyntaxNode } from './parser';

/**
 * A shell word as bash would see it once quotes and escapes are removed. `value` is null when the
 * word is only known at run time (expansions, command substitutions, globs, brace expansion).
 */
export interface Word {
  value: string | null;
  text: string;
  /**
   * Set when the word is only unknown because bash expands a glob or braces in it: the pattern with
   * quotes removed. Its first character tells whether any expansion could start with `-` or `/`.
   */
  pattern?: string;
}

/** Called for every command or process substitution found inside a word: its commands run too. */
export type SubstitutionVisitor = (node: SyntaxNode) => void;

interface Piece {
  value: string | null;
  /** Characters bash may still expand (glob, braces): only the unquoted ones. */
  unquoted: string;
}

export function normaliseWord(node: SyntaxNode, onSubstitution: SubstitutionVisitor): Word {
  if (node.type === 'command_substitution' || node.type === 'process_substitution') onSubstitution(node);
  else visitSubstitutions(node, onSubstitution);
  const piece = pieceOf(node);
  const value = piece.value;
  if (value !== null && mayExpand(piece.unquoted)) return { value: null, text: node.text, pattern: value };
  return { value, text: node.text };
}

/** Finds the command and process substitutions nested anywhere inside a node. */
export function visitSubstitutions(node: SyntaxNode, onSubstitution: SubstitutionVisitor): void {
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === 'command_substitution' || child.type === 'process_substitution') onSubstitution(child);
    else visitSubstitutions(child, onSubstitution);
  }
}

function pieceOf(node: SyntaxNode): Piece {
  switch (node.type) {
    case 'command_name': {
      const inner = node.firstNamedChild;
      return inner ? pieceOf(inner) : { value: null, unquoted: '' };
    }
    case 'word':
      return { value: unescapeUnquoted(node.text), unquoted: stripEscaped(node.text) };
    case 'number':
      return { value: node.text, unquoted: '' };
    case 'raw_string':
      return { value: node.text.slice(1, -1), unquoted: '' };
    case 'ansi_c_string':
      return { value: decodeAnsiC(node.text.slice(2, -1)), unquoted: '' };
    case 'string':
    case 'translated_string': {
      if (node.namedChildren.some((c) => c !== null && c.type !== 'string_content')) return { value: null, unquoted: '' };
      const body = node.type === 'string' ? node.text.slice(1, -1) : node.text.slice(2, -1);
      return { value: unescapeDoubleQuoted(body), unquoted: '' };
    }
    case 'concatenation': {
      let value: string | null = '';
      let unquoted = '';
      for (const child of node.namedChildren) {
        if (!child) continue;
        const p = pieceOf(child);
        value = value === null || p.value === null ? null : value + p.value;
        unquoted += p.unquoted;
      }
      return { value, unquoted };
    }
    default:
      // Expansions, substitutions, arithmetic, and anything this engine does not model: the
      // word is only known at run time.
      return { value: null, unquoted: '' };
  }
}

/** Unquoted text: a backslash quotes the next character; backslash-newline disappears. */
function unescapeUnquoted(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length) {
      const next = text[i + 1];
      i++;
      if (next !== '\n') out += next;
    } else {
      out += c;
    }
  }
  return out;
}

/** The characters of an unquoted word that bash may still expand (escaped ones are literal). */
function stripEscaped(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else out += text[i];
  }
  return out;
}

/** Inside double quotes a backslash only escapes $ ` " \ and newline. */
function unescapeDoubleQuoted(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '\\' && next !== undefined && '$`"\\\n'.includes(next)) {
      i++;
      if (next !== '\n') out += next;
    } else {
      out += c;
    }
  }
  return out;
}

const ANSI_SIMPLE: Record<string, string> = { a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };

/** `$'...'` quoting: C escapes, including hex, octal and Unicode code points. */
function decodeAnsiC(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c !== '\\' || i + 1 >= text.length) {
      out += c;
      continue;
    }
    const n = text[i + 1] as string;
    const simple = ANSI_SIMPLE[n];
    if (simple !== undefined) {
      out += simple;
      i++;
      continue;
    }
    const take = (re: RegExp, from: number, max: number): string => {
      let s = '';
      while (s.length < max && from + s.length < text.length && re.test(text[from + s.length] as string)) s += text[from + s.length];
      return s;
    };
    if (n === 'x') {
      const hex = take(/[0-9a-fA-F]/, i + 2, 2);
      if (hex) {
        out += String.fromCharCode(parseInt(hex, 16));
        i += 1 + hex.length;
        continue;
      }
    } else if (n === 'u' || n === 'U') {
      const hex = take(/[0-9a-fA-F]/, i + 2, n === 'u' ? 4 : 8);
      const cp = hex ? parseInt(hex, 16) : NaN;
      if (hex && cp <= 0x10ffff) {
        out += String.fromCodePoint(cp);
        i += 1 + hex.length;
        continue;
      }
    } else if (/[0-7]/.test(n)) {
      const oct = take(/[0-7]/, i + 1, 3);
      out += String.fromCharCode(parseInt(oct, 8) & 0xff);
      i += oct.length;
      continue;
    } else if (n === 'c' && i + 2 < text.length) {
      out += String.fromCharCode((text.charCodeAt(i + 2) & 0x1f) >>> 0);
      i += 2;
      continue;
    }
    out += c + n;
    i++;
  }
  return out;
}

/** Unquoted glob characters or brace expansion mean the word becomes something else at run time. */
function mayExpand(unquoted: string): boolean {
  if (/[*?[]/.test(unquoted)) return true;
  const open = unquoted.indexOf('{');
  if (open >= 0) {
    const close = unquoted.indexOf('}', open);
    if (close > open) {
      const inside = unquoted.slice(open + 1, close);
      if (inside.includes(',') || inside.includes('..')) return true;
    }
  }
  return false;
}
