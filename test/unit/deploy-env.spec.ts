import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * A deployment that sets a variable nothing reads fails silently (the exec-host once got
 * `LEMNISCATE_EXEC_HOST_HOST`, which it never read, and stayed on 127.0.0.1). Every `LEMNISCATE_*`
 * variable that `deploy/` sets (compose, Kubernetes, systemd) must be one that
 * production code reads; and production code reads no test switch.
 */
const ROOT = path.resolve(__dirname, '../..');
const SKIP_DIRS = new Set(['node_modules', 'dist', '__tests__', 'test', 'harness']);
const TEST_FILE = /\.(spec|medium|e2e)\.tsx?$/;

function productionSources(dir: string, out: string[] = []): string[] {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIP_DIRS.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) productionSources(full, out);
    else if (/\.(ts|tsx|js|mjs)$/.test(entry.name) && !TEST_FILE.test(entry.name)) out.push(full);
  }
  return out;
}

function sourceRoots(): string[] {
  const roots: string[] = [];
  for (const group of ['apps', 'libs']) {
    for (const name of fs.readdirSync(path.join(ROOT, group))) {
      for (const sub of ['src', 'bin']) {
        const dir = path.join(ROOT, group, name, sub);
        if (fs.existsSync(dir)) roots.push(dir);
      }
    }
  }
  return roots;
}

const sources = sourceRoots().flatMap((dir) => productionSources(dir));
const readByCode = new Set(sources.flatMap((file) => fs.readFileSync(file, 'utf8').match(/LEMNISCATE_[A-Z0-9_]+/g) ?? []));

/** The variables a deployment file sets, with the line that sets each, by the syntax of its kind. */
function setIn(file: string): Array<{ variable: string; line: string }> {
  const text = fs.readFileSync(file, 'utf8');
  const patterns: RegExp[] = file.endsWith('.service')
    ? [/^\s*Environment="?(LEMNISCATE_[A-Z0-9_]+)=/gm]
    : /Dockerfile/.test(file)
      ? [/^\s*ENV\s+(LEMNISCATE_[A-Z0-9_]+)[=\s]/gm]
      : [
          // compose `environment:` mappings: `  LEMNISCATE_X: value` (not `${LEMNISCATE_X}` interpolation)
          /^\s+(LEMNISCATE_[A-Z0-9_]+)\s*:/gm,
          // compose lists `- LEMNISCATE_X=value` and Kubernetes `{ name: LEMNISCATE_X, ... }`
          /^\s*-\s*(LEMNISCATE_[A-Z0-9_]+)=/gm,
          /name:\s*"?(LEMNISCATE_[A-Z0-9_]+)"?/g,
        ];
  const out: Array<{ variable: string; line: string }> = [];
  for (const pattern of patterns) {
    for (const match of text.matchAll(pattern)) {
      const at = text.lastIndexOf('\n', match.index) + 1;
      out.push({ variable: match[1] as string, line: text.slice(at, text.indexOf('\n', match.index)).trim() });
    }
  }
  return out;
}

function deployFiles(dir = path.join(ROOT, 'deploy'), out: string[] = []): string[] {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) deployFiles(full, out);
    else if (/\.(ya?ml|service)$/.test(entry.name) || entry.name.startsWith('Dockerfile')) out.push(full);
  }
  return out;
}

const settings = deployFiles().flatMap((file) => setIn(file).map((s) => ({ file: path.relative(ROOT, file), ...s })));

describe('deploy/ sets only variables the code reads', () => {
  it('finds the variables each deployment sets (the check below is not vacuous)', () => {
    const files = new Set(settings.map((s) => s.file));
    expect(files).toEqual(
      new Set([
        'deploy/compose/docker-compose.yml',
        'deploy/kubernetes/base/config.yaml',
        'deploy/kubernetes/base/exec-host.yaml',
        'deploy/kubernetes/base/gateway.yaml',
        'deploy/kubernetes/overlays/production/exec-host.yaml',
        'deploy/systemd/lemniscate-gateway.service',
      ]),
    );
    expect(settings.map((s) => s.variable)).toEqual(expect.arrayContaining(['LEMNISCATE_EXEC_HOST_TOKEN', 'LEMNISCATE_EXEC_HOST_POOL', 'LEMNISCATE_GATEWAY_HOST']));
  });

  it.each(settings.map((s) => [`${s.file}: ${s.variable}`, s] as const))('%s is read by the code', (_, s) => {
    if (!readByCode.has(s.variable)) {
      throw new Error(`${s.file} sets ${s.variable} ("${s.line}"), but no production code in apps/ or libs/ reads it.`);
    }
  });
});

describe('production code', () => {
  it('reads no test switch: sessions are recorded without a loop only when a test builds the module that way', () => {
    const offenders = sources.filter((file) => fs.readFileSync(file, 'utf8').includes('LEMNISCATE_SESSION_LOOPS')).map((f) => path.relative(ROOT, f));
    expect(offenders).toEqual([]);
  });
});
