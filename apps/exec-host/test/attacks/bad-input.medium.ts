// Bad input at the control channel: each is refused with its code and a sentence, gives away
// nothing to a caller without the token, and leaves no container or working directory behind.
import { ExecHostRoutes, Limits, tooLargeMessage, type LimitName } from '@lemniscate/contracts';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { tmpdir } from 'node:os';
import { RUNTIMES, SANDBOX_IMAGES, containersOf, execHostFor, expectSentence, refusal, repoFixture, startExecHost, type ExecHostProcess, type RepoFixture } from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;

beforeAll(() => {
  repo = repoFixture();
});

afterAll(() => {
  repo?.remove();
});

/**
 * Every path under the state directory, to prove a refused create left nothing there. On a pooled
 * exec-host the warm sandboxes' directories come and go (a refused request may have taken one, which
 * is then destroyed and replaced): once the pool is full again, every sandbox directory must belong
 * to a live sandbox or to a warm one, counted by the health document, and only those are left out.
 */
async function stateTree(): Promise<string[]> {
  const walk = (dir: string, out: string[], skip: (rel: string) => boolean) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      const rel = relative(host.stateDir, p);
      if (skip(rel)) continue;
      out.push(rel);
      if (e.isDirectory()) walk(p, out, skip);
    }
    return out;
  };
  if (!host.pooled) return walk(host.stateDir, [], () => false).sort();
  const deadline = Date.now() + 20_000;
  for (;;) {
    await host.poolFull();
    const live = new Set((await host.client.sandboxes()).sandboxes.map((s) => s.sandboxId));
    const warm = readdirSync(join(host.stateDir, 'sandboxes')).filter((d) => !live.has(d));
    const ready = (await host.client.healthReport()).warmPool?.ready ?? 0;
    if (warm.length === ready) {
      const isWarm = (rel: string) => warm.some((d) => rel === join('sandboxes', d) || rel.startsWith(join('sandboxes', d) + '/'));
      return [...walk(host.stateDir, [], isWarm).sort(), `(${ready} warm sandboxes)`];
    }
    // A warm sandbox given up may still be being removed; a directory nothing owns never goes.
    if (Date.now() > deadline) throw new Error(`sandbox directories owned by no live sandbox: ${warm.length}, warm sandboxes ready: ${ready}: ${warm.join(', ')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe('authentication', () => {
    const routes: [string, string, unknown][] = [
      ['GET', ExecHostRoutes.health(), undefined],
      ['GET', ExecHostRoutes.sandboxes(), undefined],
      ['POST', ExecHostRoutes.sandboxes(), { sessionId: 'x', repository: { source: '/' } }],
      ['POST', ExecHostRoutes.exec('any'), { command: 'id' }],
      ['POST', ExecHostRoutes.file('any', 'read'), { path: 'README.md' }],
      ['DELETE', ExecHostRoutes.sandbox('any'), undefined],
      ['POST', ExecHostRoutes.mcp('any'), { server: 'files', command: ['node', 'x.js'], memoryMb: 256, timeoutMs: 1000 }],
      ['POST', ExecHostRoutes.mcpMessages('any', 'p'), { message: { jsonrpc: '2.0', method: 'x' } }],
      ['DELETE', ExecHostRoutes.mcpProcess('any', 'p'), undefined],
    ];

    it.each(routes)('refuses %s %s without a token, with a wrong one, and with a wrong scheme: 401 and no detail', async (method, route, body) => {
      const wrong = host.token.slice(0, -1) + (host.token.endsWith('0') ? '1' : '0');
      const attempts: { token?: string | null; headers?: Record<string, string> }[] = [
        { token: null },
        { token: wrong },
        { token: '' },
        { token: null, headers: { authorization: `Basic ${Buffer.from(`x:${host.token}`).toString('base64')}` } },
        { token: null, headers: { authorization: host.token } },
      ];
      for (const attempt of attempts) {
        const res = await host.client.raw(method, route, { body, ...attempt });
        expect({ attempt, status: res.status }).toEqual({ attempt, status: 401 });
        const b = res.json as Record<string, unknown>;
        expect(b).toMatchObject({ code: 'unauthorized' });
        expectSentence(String(b.message), 'unauthorized');
        expect(b.details).toBeUndefined();
        // No detail: nothing that says which part was wrong, nor what the token looks like.
        expect(res.text).not.toContain(host.token.slice(0, 8));
        expect(res.text.toLowerCase()).not.toMatch(/expected|length|prefix|scheme/);
      }
    });

    it('creates nothing for an unauthenticated create', async () => {
      const sessionId = host.newSessionId('unauth');
      const res = await host.client.raw('POST', ExecHostRoutes.sandboxes(), { token: null, body: { sessionId, repository: { source: repo.dir } } });
      expect(res.status).toBe(401);
      expect((await containersOf(host.sessionPrefix)).filter((c) => c.session === sessionId)).toEqual([]);
    });
  });

  describe('unknown sandbox', () => {
    it.each([
      ['GET', (id: string) => ExecHostRoutes.sandbox(id), undefined],
      ['POST', (id: string) => ExecHostRoutes.exec(id), { command: 'id' }],
      ['POST', (id: string) => `${ExecHostRoutes.exec(id)}?stream=false`, { command: 'id' }],
      ['POST', (id: string) => ExecHostRoutes.file(id, 'read'), { path: 'README.md' }],
      ['POST', (id: string) => ExecHostRoutes.file(id, 'list'), { path: '.' }],
      ['POST', (id: string) => ExecHostRoutes.file(id, 'search'), { pattern: 'x' }],
      ['POST', (id: string) => ExecHostRoutes.file(id, 'propose-write'), { path: 'a', content: 'b' }],
      ['POST', (id: string) => ExecHostRoutes.file(id, 'apply'), { diff: '--- a\n+++ b\n' }],
      ['GET', (id: string) => ExecHostRoutes.changes(id), undefined],
      ['GET', (id: string) => ExecHostRoutes.patch(id), undefined],
      ['POST', (id: string) => ExecHostRoutes.mcp(id), { server: 'files', command: ['node', 'x.js'], memoryMb: 256, timeoutMs: 1000 }],
      ['POST', (id: string) => ExecHostRoutes.mcpMessages(id, 'p'), { message: { jsonrpc: '2.0', method: 'x' } }],
      ['DELETE', (id: string) => ExecHostRoutes.mcpProcess(id, 'p'), undefined],
    ] as [string, (id: string) => string, unknown][])('%s %p answers 404 sandbox_not_found with a sentence', async (method, route, body) => {
      for (const id of ['sbx-does-not-exist', '%2e%2e%2fetc', 'a'.repeat(300)]) {
        const res = await host.client.raw(method, route(id), { body });
        // An id that cannot exist may also be refused as malformed; it never reaches anything else.
        if (res.status === 400 && id !== 'sbx-does-not-exist') {
          expect(res.json).toMatchObject({ code: 'invalid_request' });
          continue;
        }
        expect({ id, status: res.status, body: res.json }).toMatchObject({ id, status: 404, body: { code: 'sandbox_not_found' } });
        expectSentence((res.json as { message: string }).message, 'sandbox_not_found');
      }
    });

    it('DELETE of an unknown sandbox is 200 destroyed:false, never 404', async () => {
      const res = await host.client.raw('DELETE', ExecHostRoutes.sandbox('sbx-does-not-exist'));
      expect({ status: res.status, body: res.json }).toEqual({ status: 200, body: { sandboxId: 'sbx-does-not-exist', destroyed: false } });
      await expect(host.client.destroy('sbx-does-not-exist')).resolves.toBeUndefined();
    });
  });

  describe('malformed requests', () => {
    const field = (res: { json: unknown }) => (res.json as { message: string }).message;

    it.each([
      ['sessionId missing', { repository: { source: '/tmp' } }, 'sessionId'],
      ['sessionId with a slash', { sessionId: '../x', repository: { source: '/tmp' } }, 'sessionId'],
      ['repository missing', { sessionId: 'ok' }, 'repository'],
      ['ref starting with a dash', { sessionId: 'ok', repository: { source: '/tmp', ref: '--upload-pack=touch /tmp/pwned' } }, 'ref'],
      ['unknown runtime', { sessionId: 'ok', repository: { source: '/tmp' }, runtime: 'kata' }, 'runtime'],
      ['memory over the maximum', { sessionId: 'ok', repository: { source: '/tmp' }, limits: { memoryMb: 1_000_000 } }, 'memoryMb'],
      ['pids below the minimum', { sessionId: 'ok', repository: { source: '/tmp' }, limits: { pids: 1 } }, 'pids'],
      ['exclusions not a list', { sessionId: 'ok', repository: { source: '/tmp' }, contextExclusions: '.env' }, 'contextExclusions'],
    ])('create with %s: 400 invalid_request naming the field', async (_what, body, name) => {
      const before = await stateTree();
      const res = await host.client.raw('POST', ExecHostRoutes.sandboxes(), { body });
      expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status: 400, code: 'invalid_request' });
      expect(field(res)).toContain(name);
      expect(await stateTree()).toEqual(before);
    });

    it('create with an uncommitted patch one byte over the starting patch limit: 400 with the sentence, nothing created', async () => {
      const before = await stateTree();
      const bytes = Limits.startingPatchBytes + 1;
      const res = await host.client.raw('POST', ExecHostRoutes.sandboxes(), { body: { sessionId: 'too-large', repository: { source: repo.dir }, uncommittedPatch: '+'.repeat(bytes) } });
      expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status: 400, code: 'invalid_request' });
      expect(field(res)).toContain(tooLargeMessage('startingPatchBytes', bytes));
      expect(await stateTree()).toEqual(before);
      expect(await containersOf('too-large')).toEqual([]);
    }, 60_000);

    it('refuses a body that is not JSON, and one that is not an object', async () => {
      for (const rawBody of ['{"sessionId": ', 'null', '[]', '"text"']) {
        const res = await host.client.raw('POST', ExecHostRoutes.sandboxes(), { rawBody });
        expect({ rawBody, status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ rawBody, status: 400, code: 'invalid_request' });
        expectSentence(field(res));
      }
    });

    describe.each(RUNTIMES)('on a live sandbox under %s', (runtime) => {
      let id: string;
      beforeAll(async () => {
        id = (await host.createSandbox({ repository: { source: repo.dir }, runtime, limits: { commandTimeoutSeconds: 2 } }, `bad-${runtime}`)).sandboxId;
      });

      it.each([
        ['exec without command', 'exec', {}, 'command'],
        ['exec with a negative timeout', 'exec', { command: 'id', timeoutMs: -5 }, 'timeoutMs'],
        ['read with a NUL in the path', 'read', { path: 'a\0b' }, 'path'],
        ['read with a negative offset', 'read', { path: 'README.md', offset: -1 }, 'offset'],
        ['search without pattern', 'search', {}, 'pattern'],
        ['propose-write without content', 'propose-write', { path: 'x' }, 'content'],
        ['apply with an empty diff', 'apply', { diff: '' }, 'diff'],
      ])('%s: 400 invalid_request naming the field', async (_what, op, body, name) => {
        const route = op === 'exec' ? `${ExecHostRoutes.exec(id)}?stream=false` : ExecHostRoutes.file(id, op as 'read');
        const res = await host.client.raw('POST', route, { body });
        expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status: 400, code: 'invalid_request' });
        expect(field(res)).toContain(name);
      });

      // Limits: every size limit of the control channel, at and one byte over, generated from one table.
      const sized: [string, 'exec' | 'propose-write' | 'propose-edit' | 'apply', LimitName, (n: number) => Record<string, unknown>][] = [
        ['exec command', 'exec', 'commandBytes', (n) => ({ command: `: ${'y'.repeat(n - 11)}; echo ok` })],
        ['propose-write content', 'propose-write', 'fileWriteBytes', (n) => ({ path: 'big.txt', content: 'w'.repeat(n) })],
        ['propose-edit new_string', 'propose-edit', 'fileWriteBytes', (n) => ({ path: 'README.md', old_string: 'r', new_string: 'e'.repeat(n) })],
        ['apply diff', 'apply', 'applyDiffBytes', (n) => ({ diff: `diff --git a/x b/x\n${'#'.repeat(n - 19)}` })],
      ];
      it.each(sized)(
        '%s (route %s) one byte over %s: 400 invalid_request with the sentence, the working copy untouched',
        async (_what, op, limit, body) => {
          const route = op === 'exec' ? `${ExecHostRoutes.exec(id)}?stream=false` : ExecHostRoutes.file(id, op);
          const res = await host.client.raw('POST', route, { body: body(Limits[limit] + 1) });
          expect({ status: res.status, code: (res.json as { code?: string })?.code }).toEqual({ status: 400, code: 'invalid_request' });
          expect(field(res)).toContain(tooLargeMessage(limit, Limits[limit] + 1));
          expect((await host.client.changes(id)).files).toEqual([]);
        },
        60_000,
      );

      it('runs a command exactly at the command limit, and proposes a write exactly at the write limit', async () => {
        const command = sized[0]![3](Limits.commandBytes).command as string;
        expect(Buffer.byteLength(command)).toBe(Limits.commandBytes);
        expect(await host.client.run(id, { command })).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
        const write = await host.client.raw('POST', ExecHostRoutes.file(id, 'propose-write'), { body: sized[1]![3](Limits.fileWriteBytes) });
        expect(write.status).toBe(200);
        expect((await host.client.changes(id)).files).toEqual([]);
      }, 60_000);

      it('refuses a second command while one runs, with sandbox_busy', async () => {
        let started!: () => void;
        const running = new Promise<void>((r) => (started = r));
        const first = host.client.execStream(id, { command: 'echo started; sleep 1; echo first' }, (chunk) => {
          if (chunk.type === 'stdout' && chunk.data.includes('started')) started();
        });
        await running;
        const second = await refusal(host.client.run(id, { command: 'echo second' }));
        expect({ status: second.status, code: second.code }).toEqual({ status: 409, code: 'sandbox_busy' });
        expectSentence(second.message, 'sandbox_busy');
        await expect(first).resolves.toMatchObject({ stdout: 'started\nfirst\n', exit: { exitCode: 0 } });
      });

      it('refuses a regular expression that does not compile with invalid_pattern', async () => {
        const refused = await refusal(host.client.search(id, { pattern: '(unclosed', regex: true }));
        expect({ status: refused.status, code: refused.code }).toEqual({ status: 400, code: 'invalid_pattern' });
        expectSentence(refused.message, 'invalid_pattern');
      });

      it('cannot raise a limit from a request: a timeout above the sandbox cap is held to the cap', async () => {
        const result = await host.client.run(id, { command: 'sleep 30', timeoutMs: 600_000 });
        expect(result).toMatchObject({ timedOut: true, class: 'timeout' });
        expect(result.durationMs).toBeGreaterThanOrEqual(2_000);
        expect(result.durationMs).toBeLessThan(12_000);
      });
    });
  });

  describe('a repository that does not exist', () => {
    it.each(RUNTIMES)('is refused with 400 repository_not_found under %s, and leaves no container nor working directory', async (runtime) => {
      const sessionId = host.newSessionId(`norepo-${runtime}`);
      const before = await stateTree();
      for (const source of [join(tmpdir(), 'lemniscate-no-such-repository-' + Date.now()), '/etc', 'file:///nonexistent/repo.git']) {
        const refused = await refusal(host.client.create({ sessionId, repository: { source }, runtime }));
        expect({ source, status: refused.status, code: refused.code }).toEqual({ source, status: 400, code: 'repository_not_found' });
        expectSentence(refused.message, 'repository_not_found');
      }
      const badRef = await refusal(host.client.create({ sessionId, repository: { source: repo.dir, ref: 'no-such-branch' }, runtime }));
      expect({ status: badRef.status, code: badRef.code }).toEqual({ status: 400, code: 'repository_ref_not_found' });
      expectSentence(badRef.message, 'repository_ref_not_found');
      expect(await containersOf(sessionId)).toEqual([]);
      expect(await stateTree()).toEqual(before);
      expect((await host.client.sandboxes()).sandboxes.filter((s) => s.sessionId === sessionId)).toEqual([]);
    });
  });

  describe('more sandboxes than the exec-host allows', () => {
    it('refuses the one over the limit with 429 sandbox_limit_reached and starts nothing for it', async () => {
      const small = await startExecHost(image, { LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '1' });
      try {
        await small.createSandbox({ repository: { source: repo.dir } }, 'first');
        const sessionId = small.newSessionId('over-limit');
        const refused = await refusal(small.client.create({ sessionId, repository: { source: repo.dir } }));
        expect({ status: refused.status, code: refused.code }).toEqual({ status: 429, code: 'sandbox_limit_reached' });
        expectSentence(refused.message, 'sandbox_limit_reached');
        expect(refused.message).toBe('This exec-host already runs its maximum of 1 sandbox (LEMNISCATE_EXEC_HOST_MAX_SANDBOXES).');
        expect(await containersOf(sessionId)).toEqual([]);
      } finally {
        await small.stop();
      }
    });

    it('lets no burst of concurrent requests pass the limit together: of five at once under a cap of two, two are made and three refused', async () => {
      const small = await startExecHost(image, { LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '2' });
      try {
        const sessions = [1, 2, 3, 4, 5].map((i) => small.newSessionId(`burst-${i}`));
        const results = await Promise.allSettled(sessions.map((sessionId) => small.client.create({ sessionId, repository: { source: repo.dir } })));
        const made = results.filter((r) => r.status === 'fulfilled');
        const refused = await Promise.all(results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => refusal(Promise.reject(r.reason))));
        expect(made).toHaveLength(2);
        expect(refused.map((r) => r.code)).toEqual(['sandbox_limit_reached', 'sandbox_limit_reached', 'sandbox_limit_reached']);
        expect((await small.client.sandboxes()).sandboxes).toHaveLength(2);
      } finally {
        await small.stop();
      }
    });
  });
});
