#!/usr/bin/env node
// Validates Kubernetes objects (a JSON array on stdin) against the Kubernetes 1.34 API schemas as
// the npm package kubernetes-models (devDependency, exact version) generates them from the
// Kubernetes OpenAPI: its compiled validators check types, formats, enums and required fields, and
// its type declarations name every field of every object, so a field the API does not have is
// rejected too (strict, as `kubectl apply --validate=strict` would). Prints a JSON array of errors
// ({ object, path, message }) on stdout; exits 0 when it could check, whatever it found.
// It is a child process because kubernetes-models is an ES module only and Jest loads CommonJS.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const PKG_DIR = path.dirname(require.resolve('kubernetes-models/package.json'));
const APIMACHINERY_DIR = path.dirname(require.resolve('@kubernetes-models/apimachinery/package.json'));

/** The module of a kind: apps/v1 DaemonSet → kubernetes-models/apps/v1/DaemonSet. */
function modulePath(apiVersion, kind) {
  return path.join(PKG_DIR, apiVersion, kind);
}

/** The field types of the interfaces declared in one .d.ts file, parsed once. */
const declarations = new Map();

/**
 * The fields of the interface in `file` (a .d.ts path without extension): name → type text, and
 * the imports that resolve the names of other interfaces. null when the file declares only an alias
 * (IntOrString, Quantity, Time: leaves).
 */
function fieldsOf(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = fs.readFileSync(`${file}.d.ts`, 'utf8').replace(/\/\*\*[\s\S]*?\*\//g, '');
  const imports = new Map();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    const spec = m[2].replace(/\.js$/, '');
    const target = spec.startsWith('.') ? path.resolve(path.dirname(file), spec) : spec.startsWith('@kubernetes-models/apimachinery/') ? path.join(APIMACHINERY_DIR, spec.slice('@kubernetes-models/apimachinery/'.length)) : null;
    if (target) imports.set(m[1], target);
  }
  const body = /export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/.exec(text);
  let result = null;
  if (body) {
    const fields = new Map();
    // A field is `    "name"?: type;` at the interface's own indentation; a map type goes on over
    // the more indented lines after it.
    let current = null;
    for (const line of body[1].split('\n')) {
      const start = /^ {4}"([^"]+)"\??: (.*)$/.exec(line);
      if (start) fields.set((current = start[1]), start[2]);
      else if (current && /^ {5,}\S|^ {4}\}/.test(line)) fields.set(current, `${fields.get(current)} ${line.trim()}`);
    }
    for (const [k, v] of fields) fields.set(k, v.replace(/;$/, '').trim());
    result = { fields, imports };
  }
  declarations.set(file, result);
  return result;
}

/** Reports every field of `data` that its type does not declare, recursively. */
function unknownFields(data, type, imports, at, out) {
  if (data === null || data === undefined) return;
  const array = /^Array<([\s\S]+)>$/.exec(type);
  if (array) {
    if (Array.isArray(data)) data.forEach((item, i) => unknownFields(item, array[1], imports, `${at}/${i}`, out));
    return;
  }
  const map = /^\{\s*\[key: string\]: ([\s\S]+?);\s*\}$/.exec(type);
  if (map) {
    if (data && typeof data === 'object') for (const [k, v] of Object.entries(data)) unknownFields(v, map[1], imports, `${at}/${k}`, out);
    return;
  }
  const file = imports.get(type);
  if (!file) return; // a scalar, an enum of strings, or `any`
  checkObject(data, file, at, out);
}

function checkObject(data, file, at, out) {
  const decl = fieldsOf(file);
  if (!decl || !data || typeof data !== 'object' || Array.isArray(data)) return;
  for (const [key, value] of Object.entries(data)) {
    const type = decl.fields.get(key);
    if (type === undefined) out.push({ path: `${at}/${key}`, message: `unknown field "${key}" (the ${path.basename(file)} schema has no such field)` });
    else unknownFields(value, type, decl.imports, `${at}/${key}`, out);
  }
}

export async function validateObjects(objects) {
  const errors = [];
  for (const object of objects) {
    const name = `${object?.kind ?? '?'} ${object?.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object?.metadata?.name ?? '?'}`;
    const file = modulePath(String(object?.apiVersion ?? ''), String(object?.kind ?? ''));
    if (!object?.apiVersion || !object?.kind || !fs.existsSync(`${file}.js`)) {
      errors.push({ object: name, path: '', message: `no schema for apiVersion ${object?.apiVersion} kind ${object?.kind} in Kubernetes 1.34` });
      continue;
    }
    // kustomize 5 folds long base64 values over lines; the API server decodes []byte fields with
    // Go's base64 decoder, which skips \r and \n, so they are checked as the server reads them.
    if (object.kind === 'Secret' && object.data && typeof object.data === 'object') {
      object.data = Object.fromEntries(Object.entries(object.data).map(([k, v]) => [k, typeof v === 'string' ? v.replace(/[\r\n]/g, '') : v]));
    }
    const mod = await import(`${file}.js`);
    const Model = mod[object.kind];
    try {
      new Model(object).validate();
    } catch (e) {
      for (const err of e.errors ?? [{ instancePath: '', message: e.message }]) errors.push({ object: name, path: err.instancePath ?? '', message: err.message ?? String(err) });
    }
    const found = [];
    checkObject(object, file, '', found);
    errors.push(...found.map((f) => ({ object: name, ...f })));
  }
  return errors;
}

/** Facts about the schemas that pin the Kubernetes version they come from (the test checks them). */
export function pinnedVersionFacts() {
  const podSpec = fieldsOf(path.join(PKG_DIR, 'v1/PodSpec')).fields;
  return {
    // New in 1.34: PodSpec.hostnameOverride and the resource.k8s.io/v1 API. New in 1.35: PodSpec.workloadRef.
    hostnameOverride: podSpec.has('hostnameOverride'),
    resourceV1: fs.existsSync(path.join(PKG_DIR, 'resource.k8s.io/v1/ResourceClaim.js')),
    workloadRef: podSpec.has('workloadRef'),
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const out = process.argv.includes('--version-facts') ? pinnedVersionFacts() : await validateObjects(input);
  process.stdout.write(JSON.stringify(out));
}
