import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import makefile from 'highlight.js/lib/languages/makefile';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

// Only the languages registered here end up in the bundle; the full build is ~1 MB.
const languages = { bash, css, diff, dockerfile, go, ini, java, javascript, json, makefile, markdown, python, rust, typescript, xml, yaml };
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang);

const BY_EXTENSION: Record<string, string> = {
  ts: 'typescript',
  tsx: 'typescript',
  mts: 'typescript',
  cts: 'typescript',
  js: 'javascript',
  jsx: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  json: 'json',
  yml: 'yaml',
  yaml: 'yaml',
  md: 'markdown',
  py: 'python',
  go: 'go',
  rs: 'rust',
  java: 'java',
  sh: 'bash',
  bash: 'bash',
  css: 'css',
  html: 'xml',
  xml: 'xml',
  svg: 'xml',
  toml: 'ini',
  ini: 'ini',
  cfg: 'ini',
  lock: 'yaml',
};
const BY_NAME: Record<string, string> = { Dockerfile: 'dockerfile', Makefile: 'makefile', '.gitconfig': 'ini', '.npmrc': 'ini' };

export function languageFor(path: string): string | null {
  const base = path.split('/').pop() ?? path;
  if (BY_NAME[base]) return BY_NAME[base];
  const ext = base.includes('.') ? base.split('.').pop()!.toLowerCase() : '';
  return BY_EXTENSION[ext] ?? null;
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#x27;');
}

/**
 * Highlights a block of code and returns one HTML string per line. A token can span lines (a block
 * comment, a template string), so the spans open at a line break are closed there and reopened on
 * the next line; every line is well-formed HTML on its own.
 */
export function highlightLines(code: string, language: string | null): string[] {
  const html = language && hljs.getLanguage(language) ? hljs.highlight(code, { language, ignoreIllegals: true }).value : escapeHtml(code);
  return splitHighlighted(html);
}

export function splitHighlighted(html: string): string[] {
  const lines: string[] = [];
  const open: string[] = [];
  let current = '';
  const token = /(<span[^>]*>)|(<\/span>)|(\n)|([^<\n]+)/g;
  for (let m = token.exec(html); m !== null; m = token.exec(html)) {
    if (m[1]) {
      open.push(m[1]);
      current += m[1];
    } else if (m[2]) {
      open.pop();
      current += m[2];
    } else if (m[3]) {
      lines.push(current + '</span>'.repeat(open.length));
      current = open.join('');
    } else {
      current += m[4];
    }
  }
  lines.push(current + '</span>'.repeat(open.length));
  return lines;
}
