import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { McpExit, McpMessage } from '@lemniscate/contracts';
import { REPO_ROOT, RUNTIMES, SANDBOX_IMAGES, containersOfSandbox, execHostFor, git, refusal, type ExecHostProcess } from '../support/attack-harness';

/**
 * AG7: a local MCP server runs inside the session's sandbox as a command with stdin (McpRelay), under
 * runc and runsc: the messages go through, the server has the sandbox's view (the working copy, no
 * network, the sandbox user), what it writes is a change of the working copy, nothing of it outlives
 * the call, one command runs at a time, and a crash or a hang ends as a command's would.
 */
jest.setTimeout(180_000);

const SERVER = ['node', 'tools/mcp-files.cjs'];
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'relay-test', version: '1' } };

let repo: string;
let host: ExecHostProcess;

beforeAll(() => {
  repo = mkdtempSync(join(tmpdir(), 'lemniscate-mcp-repo-'));
  // The fixture server of test/fixtures/mcp, bundled with the SDK for the sandbox image's Node.
  execFileSync(process.execPath, [join(REPO_ROOT, 'test/support/bundle-mcp-server.mjs'), join(repo, 'tools', 'mcp-files.cjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(join(repo, 'README.md'), '# MCP fixture\n');
  git(repo, 'init', '-q', '-b', 'main');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '-m', 'a project with a local MCP server');
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));

/** One server process spoken to as a client would: initialise, then requests by id. */
async function session(sandboxId: string, options: { timeoutMs?: number; memoryMb?: number; command?: string[] } = {}) {
  const { processId } = await host.client.mcpOpen(sandboxId, { server: 'files', command: options.command ?? SERVER, memoryMb: options.memoryMb ?? 1024, timeoutMs: options.timeoutMs ?? 60_000 });
  let next = 0;
  const request = async (method: string, params: Record<string, unknown> = {}): Promise<{ reply: McpMessage | undefined; exited: McpExit | null; messages: McpMessage[] }> => {
    const id = next++;
    const res = await host.client.mcpMessage(sandboxId, processId, { message: { jsonrpc: '2.0', id, method, params }, waitFor: id });
    return { reply: res.messages.find((m) => m.id === id), exited: res.exited, messages: res.messages };
  };
  const init = await request('initialize', INIT);
  expect(init.reply?.result).toMatchObject({ serverInfo: { name: 'fixture-files' } });
  await host.client.mcpMessage(sandboxId, processId, { message: { jsonrpc: '2.0', method: 'notifications/initialized' } });
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await request('tools/call', { name, arguments: args })).reply?.result as { content: { text: string }[]; isError?: boolean } | undefined;
  return { processId, request, call, close: () => host.client.mcpClose(sandboxId, processId) };
}

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe.each(RUNTIMES)('a local MCP server under %s', (runtime) => {
    let sandboxId: string;
    beforeAll(async () => {
      sandboxId = (await host.createSandbox({ repository: { source: repo }, runtime }, `mcp-${runtime}`)).sandboxId;
    });

    it('lists and calls its tools through the relay, as the sandbox user in the working copy', async () => {
      const s = await session(sandboxId);
      const listed = await s.request('tools/list');
      expect((listed.reply?.result as { tools: { name: string }[] }).tools.map((t) => t.name)).toEqual(['read_file', 'write_file', 'fetch_url', 'environment', 'crash', 'big', 'sleep']);
      expect((await s.call('read_file', { path: 'README.md' }))?.content[0]?.text).toBe('# MCP fixture\n');
      const env = JSON.parse((await s.call('environment'))!.content[0]!.text) as { uid: number; env: Record<string, string> };
      expect(env.uid).not.toBe(0);
      // Nothing of the exec-host's environment reaches the server.
      expect(JSON.stringify(env.env)).not.toContain(host.canary.value);
      const exit = await s.close();
      expect(exit).toMatchObject({ class: null, dropped: 0 });
    });

    it('has no network: a fetch from the server fails for want of a network, not a refusal by a peer', async () => {
      const s = await session(sandboxId);
      for (const url of ['http://1.1.1.1/', `http://127.0.0.1:${host.port}/healthz`, 'http://registry.npmjs.org/']) {
        const result = await s.call('fetch_url', { url });
        expect({ url, isError: result?.isError, text: result?.content[0]?.text }).toEqual({
          url,
          isError: true,
          text: expect.stringMatching(/^network error: .*(ENETUNREACH|EHOSTUNREACH|ECONNREFUSED|EAI_AGAIN|ENOTFOUND)/),
        });
      }
      await s.close();
    });

    it('writes land in the working copy as changes to review, like a command’s', async () => {
      const s = await session(sandboxId);
      expect((await s.call('write_file', { path: 'notes.md', content: 'written by the server\n' }))?.content[0]?.text).toBe('wrote 22 bytes to notes.md');
      await s.close();
      const { files } = await host.client.changes(sandboxId);
      expect(files.map((f) => ({ path: f.path, status: f.status }))).toEqual([{ path: 'notes.md', status: 'added' }]);
      await host.client.revert(sandboxId, ['notes.md']);
    });

    it('runs alone: a command meanwhile is refused as busy, and nothing of the server is left once it ends', async () => {
      const s = await session(sandboxId);
      const busy = await refusal(host.client.run(sandboxId, { command: 'true' }));
      expect(busy.code).toBe('sandbox_busy');
      expect((await refusal(host.client.mcpOpen(sandboxId, { server: 'files', command: SERVER, memoryMb: 256, timeoutMs: 10_000 }))).code).toBe('sandbox_busy');
      await s.close();
      const ps = await host.client.run(sandboxId, { command: "ps -eo args --no-headers | grep -c '^node tools/mcp-files' || true" });
      expect(ps.stdout.trim()).toBe('0');
    });

    it('a crash is how the server ended, with what it said; the next message is told so', async () => {
      const s = await session(sandboxId);
      const crashed = await s.request('tools/call', { name: 'crash', arguments: {} });
      expect(crashed.reply).toBeUndefined();
      expect(crashed.exited).toMatchObject({ exitCode: 3 });
      const after = await host.client.mcpMessage(sandboxId, s.processId, { message: { jsonrpc: '2.0', id: 99, method: 'tools/list' }, waitFor: 99 });
      expect(after).toEqual({ messages: [], exited: expect.objectContaining({ exitCode: 3 }) });
      expect(await s.close()).toMatchObject({ exitCode: 3 });
      // The sandbox goes on.
      expect((await host.client.run(sandboxId, { command: 'echo still here' })).stdout).toBe('still here\n');
    });

    it('a server that outlives its lifetime is killed as a command that times out', async () => {
      const s = await session(sandboxId, { timeoutMs: 4_000 });
      const slow = await s.request('tools/call', { name: 'sleep', arguments: { ms: 60_000 } });
      expect(slow.reply).toBeUndefined();
      expect(slow.exited).toMatchObject({ class: 'timeout' });
      await s.close();
    });

    it("a server that writes past the sandbox's output cap is ended at once and says why, not left to its time limit", async () => {
      const s = await session(sandboxId, { timeoutMs: 60_000 });
      const big = await s.request('tools/call', { name: 'big', arguments: { bytes: 3 * 1024 * 1024 } });
      expect(big.reply).toBeUndefined();
      // Ended by the cap, not by its time limit (the class would say timeout).
      expect(big.exited).toMatchObject({ class: 'output_truncated', stderr: expect.stringContaining("the server wrote more than the sandbox's output cap") });
      await s.close();
    });

    it('a server that is not there ends with its own words on stderr', async () => {
      const { processId } = await host.client.mcpOpen(sandboxId, { server: 'files', command: ['node', 'tools/missing.cjs'], memoryMb: 256, timeoutMs: 10_000 });
      const res = await host.client.mcpMessage(sandboxId, processId, { message: { jsonrpc: '2.0', id: 0, method: 'initialize', params: INIT }, waitFor: 0 });
      expect(res.messages).toEqual([]);
      expect(res.exited?.exitCode).not.toBe(0);
      expect(res.exited?.stderr).toContain('Cannot find module');
    });

    it('refuses an unknown process, another sandbox’s process and a malformed start with a sentence', async () => {
      const s = await session(sandboxId);
      const other = (await host.createSandbox({ repository: { source: repo }, runtime }, `mcp-other-${runtime}`)).sandboxId;
      for (const [sbx, pid] of [
        [sandboxId, 'no-such-process'],
        [other, s.processId],
      ] as const) {
        const e = await refusal(host.client.mcpMessage(sbx, pid, { message: { jsonrpc: '2.0', method: 'notifications/initialized' } }));
        expect({ code: e.code, status: e.status }).toEqual({ code: 'mcp_process_not_found', status: 404 });
      }
      await s.close();
      for (const body of [
        {},
        { server: 'Files', command: SERVER, memoryMb: 256, timeoutMs: 1000 },
        { server: 'files', command: [], memoryMb: 256, timeoutMs: 1000 },
        { server: 'files', command: SERVER, memoryMb: 1, timeoutMs: 1000 },
      ]) {
        const res = await host.client.raw('POST', `/v1/sandboxes/${sandboxId}/mcp`, { body });
        expect({ body, status: res.status, code: (res.json as { code?: string }).code }).toEqual({ body, status: 400, code: 'invalid_request' });
      }
      expect(await containersOfSandbox(other)).toHaveLength(1);
    });
  });
});
