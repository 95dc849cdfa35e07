import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { rewriteEndToEnd } from '../../apps/gateway/test/support/audit';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createProject, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';

jest.setTimeout(180_000);

beforeAll(() => buildCli(), 180_000);

/**
 * T2 with the real CLI against a real gateway: someone holding the database rewrites the log and
 * re-hashes every entry after the change. Without an anchor `lemni audit verify` cannot tell; with
 * the head it printed (or wrote to its anchor file) before the rewrite, it names the entry.
 */
withTestDatabases((db) => {
  let gw: Gateway;
  let token: string;
  let home: string;
  beforeAll(async () => {
    gw = await startGateway(db());
    token = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    await createProject(gw, token, 'anchored');
    home = mkdtempSync(path.join(os.tmpdir(), 'lemni-anchor-'));
  });
  afterAll(async () => {
    await gw?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const run = (...args: string[]) => lemni(['audit', 'verify', ...args], { env: { HOME: home, LEMNISCATE_GATEWAY: gw.baseUrl, LEMNISCATE_TOKEN: token } });

  it('prints the head to keep, and catches a rewritten log only against it', async () => {
    const anchorFile = path.join(home, 'audit.anchor');
    const first = await run('--anchor-file', anchorFile);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^The audit chain is intact \(\d+ entries checked\)\.\n$/);
    const kept = readFileSync(anchorFile, 'utf8').trim();
    expect(kept).toMatch(/^\d+:[0-9a-f]{64}$/);

    const plain = await run();
    expect(plain.code).toBe(0);
    const printed = /--anchor (\d+:[0-9a-f]{64})\n$/.exec(plain.stderr)?.[1];
    expect(printed).toBeDefined();

    await rewriteEndToEnd(db(), 2, 'user:mallory');

    // The documented weakness: a rewrite that re-hashed everything passes a verify without an anchor.
    const fooled = await run();
    expect(fooled.code).toBe(0);
    expect(fooled.stderr).toContain('Verified without an anchor, so a log rewritten and re-hashed from end to end by someone holding the database would pass.');

    const caught = await run('--anchor-file', anchorFile);
    expect(caught.code).toBe(1);
    expect(caught.stdout).toMatch(/^The audit chain is broken at entry \d+ \(altered\)\./);
    // The anchor of the honest log is kept, never replaced by the rewritten log's head.
    expect(readFileSync(anchorFile, 'utf8').trim()).toBe(kept);
    const caughtByFlag = await run('--anchor', printed as string);
    expect(caughtByFlag.code).toBe(1);
  });
});
