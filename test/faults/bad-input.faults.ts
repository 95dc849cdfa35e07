import { Limits, tooLargeMessage } from '@lemniscate/contracts';
import { startStack, type Stack } from '../e2e/harness';
import { leftoversAfter, NOTHING_LEFT } from './leftovers';
import { endRuns, startRun, terminal } from './run';

/**
 * Hostile input over the running stack (real gateway process, real HTTP): NUL characters in every
 * field people type, a YAML alias bomb as a policy, bodies over the size limits and malformed JSON.
 * Each is refused with a 4xx carrying a sentence (never a stack trace or SQL), nothing is stored,
 * and afterwards the same stack still runs a session to the end.
 */
let stack: Stack;

const NUL = 'a\u0000b';

/** A YAML "billion laughs": seven levels of nine aliases each. */
function aliasBomb(): string {
  const lines = ['version: 1', 'a: &a [x, x, x, x, x, x, x, x, x]'];
  for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g'].entries()) lines.push(`${name}: &${name} [${Array(9).fill(`*${'abcdef'[i]}`).join(', ')}]`);
  return `${lines.join('\n')}\n`;
}

async function raw(method: string, route: string, body: string, token = stack.tokens.admin): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(`${stack.gatewayUrl}/api/v1${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    // asserted below: every refusal is JSON
  }
  return { status: res.status, json, text };
}

/** A refusal a person can read: JSON with a code and a sentence, no stack trace, no SQL. */
function expectSentence(r: { status: number; json: any; text: string }, status: number | number[]) {
  expect([status].flat()).toContain(r.status);
  expect(r.json).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  expect(r.json.message).toMatch(/^[A-Z"a-z].*[.)]?$/s);
  expect(r.text).not.toMatch(/\n\s+at .+:\d+:\d+|node_modules|SELECT |INSERT |syntax error at|invalid byte sequence/i);
}

interface Stored {
  sessions: number;
  policyVersions: number;
  users: string[];
  auditSeq: number;
}

async function stored(): Promise<Stored> {
  const sessions = await stack.api(stack.tokens.admin, 'GET', '/sessions');
  const history = await stack.api(stack.tokens.admin, 'GET', `/projects/${stack.projectId}/policy/versions`);
  const users = await stack.api(stack.tokens.admin, 'GET', '/users');
  const audit = await stack.api(stack.tokens.admin, 'GET', `/audit?projectId=${stack.projectId}&limit=1&order=desc`);
  return {
    sessions: sessions.json.length,
    policyVersions: history.status === 200 ? history.json.length : -1,
    users: users.json.map((u: { email: string }) => u.email).sort(),
    auditSeq: audit.json[0]?.seq ?? 0,
  };
}

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['echo'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

describe('bad input over the running stack', () => {
  let before: Stored;
  beforeAll(async () => {
    before = await stored();
  });

  const nulCases = (): [string, string, string, object][] => [
    ['POST', '/sessions', 'body.instruction', { projectId: stack.projectId, instruction: `fix ${NUL}` }],
    ['POST', '/sessions', 'body.branch', { projectId: stack.projectId, instruction: 'fix it', branch: NUL }],
    ['POST', '/sessions', 'body.model', { projectId: stack.projectId, instruction: 'fix it', model: `scripted:${NUL}` }],
    ['POST', `/projects/${stack.projectId}/policy`, 'body.comment', { document: { version: 1 }, comment: NUL }],
    ['POST', `/projects/${stack.projectId}/policy`, 'body.sourceText', { sourceText: `version: 1\n# ${NUL}\n` }],
    ['POST', `/projects/${stack.projectId}/policy`, 'body.document.commands.free.0', { document: { version: 1, commands: { free: [NUL] } } }],
    ['POST', '/users', 'body.displayName', { email: 'nul@example.test', displayName: NUL, role: 'developer', password: 'a long enough password' }],
    ['POST', '/users', 'body.email', { email: `nul${NUL}@example.test`, displayName: 'x', role: 'developer', password: 'a long enough password' }],
    ['POST', '/projects', 'body.name', { name: `p${NUL}`, repositorySource: stack.repository, defaultRef: 'main' }],
  ];

  it('a NUL character in any typed field: 400 naming the field, in a sentence', async () => {
    for (const [method, route, field, body] of nulCases()) {
      const r = await raw(method, route, JSON.stringify(body));
      expectSentence(r, 400);
      expect({ route, field, message: r.json.message }).toEqual({ route, field, message: expect.stringContaining(`${field}: contains a NUL character`) });
    }
    // And in a query string.
    const q = await stack.api(stack.tokens.admin, 'GET', `/sessions?status=${encodeURIComponent(NUL)}`);
    expect(q.status).toBe(400);
    expect(q.json.message).toContain('contains a NUL character');
  });

  it('a YAML alias bomb as a policy: 400 with a sentence, on publish and on dry run, and the gateway answers at once after', async () => {
    for (const [route, extra] of [
      [`/projects/${stack.projectId}/policy`, { comment: 'bomb' }],
      [`/projects/${stack.projectId}/policy/dry-run`, {}],
    ] as const) {
      const started = Date.now();
      const r = await raw('POST', route, JSON.stringify({ sourceText: aliasBomb(), ...extra }));
      expectSentence(r, 400);
      expect(r.json.message).toMatch(/alias/i);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
  });

  it("bodies and fields over the limits of libs/contracts: each refused with the limit's sentence", async () => {
    // A request body over the cap of every route but a session start (a policy publication here).
    const padding = `version: 1\n${'# padding\n'.repeat(Math.ceil(Limits.requestBodyBytes / 10))}`;
    const body = JSON.stringify({ sourceText: padding, comment: 'too large' });
    const tooLarge = await raw('POST', `/projects/${stack.projectId}/policy`, body);
    expectSentence(tooLarge, 400);
    expect(tooLarge.json.message).toBe(tooLargeMessage('requestBodyBytes', Buffer.byteLength(body)));
    // A field over its own limit inside a body the route accepts.
    const longField = await raw('POST', '/sessions', JSON.stringify({ projectId: stack.projectId, instruction: 'x'.repeat(Limits.instructionBytes + 1) }));
    expectSentence(longField, 400);
    expect(longField.json.message).toBe(`The request is invalid: body.instruction: ${tooLargeMessage('instructionBytes', Limits.instructionBytes + 1).replace(/\.$/, '')}.`);
    const source = `version: 1\n${'#'.repeat(Limits.policySourceBytes)}`;
    const bigPolicy = await raw('POST', `/projects/${stack.projectId}/policy`, JSON.stringify({ sourceText: source }));
    expectSentence(bigPolicy, 400);
    expect(bigPolicy.json.message).toContain(tooLargeMessage('policySourceBytes', Buffer.byteLength(source)).replace(/\.$/, ''));
  });

  it('malformed JSON and the wrong shape: 400 with a sentence', async () => {
    for (const body of ['{"projectId": ', '[1, 2, 3]', '"just a string"', '{"projectId": null, "instruction": 5}']) {
      const r = await raw('POST', '/sessions', body);
      expectSentence(r, 400);
    }
  });

  it('nothing was stored: no session, policy version, user or project audit entry came of any of it', async () => {
    const after = await stored();
    expect(after.sessions).toBe(before.sessions);
    expect(after.policyVersions).toBe(before.policyVersions);
    expect(after.users).toEqual(before.users);
    expect(after.auditSeq).toBe(before.auditSeq);
  });

  it('the stack still serves: a session runs to the end, nothing left', async () => {
    const script = stack.script('after-bad-input', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo still-here' } }] }, { text: 'done' }]);
    const run = startRun(stack, ['-p', 'echo', '--model', `scripted:${script}`]);
    expect(await run.exited).toBe(0);
    expect(terminal(run)).toMatchObject({ type: 'session_completed' });
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({ exitCode: 0, stdout: 'still-here\n' });
    expect(await leftoversAfter(stack)).toEqual(NOTHING_LEFT);
  });
});
