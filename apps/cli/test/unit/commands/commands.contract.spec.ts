import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { SESSION_MODE_LABELS, SessionMode, type ProjectAgentsView } from '@lemniscate/contracts';
import { approvalView, FakeGateway, GOOD_TOKEN, sessionView } from '../../support/fake-gateway';
import { buildCli, gitIn, lemni, makeRepo } from '../../support/run-bin';

let gateway: FakeGateway;
let home: string;
const dirs: string[] = [];

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-home-'));
  dirs.push(home);
});
afterEach(async () => {
  await gateway.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({ HOME: home, LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN, ...extra });

describe('lemni login', () => {
  it('--token checks the token with the gateway and stores a profile with mode 600', async () => {
    const r = await lemni(['login', '--gateway', gateway.url, '--token', GOOD_TOKEN, '--project', 'demo'], { env: { HOME: home } });
    expect(r.code).toBe(0);
    const file = path.join(home, '.lemniscate', 'config.yaml');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parse(readFileSync(file, 'utf8'))).toEqual({ profiles: { default: { gateway: gateway.url, token: GOOD_TOKEN, project: 'demo' } }, defaultProfile: 'default' });
    expect(r.stdout).toContain('as dev@example.org (developer)');
    // The stored profile is then used with no flags at all.
    const projects = await lemni(['projects', '--json'], { env: { HOME: home } });
    expect(projects.code).toBe(0);
    expect((JSON.parse(projects.stdout) as { name: string }[]).map((p) => p.name)).toEqual(['demo']);
  });

  it('with an email and a password creates a personal API token through the gateway', async () => {
    const r = await lemni(['login', '--profile', 'work', '--gateway', gateway.url, '--email', 'dev@example.org', '--password-stdin'], { env: { HOME: home }, input: 'correct horse\n' });
    expect(r.code).toBe(0);
    expect(gateway.hits('POST', '/auth/tokens')).toHaveLength(1);
    const config = parse(readFileSync(path.join(home, '.lemniscate', 'config.yaml'), 'utf8')) as { profiles: Record<string, { token: string }> };
    expect(config.profiles.work?.token).toBe(GOOD_TOKEN);
  });

  it('a wrong password or a bad token is one sentence and exit 1, and nothing is written', async () => {
    const bad = await lemni(['login', '--gateway', gateway.url, '--email', 'dev@example.org', '--password-stdin'], { env: { HOME: home }, input: 'wrong\n' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('The gateway refused this email and password.\n');
    const token = await lemni(['login', '--gateway', gateway.url, '--token', 'nope'], { env: { HOME: home } });
    expect(token.code).toBe(1);
    expect(token.stderr).toContain('refused the API token');
    expect(() => statSync(path.join(home, '.lemniscate', 'config.yaml'))).toThrow();
  });

  it('without a terminal, asks for --token or --password-stdin instead of hanging', async () => {
    const r = await lemni(['login', '--gateway', gateway.url], { env: { HOME: home } });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('No terminal to ask for a password: pass --token TOKEN, or --email and --password-stdin.\n');
  });
});

describe('profiles', () => {
  it('--profile picks the gateway/token pair; an unknown one is refused', async () => {
    mkdirSync(path.join(home, '.lemniscate'), { recursive: true });
    writeFileSync(
      path.join(home, '.lemniscate', 'config.yaml'),
      `profiles:\n  developer: { gateway: "http://127.0.0.1:1", token: x }\n  admin: { gateway: "${gateway.url}", token: ${GOOD_TOKEN} }\ndefaultProfile: developer\n`,
      { mode: 0o600 },
    );
    const ok = await lemni(['--profile', 'admin', 'projects'], { env: { HOME: home } });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('demo');
    const down = await lemni(['projects'], { env: { HOME: home } });
    expect(down.stderr).toBe('Cannot reach the gateway at http://127.0.0.1:1: is it running? (`npm start`)\n');
    const ghost = await lemni(['--profile', 'ghost', 'projects'], { env: { HOME: home } });
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toContain('No profile named "ghost"');
  });
});

describe('sessions, session show, stop', () => {
  beforeEach(() => {
    gateway.sessions.set(
      's9',
      sessionView('s9', { status: 'stopped', stopReason: 'limit_actions', actionsUsed: 150, instruction: 'fix the flaky test', summary: 'Half done.', finalPatch: 'diff --git a/x b/x\n' }),
    );
  });

  it('lists sessions as a table and as JSON', async () => {
    const table = await lemni(['sessions'], { env: env() });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+STATUS\s+MODE\s+AGENT\s+ACTIONS\s+STARTED\s+INSTRUCTION\ns9\s+stopped \(limit_actions\)\s+headless\s+general\s+150/);
    const json = await lemni(['sessions', '--json'], { env: env() });
    expect((JSON.parse(json.stdout) as { id: string }[])[0]?.id).toBe('s9');
  });

  it(`prints the mode each session was started in, for all ${SessionMode.options.length} modes, in the list and in show`, async () => {
    gateway.sessions.clear();
    for (const mode of SessionMode.options) gateway.sessions.set(`s-${mode}`, sessionView(`s-${mode}`, { mode, headless: mode === 'headless' }));
    const table = await lemni(['sessions'], { env: env() });
    for (const mode of SessionMode.options) {
      expect(table.stdout).toMatch(new RegExp(`^s-${mode}\\s+running\\s+${mode}\\s+general`, 'm'));
      const show = await lemni(['session', 'show', `s-${mode}`], { env: env() });
      expect(show.stdout).toContain(`Mode      ${SESSION_MODE_LABELS[mode]} (${mode})\n`);
    }
    expect(SESSION_MODE_LABELS).toEqual({ interactive: 'Interactive', headless: 'Headless', headless_with_approvals: 'Headless, approvals waited for' });
  }, 60_000);

  it('session show says where the tree stood at the start and at the end (X3)', async () => {
    const start = `sha256:${'1'.repeat(64)}`;
    const end = `sha256:${'2'.repeat(64)}`;
    const cases = [
      { over: { fingerprintStart: start, fingerprintEnd: end }, line: `Tree      ${start} at the start, ${end} at the end\n` },
      { over: { fingerprintStart: start, fingerprintEnd: start }, line: `Tree      ${start} at the start, unchanged at the end\n` },
      { over: { fingerprintStart: start, fingerprintEnd: null }, line: `Tree      ${start} at the start, unknown at the end\n` },
      { over: { fingerprintStart: start, fingerprintEnd: null, status: 'running' as const, endedAt: null }, line: `Tree      ${start} at the start\n` },
    ];
    for (const [i, c] of cases.entries()) {
      gateway.sessions.set(`t${i}`, sessionView(`t${i}`, { status: 'completed', endedAt: new Date().toISOString(), ...c.over }));
      expect((await lemni(['session', 'show', `t${i}`], { env: env() })).stdout).toContain(c.line);
    }
  }, 60_000);

  it('rejects a bad --limit before calling the gateway', async () => {
    const r = await lemni(['sessions', '--limit', '0'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('--limit must be a whole number from 1 to 500, not "0".\n');
    expect(gateway.requests).toEqual([]);
  });

  it('session show prints the session with its tool calls; an unknown id is one sentence', async () => {
    const r = await lemni(['session', 'show', 's9'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Status    stopped (limit_actions)');
    expect(r.stdout).toContain('Bash npm test  → allow (commands.free[0])');
    expect(r.stdout).toContain('`lemni apply s9` applies it');
    const missing = await lemni(['session', 'show', 'zz'], { env: env() });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('No session zz is visible to you; a short id needs at least its first 4 characters (`lemni sessions` lists them).\n');
  });

  it('stop stops the session and says what happened', async () => {
    gateway.sessions.set('s9', sessionView('s9'));
    const r = await lemni(['stop', 's9', '--reason', 'wrong branch'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('Session s9 is stopped: 1 pending approval rejected, sandbox destroyed.\n');
    expect(gateway.hits('POST', '/sessions/s9/stop')[0]?.body).toEqual({ reason: 'wrong branch' });
  });
});

describe('sessions revoke', () => {
  it("revokes through the gateway; a developer gets the gateway's refusal", async () => {
    gateway.sessions.set('s9', sessionView('s9'));
    const r = await lemni(['sessions', 'revoke', 's9', '--reason', 'left'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('Session s9 is stopped (revoked): 1 pending approval rejected, sandbox destroyed.\n');
    expect(gateway.hits('POST', '/sessions/s9/revoke')[0]?.body).toEqual({ reason: 'left' });
  });
});

describe('approvals', () => {
  beforeEach(() => {
    gateway.approvals = [
      approvalView('a1'),
      approvalView('a2', {
        kind: 'third_party',
        payload: { diff: 'diff --git a/.github/ci.yml b/.github/ci.yml\n+x\n', files: ['.github/ci.yml'] },
        flags: {
          thirdParty: [{ path: '.github/ci.yml', class: 'ci' }],
          policy: { rule: 'thirdPartyFiles', reason: 'CI configuration is a third-party file: a person approves it separately.' },
          reverted: [{ path: '.git/hooks/pre-commit', reason: 'Git hooks are third-party files the policy forbids changing.' }],
        },
      }),
    ];
  });

  it('lists pending approvals with third-party ones flagged', async () => {
    const r = await lemni(['approvals'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/a1\s+command\s+general\s+s1\s+npm install left-pad/);
    expect(r.stdout).toMatch(/a2\s+third_party\s+general\s+s1\s+YES\s+\.github\/ci\.yml/);
    expect(gateway.requests[0]?.path).toBe('/approvals?state=pending');
  });

  it("approve and reject answer through the gateway; answering twice is the gateway's sentence", async () => {
    const ok = await lemni(['approvals', 'approve', 'a1', '--remember'], { env: env() });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe('Approved a1 (command: npm install left-pad).\n');
    expect(gateway.hits('POST', '/approvals/a1/approve')[0]?.body).toEqual({ rememberCommand: true });
    const again = await lemni(['approvals', 'reject', 'a1', '--reason', 'no'], { env: env() });
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('Approval a1 was already answered (approved). (request req-1)\n');
  });

  it('show prints the diff and flags third-party files', async () => {
    const r = await lemni(['approvals', 'show', 'a2'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('THIRD-PARTY FILE');
    expect(r.stdout).toContain('THIRD-PARTY FILES: .github/ci.yml (ci)');
  });

  it('show says what the session was asked, why the policy asks, and which forbidden files were already reverted', async () => {
    const r = await lemni(['approvals', 'show', 'a2', '--no-pager'], { env: env() });
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[1]).toBe('Instruction: fix the failing test');
    expect(lines[2]).toBe('Why it asks: CI configuration is a third-party file: a person approves it separately. (rule thirdPartyFiles)');
    expect(r.stdout).toContain('Not offered, already reverted: .git/hooks/pre-commit: Git hooks are third-party files the policy forbids changing.\n');
    // A request from an older gateway, without them, shows neither line.
    const bare = await lemni(['approvals', 'show', 'a1'], { env: env() });
    expect(bare.stdout).not.toContain('Why it asks');
  });

  describe("an agent's question", () => {
    beforeEach(() => {
      gateway.approvals.push(approvalView('q1', { kind: 'question', payload: { question: 'Keep the old API or break it?', options: ['keep it', 'break it'] } }));
    });

    it('is listed and shown with its numbered options and how to answer', async () => {
      const list = await lemni(['approvals'], { env: env() });
      expect(list.stdout).toMatch(/q1\s+question\s+general\s+s1\s+\? Keep the old API or break it\?/);
      const r = await lemni(['approvals', 'show', 'q1'], { env: env() });
      expect(r.stdout).toContain('Question: Keep the old API or break it?\n  1. keep it\n  2. break it\n');
      expect(r.stdout).toContain('Answer with `lemni approvals approve q1 --answer TEXT`');
    });

    it('--answer N picks the Nth option; other text is sent as written', async () => {
      const picked = await lemni(['approvals', 'approve', 'q1', '--answer', '2'], { env: env() });
      expect(picked.code).toBe(0);
      expect(gateway.hits('POST', '/approvals/q1/approve')[0]?.body).toEqual({ rememberCommand: false, response: 'break it' });
      expect(picked.stdout).toBe('Answered q1 (? Keep the old API or break it?): break it\n');
      gateway.approvals.push(approvalView('q2', { kind: 'question', payload: { question: 'Name?', options: [] } }));
      await lemni(['approvals', 'approve', 'q2', '--answer', 'fast path'], { env: env() });
      expect(gateway.hits('POST', '/approvals/q2/approve')[0]?.body).toEqual({ rememberCommand: false, response: 'fast path' });
    });

    it('an empty answer is refused before anything is sent', async () => {
      const r = await lemni(['approvals', 'approve', 'q1', '--answer', '  '], { env: env() });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('An answer cannot be empty; reject the question to decline it.');
      expect(gateway.hits('POST', '/approvals/q1/approve')).toEqual([]);
    });
  });
});

describe('lemni apply SESSION', () => {
  it('applies the approved patch to this checkout', async () => {
    const dir = makeRepo({ 'a.txt': 'one\n' });
    dirs.push(dir);
    writeFileSync(path.join(dir, 'a.txt'), 'two\n');
    const patch = gitIn(dir, 'diff');
    gitIn(dir, 'checkout', '--', 'a.txt');
    gateway.sessions.set('s5', sessionView('s5', { status: 'completed', finalPatch: patch }));
    const r = await lemni(['apply', 's5'], { cwd: dir, env: env() });
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('two\n');
  });

  it('refuses outside a git checkout and while the session runs', async () => {
    const plain = mkdtempSync(path.join(os.tmpdir(), 'lemni-plain-'));
    dirs.push(plain);
    const outside = await lemni(['apply', 's5'], { cwd: plain, env: env() });
    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain('not in one');
    const dir = makeRepo({ 'a.txt': 'one\n' });
    dirs.push(dir);
    gateway.sessions.set('s6', sessionView('s6'));
    const running = await lemni(['apply', 's6'], { cwd: dir, env: env() });
    expect(running.stderr).toBe('Session s6 is still running; apply its patch once it has ended.\n');
  });
});

describe('lemni audit', () => {
  it('verify exits 0 on an intact chain and 1 naming the first broken entry', async () => {
    const ok = await lemni(['audit', 'verify'], { env: env() });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe('The audit chain is intact (3 entries checked).\n');
    expect(ok.stderr).toBe(
      'Verified without an anchor, so a log rewritten and re-hashed from end to end by someone holding the database would pass. Keep this head outside the database and pass it next time: --anchor 3:h3\n',
    );
    gateway.auditVerify = { ok: false, checked: 41, seq: 42, problem: 'altered', message: 'Entry 42 was altered: its content no longer matches the hash recorded when it was written.' };
    const broken = await lemni(['audit', 'verify'], { env: env() });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe('The audit chain is broken at entry 42 (altered). Entry 42 was altered: its content no longer matches the hash recorded when it was written.\n');
  });

  it('verify --anchor sends the anchor, and --anchor-file reads it and keeps the new head', async () => {
    const hash = 'a'.repeat(64);
    const head = 'b'.repeat(64);
    gateway.auditVerify = { ok: true, checked: 3, lastSeq: 3, lastHash: head };
    const anchored = await lemni(['audit', 'verify', '--anchor', `2:${hash}`], { env: env() });
    expect(anchored.code).toBe(0);
    expect(gateway.requests.at(-1)?.path).toBe(`/audit/verify?anchorSeq=2&anchorHash=${hash}`);
    expect(anchored.stdout).toBe('The audit chain is intact (3 entries checked, and it still leads to the anchor at entry 2).\n');
    expect(anchored.stderr).toBe(`Keep this head outside the database and pass it next time: --anchor 3:${head}\n`);

    const file = path.join(home, 'audit.anchor');
    const first = await lemni(['audit', 'verify', '--anchor-file', file], { env: env() });
    expect(first.code).toBe(0);
    expect(gateway.requests.at(-1)?.path).toBe('/audit/verify');
    expect(readFileSync(file, 'utf8')).toBe(`3:${head}\n`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.stderr).toBe(`Head 3:${head} written to ${file}; the next verify with --anchor-file checks against it.\n`);
    const second = await lemni(['audit', 'verify', '--anchor-file', file], { env: env() });
    expect(second.code).toBe(0);
    expect(gateway.requests.at(-1)?.path).toBe(`/audit/verify?anchorSeq=3&anchorHash=${head}`);

    // A broken chain keeps the old anchor: the head of a rewritten log must never replace it.
    writeFileSync(file, `2:${hash}\n`);
    gateway.auditVerify = { ok: false, checked: 1, seq: 2, problem: 'altered', message: 'Entry 2 was altered.' };
    const broken = await lemni(['audit', 'verify', '--anchor-file', file], { env: env() });
    expect(broken.code).toBe(1);
    expect(gateway.requests.at(-1)?.path).toBe(`/audit/verify?anchorSeq=2&anchorHash=${hash}`);
    expect(readFileSync(file, 'utf8')).toBe(`2:${hash}\n`);

    for (const bad of ['12', 'x:y', `3:${'A'.repeat(64)}`, `-1:${hash}`]) {
      const r = await lemni(['audit', 'verify', `--anchor=${bad}`], { env: env() });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('--anchor must be an entry number and its SHA-256 hash as printed by `lemni audit verify`');
    }
    writeFileSync(file, 'garbage\n');
    const badFile = await lemni(['audit', 'verify', '--anchor-file', file], { env: env() });
    expect(badFile.code).toBe(1);
    expect(badFile.stderr).toContain(`The anchor file ${file} must be an entry number`);
    const both = await lemni(['audit', 'verify', '--anchor', `2:${hash}`, '--anchor-file', file], { env: env() });
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('Give --anchor or --anchor-file, not both.');
  });

  it('export streams the body with the filters as query parameters', async () => {
    gateway.sessions.set('s1', sessionView('s1'));
    const r = await lemni(['audit', 'export', '--format', 'jsonl', '--session', 's1', '--from', '2026-11-01'], { env: env() });
    const csv = await lemni(['audit', 'export', '--format', 'csv', '--user', 'u7', '--project', 'demo'], { env: env() });
    expect(csv.code).toBe(0);
    expect(gateway.requests.at(-1)?.path).toBe('/audit/export?format=csv&projectId=p1&actor=user%3Au7');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('{"seq":1}\n{"seq":2}\n');
    // To standard output without a cursor, nothing but the export.
    expect(r.stderr).toBe('');
    // The fake's lines are not entries as exported (no time): nothing counted, no cursor made up.
    const counted = await lemni(['audit', 'export', '--after-seq', '0'], { env: env() });
    expect(counted.stderr).toBe('Audit log exported: 0 entries; the next incremental export starts with --after-seq 0.\n');
    gateway.auditExport = '{"seq":7,"at":"2026-11-01T10:00:00.000Z","actor":"system"}\n{"seq":9,"at":"2026-11-01T10:00:01.000Z","actor":"system"}\n';
    const incremental = await lemni(['audit', 'export', '--after-seq', '6'], { env: env() });
    expect(gateway.requests.at(-1)?.path).toBe('/audit/export?format=jsonl&afterSeq=6');
    expect(incremental.stderr).toBe('Audit log exported: 2 entries; the next incremental export starts with --after-seq 9.\n');
    gateway.auditExport = 'seq,at,actor\r\n12,2026-11-01T10:00:00.000Z,"a\n13,2026-11-01"\r\n';
    const csvCursor = await lemni(['audit', 'export', '--format', 'csv', '--after-seq', '11'], { env: env() });
    expect(csvCursor.stderr).toBe('Audit log exported: 1 entry; the next incremental export starts with --after-seq 12.\n');
    for (const bad of ['-1', 'x', '1.5']) {
      const refused = await lemni(['audit', 'export', `--after-seq=${bad}`], { env: env() });
      expect({ bad, code: refused.code, stderr: refused.stderr }).toEqual({ bad, code: 1, stderr: `--after-seq must be an entry number such as 4182, not "${bad}".\n` });
    }
    // The gateway's filter takes ISO timestamps; a date alone is sent as its midnight UTC.
    // The session is looked up first: an id's first characters name it too.
    expect(gateway.requests.map((q) => q.path).slice(0, 2)).toEqual(['/sessions/s1', '/audit/export?format=jsonl&sessionId=s1&from=2026-11-01T00%3A00%3A00.000Z']);
    const bad = await lemni(['audit', 'export', '--from', 'yesterday-ish'], { env: env() });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--from must be a date or time');
  });
});

describe('lemni policy publish', () => {
  it('publishes the file text for the named project', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-pol-'));
    dirs.push(dir);
    const file = path.join(dir, 'p.yaml');
    writeFileSync(file, '# keep me\nversion: 1\ncommands: { free: [npm test] }\n');
    const r = await lemni(['--profile', 'admin', 'policy', 'publish', file, '--project', 'demo'], {
      env: { HOME: home },
      // a profile named admin, as `npm start` writes
    }).then(async (first) => {
      expect(first.code).toBe(1);
      expect(first.stderr).toContain('No profile named "admin"');
      return lemni(['policy', 'publish', file, '--project', 'demo', '-m', 'free tests'], { env: env() });
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`Published ${file} as version 2 of the policy of demo; it is in force from the next action.\n`);
    expect(gateway.hits('POST', '/projects/p1/policy')[0]?.body).toEqual({ sourceText: '# keep me\nversion: 1\ncommands: { free: [npm test] }\n', comment: 'free tests' });
  });

  it('an invalid policy is reported with its paths and never sent', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-pol-'));
    dirs.push(dir);
    const file = path.join(dir, 'bad.yaml');
    writeFileSync(file, 'version: 1\ncommands: { default: maybe }\n');
    const r = await lemni(['policy', 'publish', file, '--project', 'demo'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('commands.default: must be one of allow, ask, deny');
    expect(r.stderr).toContain('nothing was published');
    expect(gateway.requests).toEqual([]);
  });
});

describe('lemni policy dry-run', () => {
  const decision = (effect: 'allow' | 'ask' | 'deny', rule: string, reason: string) => ({ effect, rule, reason });
  const change = (sessionId: string, toolCallId: string, subject: string, before: 'allow' | 'ask' | 'deny', after: 'allow' | 'ask' | 'deny') => ({
    sessionId,
    toolCallId,
    tool: 'Bash',
    subject,
    before: decision(before, 'commands.default', `\`${subject}\` is not named by any rule.`),
    after: decision(after, 'commands.readOnly', `\`${subject}\` only reads the working copy.`),
  });
  const draft = () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-pol-'));
    dirs.push(dir);
    const file = path.join(dir, 'draft.yaml');
    writeFileSync(file, 'version: 1\ncommands: { free: [git status] }\n');
    return file;
  };

  it('sends the draft and groups the decisions it would change, loosening first, repeats counted', async () => {
    gateway.dryRun = {
      sessionsReplayed: 3,
      toolCallsReplayed: 41,
      changes: [
        change('s1', 'c1', 'rm -rf build', 'allow', 'ask'),
        change('s1', 'c2', 'git status', 'ask', 'allow'),
        change('s2', 'c3', 'git status', 'ask', 'allow'),
        change('s2', 'c4', 'ls', 'ask', 'allow'),
        change('s2', 'c5', 'git log', 'ask', 'ask'),
      ],
    };
    const file = draft();
    const r = await lemni(['policy', 'dry-run', file, '--project', 'demo', '--sessions', '3'], { env: env() });
    expect(r.code).toBe(0);
    expect(gateway.hits('POST', '/projects/p1/policy/dry-run')[0]?.body).toEqual({ sourceText: 'version: 1\ncommands: { free: [git status] }\n', sessions: 3 });
    expect(r.stdout).toBe(
      [
        `Replayed 41 tool calls from 3 sessions of demo under ${file}: 5 decisions would change.`,
        '',
        'ask → allow (3)',
        '  TOOL  SUBJECT     WHERE             WITH THE DRAFT',
        '  Bash  git status  2× in 2 sessions  `git status` only reads the working copy.',
        '  Bash  ls          s2                `ls` only reads the working copy.',
        '',
        'ask, decided by another rule (1)',
        '  TOOL  SUBJECT  WHERE  WITH THE DRAFT',
        '  Bash  git log  s2     `git log` only reads the working copy.',
        '',
        'allow → ask (1)',
        '  TOOL  SUBJECT       WHERE  WITH THE DRAFT',
        '  Bash  rm -rf build  s1     `rm -rf build` only reads the working copy.',
        '',
      ].join('\n'),
    );
  });

  it('says so when nothing would change, and --json prints the answer as it came', async () => {
    gateway.dryRun = { sessionsReplayed: 1, toolCallsReplayed: 1, changes: [] };
    const file = draft();
    const r = await lemni(['policy', 'dry-run', file, '--project', 'demo'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`Replayed 1 tool call from 1 session of demo under ${file}: no decision would change.\n`);
    expect(gateway.hits('POST', '/projects/p1/policy/dry-run')[0]?.body).toEqual({ sourceText: 'version: 1\ncommands: { free: [git status] }\n', sessions: 20 });
    const json = await lemni(['policy', 'dry-run', file, '--project', 'demo', '--json'], { env: env() });
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(gateway.dryRun);
  });

  it.each([['0'], ['101'], ['ten'], ['2.5'], ['-1']])('refuses --sessions %s before anything is sent', async (n) => {
    const r = await lemni(['policy', 'dry-run', draft(), '--project', 'demo', '--sessions', n], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`--sessions must be a whole number from 1 to 100, not "${n}".`);
    expect(gateway.requests).toEqual([]);
  });

  it('an invalid draft is reported with its paths and never sent, and a project is required', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-pol-'));
    dirs.push(dir);
    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'version: 1\ncommands: { default: maybe }\n');
    const r = await lemni(['policy', 'dry-run', bad, '--project', 'demo'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('commands.default: must be one of allow, ask, deny');
    expect(r.stderr).toContain('nothing was replayed');
    const missing = await lemni(['policy', 'dry-run', path.join(dir, 'nope.yaml'), '--project', 'demo'], { env: env() });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Cannot read');
    expect(gateway.requests).toEqual([]);
    const noProject = await lemni(['policy', 'dry-run', draft()], { env: env() });
    expect(noProject.code).toBe(1);
    expect(noProject.stderr).toContain('Name the project with --project NAME.');
  });
});

describe('local policy commands', () => {
  it('work with global options in front and need no gateway or profile', async () => {
    const r = await lemni(['--profile', 'nowhere', 'policy', 'init'], { env: { HOME: home } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('version: 1');
    expect(gateway.requests).toEqual([]);
  });
});

describe('help and completion', () => {
  const commands = [
    [],
    ['login'],
    ['projects'],
    ['sessions'],
    ['sessions', 'revoke'],
    ['session', 'show'],
    ['stop'],
    ['approvals'],
    ['approvals', 'approve'],
    ['approvals', 'reject'],
    ['approvals', 'show'],
    ['apply'],
    ['audit', 'verify'],
    ['audit', 'export'],
    ['policy', 'init'],
    ['policy', 'check'],
    ['policy', 'explain'],
    ['policy', 'publish'],
    ['policy', 'dry-run'],
    ['agents'],
    ['repository'],
    ['repository', 'show'],
    ['repository', 'set'],
    ['repository', 'clear'],
    ['completion'],
  ];
  it.each(commands.map((c) => [c.join(' ') || 'lemni', c]))('%s --help shows an example', async (_name, args) => {
    const r = await lemni([...(args as string[]), '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Examples?:\n\s+\$ lemni/);
  });

  it('bash completion is valid bash and completes subcommands', async () => {
    const r = await lemni(['completion', 'bash']);
    expect(r.code).toBe(0);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lemni-comp-'));
    dirs.push(dir);
    const script = path.join(dir, 'lemni.bash');
    writeFileSync(script, r.stdout);
    expect(spawnSync('bash', ['-n', script]).status).toBe(0);
    const complete = (line: string) =>
      spawnSync('bash', ['-c', `source ${script}; COMP_WORDS=(${line}); COMP_CWORD=$((\${#COMP_WORDS[@]}-1)); _lemni; echo "\${COMPREPLY[*]}"`], { encoding: 'utf8' }).stdout.trim();
    expect(complete('lemni ses').split(' ').sort()).toEqual(['session', 'sessions']);
    expect(complete('lemni approvals a')).toBe('approve');
    expect(complete('lemni audit ""').split(' ')).toEqual(expect.arrayContaining(['verify', 'export']));
  });

  it('zsh completion is printed, and an unknown shell is refused', async () => {
    const r = await lemni(['completion', 'zsh']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^#compdef lemni/);
    expect(r.stdout).toContain('"policy") words=(init check explain publish dry-run');
    const zsh = spawnSync('zsh', ['-n'], { input: r.stdout });
    if (zsh.error === undefined) expect(zsh.status).toBe(0);
    const fish = await lemni(['completion', 'fish']);
    expect(fish.code).toBe(1);
    expect(fish.stderr).toBe('Completion is available for bash and zsh, not "fish".\n');
  });
});

describe('lemni agents', () => {
  it('lists discovered agents with warnings for ignored name fields and discarded namesakes', async () => {
    const dir = makeRepo({ 'README.md': 'x\n' });
    dirs.push(dir);
    mkdirSync(path.join(dir, '.lemniscate', 'agents'), { recursive: true });
    writeFileSync(path.join(dir, '.lemniscate', 'agents', 'reviewer.md'), '---\nname: other\ndescription: Reviews diffs\nmode: all\ntools: [Read, Search]\n---\nReview carefully.\n');
    writeFileSync(path.join(dir, '.lemniscate', 'agents', 'explore.md'), '---\ndescription: An impostor\n---\nDo anything.\n');
    mkdirSync(path.join(home, '.lemniscate', 'agents'), { recursive: true });
    writeFileSync(path.join(home, '.lemniscate', 'agents', 'reviewer.md'), '---\ndescription: Personal reviewer\n---\nMine.\n');
    const r = await lemni(['agents', '--json'], { cwd: dir, env: { HOME: home } });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { agents: { name: string; origin: string; description: string }[]; notices: { code: string }[] };
    expect(out.agents.map((a) => [a.name, a.origin])).toEqual([
      ['explore', 'builtin'],
      ['general', 'builtin'],
      ['reviewer', 'project'],
    ]);
    expect(out.notices.map((n) => n.code)).toEqual(expect.arrayContaining(['name_field_ignored', 'reserved_name', 'shadowed']));
    expect(r.stderr).toMatch(/warning: .*name/);
    expect(r.stderr).toMatch(/warning: .*explore.*discarded/);
  });

  const remote = (): ProjectAgentsView => ({
    projectId: 'p1',
    ref: 'main',
    commit: 'a'.repeat(40),
    agents: [
      { name: 'reviewer', description: 'Reviews diffs', mode: 'all', tools: ['Read', 'Search'], model: null, readOnly: true, origin: 'project', location: '.lemniscate/agents/reviewer.md' },
      { name: 'writer', description: 'Writes docs', mode: 'subagent', tools: null, model: 'scripted:/tmp/w.json', readOnly: false, origin: 'project', location: '.lemniscate/agents/writer.md' },
    ],
    notices: [{ level: 'warning', code: 'name_field_ignored', location: '.lemniscate/agents/reviewer.md', message: 'reviewer.md: the "name" field is ignored; the file name names the agent.' }],
  });

  it("--project lists the agents the gateway reads from the project's repository at its default ref, in the same table", async () => {
    gateway.projectAgents.set('p1', remote());
    // The local files are not read: a local agent must not show up.
    const dir = makeRepo({ 'README.md': 'x\n' });
    dirs.push(dir);
    mkdirSync(path.join(dir, '.lemniscate', 'agents'), { recursive: true });
    writeFileSync(path.join(dir, '.lemniscate', 'agents', 'local.md'), '---\ndescription: Only here\n---\nLocal.\n');
    for (const args of [
      ['agents', '--project', 'demo'],
      ['--project', 'demo', 'agents'],
    ]) {
      const r = await lemni(args, { cwd: dir, env: env() });
      expect(r).toEqual({
        code: 0,
        stdout: ['NAME      MODE      FROM     TOOLS        DESCRIPTION', 'reviewer  all       project  Read,Search  Reviews diffs', 'writer    subagent  project  inherited    Writes docs', ''].join(
          '\n',
        ),
        stderr: [
          'Agents defined in the repository of project demo at main (commit aaaaaaaaaaaa); general and explore are built in.',
          'warning: reviewer.md: the "name" field is ignored; the file name names the agent.',
          '',
        ].join('\n'),
      });
    }
    const json = await lemni(['agents', '--project', 'demo', '--json'], { cwd: dir, env: env() });
    expect(json.code).toBe(0);
    const { projectId: _projectId, ...shape } = remote();
    expect(JSON.parse(json.stdout)).toEqual(shape);
    expect(json.stderr).toBe('warning: reviewer.md: the "name" field is ignored; the file name names the agent.\n');
    expect(gateway.requests.filter((q) => q.route === 'projectAgents').map((q) => q.path)).toEqual(['/projects/p1/agents', '/projects/p1/agents', '/projects/p1/agents']);
  });

  it('a repository the gateway could not read says so; the notices say why', async () => {
    gateway.projectAgents.set('p1', {
      ...remote(),
      commit: null,
      agents: [],
      notices: [
        { level: 'error', code: 'unreadable_directory', location: '.lemniscate/agents', message: 'The repository could not be read: the host key of git.example.org is not in the known hosts.' },
      ],
    });
    const r = await lemni(['agents', '--project', 'demo'], { env: env() });
    expect(r).toEqual({
      code: 0,
      stdout: 'NAME  MODE  FROM  TOOLS  DESCRIPTION\n',
      stderr:
        'The repository of project demo could not be read at main: no agent of its own is listed.\nerror: The repository could not be read: the host key of git.example.org is not in the known hosts.\n',
    });
  });

  it('without --project, the local files as before, even when LEMNISCATE_PROJECT or the profile names a project', async () => {
    const dir = makeRepo({ 'README.md': 'x\n' });
    dirs.push(dir);
    const r = await lemni(['agents', '--json'], { cwd: dir, env: env({ LEMNISCATE_PROJECT: 'demo' }) });
    expect(r.code).toBe(0);
    expect(Object.keys(JSON.parse(r.stdout) as object)).toEqual(['agents', 'notices']);
    expect(gateway.requests).toEqual([]);
  });

  const refusals: [string, string[], () => void, string][] = [
    ['an unknown project', ['--project', 'nope'], () => undefined, 'Unknown project "nope": the projects you can use are demo (`lemni projects` lists them).'],
    [
      'a non-member',
      ['--project', 'demo'],
      () =>
        void (gateway.repositoryRefusals.agents = {
          status: 403,
          code: 'forbidden',
          message: 'As a developer you may not read this project: it is outside what your role and project memberships allow.',
        }),
      'As a developer you may not read this project: it is outside what your role and project memberships allow. (request req-1)',
    ],
  ];
  it.each(refusals)('--project: %s is one sentence, exit 1', async (_what, args, setup, sentence) => {
    setup();
    for (const json of [[], ['--json']]) {
      const r = await lemni(['agents', ...args, ...json], { env: env() });
      expect(r).toEqual({ code: 1, stdout: '', stderr: `${sentence}\n` });
    }
  });
});
