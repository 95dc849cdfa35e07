import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { defaultPolicy, issueLine, recommendedPolicy } from '@lemniscate/policy';
import { diagnosePolicy } from '../../apps/console/src/policy/validate';
import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';

jest.setTimeout(300_000);

/**
 * C1, P1: one validator. For every generated policy document, the console's editor, the real
 * `lemni policy check` and the gateway's publish (and dry run) agree: each valid one is accepted by
 * all three; each invalid one is refused by all three with the same problems, word for word. The
 * cases are generated from the library's own defaults: every forbidden command made free too, every
 * key of every section misspelt, every value given the wrong type, plus YAML that cannot be read
 * and an alias bomb.
 */

type Doc = Record<string, unknown>;
interface Case {
  name: string;
  text: string;
  valid: boolean;
}

const plain = (p: unknown): Doc => JSON.parse(JSON.stringify(p)) as Doc;

/** Every mapping of the default policy, by path, with its keys. */
function mappings(value: unknown, at: string[] = []): { at: string[]; keys: string[] }[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  const keys = Object.keys(value);
  return [{ at, keys }, ...keys.flatMap((k) => mappings((value as Doc)[k], [...at, k]))];
}

function setIn(doc: Doc, at: string[], value: unknown): Doc {
  const copy = plain(doc);
  let node = copy;
  for (const k of at.slice(0, -1)) node = node[k] as Doc;
  node[at.at(-1) as string] = value;
  return copy;
}

function getIn(doc: Doc, at: string[]): unknown {
  return at.reduce<unknown>((n, k) => (n as Doc)[k], doc);
}

/** A value of another type than the default's (a free-form mapping like `classes` is left out). */
function wrongType(value: unknown): unknown {
  if (typeof value === 'number') return 'many';
  if (typeof value === 'boolean') return 'yes';
  if (typeof value === 'string') return 42;
  if (Array.isArray(value)) return 'not a list';
  return undefined;
}

function generate(): Case[] {
  const base = plain(defaultPolicy);
  const cases: Case[] = [];
  const add = (name: string, doc: Doc | string, valid: boolean) => cases.push({ name, text: typeof doc === 'string' ? doc : stringify(doc), valid });

  // Valid: the two documents `lemni policy init` prints, the smallest one, and each default written out alone.
  add('the default policy', base, true);
  add('the recommended policy', plain(recommendedPolicy), true);
  add('version only', 'version: 1\n', true);
  for (const section of Object.keys(base).filter((k) => k !== 'version')) add(`only ${section}, at its defaults`, { version: 1, [section]: base[section] }, true);
  add('a free rule next to a forbidden one with more words', { version: 1, commands: { free: ['git'], forbidden: ['git push'] } }, true);

  // Free and forbidden overlap: every default forbidden command, made free as well.
  for (const rule of defaultPolicy.commands.forbidden) add(`free and forbidden: ${rule}`, { version: 1, commands: { free: ['npm test', rule] } }, false);
  add('free and forbidden, both written', { version: 1, commands: { free: ['make deploy'], forbidden: ['make  deploy'] } }, false);

  // Unknown keys: every key of every mapping misspelt (a letter dropped), and one key added.
  for (const { at, keys } of mappings(base)) {
    if (at[0] === 'thirdPartyFiles' && at[1] === 'classes') continue; // class names are the administrator's own
    for (const key of keys) {
      if (key.length < 3) continue;
      const node = plain(at.length ? getIn(base, at) : base);
      const value = node[key];
      delete node[key];
      node[`${key.slice(0, -1)}`] = value;
      add(`unknown key ${[...at, key.slice(0, -1)].join('.')}`, at.length ? setIn(base, at, node) : node, false);
    }
    add(`unknown key ${[...at, 'extra'].join('.')}`, at.length ? setIn(base, at, { ...(getIn(base, at) as Doc), extra: true }) : { ...base, extra: true }, false);
  }

  // Bad types: every leaf of the default policy given a value of another type.
  const leaves = (value: unknown, at: string[] = []): string[][] =>
    value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value).flatMap((k) => leaves((value as Doc)[k], [...at, k])) : [at];
  for (const at of leaves(base)) {
    const wrong = wrongType(getIn(base, at));
    if (wrong !== undefined) add(`bad type at ${at.join('.')}`, setIn(base, at, wrong), false);
  }

  // Documents that cannot be read.
  add('YAML syntax error', 'version: 1\ncommands: [unclosed\n', false);
  add('duplicate key', 'version: 1\nversion: 1\n', false);
  add('not a mapping', '- version: 1\n', false);
  const bomb = [
    'version: 1',
    'a: &a [x, x, x, x, x, x, x, x, x, x]',
    'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
    'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
    'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]',
    '',
  ];
  add('alias bomb', bomb.join('\n'), false);
  return cases;
}

const CASES = generate();
const INVALID = CASES.filter((c) => !c.valid);
const VALID = CASES.filter((c) => c.valid);

/** What `lemni policy check FILE` said for each case: exit code and its problem lines. */
const cli = new Map<string, { code: number | null; lines: string[]; stdout: string }>();

beforeAll(async () => {
  buildCli();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'policy-agreement-'));
  // A few at a time: each is a real process.
  for (let i = 0; i < CASES.length; i += 4) {
    await Promise.all(
      CASES.slice(i, i + 4).map(async (c, j) => {
        const file = path.join(dir, `case-${i + j}.yaml`);
        writeFileSync(file, c.text);
        const r = await lemni(['policy', 'check', file]);
        const lines = r.stderr
          .split('\n')
          .filter((l) => l.startsWith('  '))
          .map((l) => l.slice(2));
        cli.set(c.name, { code: r.code, lines, stdout: r.stdout });
      }),
    );
  }
  // The table's size, as every generated test prints it.
  console.log(`policy check agreement: ${VALID.length} valid and ${INVALID.length} invalid documents`);
});

it('generates cases of every kind', () => {
  for (const kind of ['free and forbidden', 'unknown key', 'bad type', 'alias bomb', 'YAML syntax error']) expect(INVALID.filter((c) => c.name.startsWith(kind)).length).toBeGreaterThan(0);
  expect(new Set(CASES.map((c) => c.name)).size).toBe(CASES.length);
});

describe.each(VALID.map((c) => [c.name, c] as const))('valid: %s', (_name, c) => {
  it('the console and lemni policy check accept it', () => {
    expect(diagnosePolicy(c.text)).toEqual([]);
    expect(cli.get(c.name)).toMatchObject({ code: 0, lines: [], stdout: expect.stringContaining('is a valid policy') });
  });
});

describe.each(INVALID.map((c) => [c.name, c] as const))('invalid: %s', (_name, c) => {
  it('the console and lemni policy check refuse it with the same problems', () => {
    const console = diagnosePolicy(c.text).map((d) => issueLine(d));
    expect(console.length).toBeGreaterThan(0);
    const r = cli.get(c.name)!;
    expect(r.code).toBe(1);
    expect(new Set(r.lines)).toEqual(new Set(console));
    expect(r.lines).toHaveLength(console.length);
  });
});

withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let project: string;
  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'policy-agreement');
  });
  afterAll(async () => {
    await gw?.close();
  });

  it(`the gateway refuses every invalid document with the same problems, in one sentence (${INVALID.length} cases), and publishes none`, async () => {
    for (const c of INVALID) {
      const lines = cli.get(c.name)!.lines;
      const res = await gw.http().post(`/api/v1/projects/${project}/policy`).set(bearer(admin)).send({ sourceText: c.text });
      expect({ name: c.name, status: res.status, code: res.body.code }).toEqual({ name: c.name, status: 400, code: 'policy_invalid' });
      expect({ name: c.name, lines: (res.body.details.issues as { path: string; message: string }[]).map(issueLine) }).toEqual({ name: c.name, lines });
      expect({ name: c.name, message: res.body.message }).toEqual({ name: c.name, message: `The policy was not published: ${lines.join('; ')}.` });
      const dry = await gw.http().post(`/api/v1/projects/${project}/policy/dry-run`).set(bearer(admin)).send({ sourceText: c.text });
      expect({ name: c.name, status: dry.status, message: dry.body.message }).toEqual({ name: c.name, status: 400, message: `The draft is not a valid policy: ${lines.join('; ')}.` });
    }
    // Nothing invalid was published.
    expect((await gw.http().get(`/api/v1/projects/${project}/policy`).set(bearer(admin))).status).toBe(404);
  });

  it(`the gateway publishes every valid document (${VALID.length} cases)`, async () => {
    for (const [i, c] of VALID.entries()) {
      const res = await gw.http().post(`/api/v1/projects/${project}/policy`).set(bearer(admin)).send({ sourceText: c.text });
      expect({ name: c.name, status: res.status, version: res.body.version }).toEqual({ name: c.name, status: 201, version: i + 1 });
    }
  });
});
