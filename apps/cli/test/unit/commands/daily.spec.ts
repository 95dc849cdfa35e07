import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { approvalView, FakeGateway, GOOD_TOKEN, sessionView, type Refusal } from '../../support/fake-gateway';
import { buildCli, lemni } from '../../support/run-bin';

/*
 * The CLI's daily commands against the fake gateway (which plays the routes as the gateway's services
 * answer them): the version, an unknown command, projects create/show/update, and ids given by their
 * first characters wherever a session or an approval id is taken.
 */

let gateway: FakeGateway;
let home: string;

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-home-'));
});
afterEach(async () => {
  await gateway.close();
  rmSync(home, { recursive: true, force: true });
});

const env = () => ({ HOME: home, LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN, TZ: 'UTC' });
const FORBIDDEN: Refusal = { status: 403, code: 'forbidden', message: 'As a developer you may not update this project.' };

describe('lemni --version and unknown commands', () => {
  const version = (JSON.parse(readFileSync(path.resolve(__dirname, '../../../package.json'), 'utf8')) as { version: string }).version;

  it.each([['--version'], ['-V']])('%s prints the version and exits 0 without a gateway', async (flag) => {
    const r = await lemni([flag], { env: { HOME: home } });
    expect(r).toEqual({ code: 0, stdout: `lemni ${version}\n`, stderr: '' });
  });

  it.each([
    ['sesions', 'sessions'],
    ['aprovals', 'approvals'],
    ['projcts', 'projects'],
    ['Sessions', 'sessions'],
    ['stpo', 'stop'],
  ])('"%s" is refused with exit 1 and suggests %s', async (typo, meant) => {
    const r = await lemni([typo], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: `lemni: unknown command "${typo}"; did you mean ${meant}? (\`lemni --help\` lists the commands)\n` });
    expect(gateway.requests).toEqual([]);
  });

  it('an instruction without -p is pointed to -p', async () => {
    const r = await lemni(['fix the failing test'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('lemni: "fix the failing test" is not a command; to run an instruction headless, pass it to -p: lemni -p "fix the failing test"\n');
    expect(gateway.requests).toEqual([]);
  });

  it('a word far from every command is refused without a guess', async () => {
    const r = await lemni(['xyzzy'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'lemni: unknown command "xyzzy" (`lemni --help` lists the commands; an instruction goes after -p).\n' });
  });

  it('no help text cites a requirement id', async () => {
    const commands = [
      [],
      ['login'],
      ['projects'],
      ['projects', 'create'],
      ['projects', 'show'],
      ['projects', 'update'],
      ['sessions'],
      ['session', 'show'],
      ['stop'],
      ['approvals'],
      ['apply'],
      ['audit', 'export'],
      ['audit', 'verify'],
    ];
    for (const c of commands) {
      const r = await lemni([...c, '--help'], { env: { HOME: home } });
      expect({ c, code: r.code }).toEqual({ c, code: 0 });
      expect({ c, ids: r.stdout.match(/\((?:AG|[GSPACTLX])\d+\)/g) }).toEqual({ c, ids: null });
    }
  });
});

describe('lemni projects create|show|update', () => {
  it('create sends the name, the absolute repository path and the ref, adds members by email, and says what it made', async () => {
    const cwd = mkdtempSync(path.join(os.tmpdir(), 'lemni-cwd-'));
    try {
      const r = await lemni(['projects', 'create', 'shop', '--repo', 'repos/shop.git', '--ref', 'develop', '--member', 'dev@example.org'], { env: env(), cwd });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const created = gateway.hits('POST', '/projects')[0]?.body;
      expect(created).toEqual({ name: 'shop', repositorySource: path.join(cwd, 'repos/shop.git'), defaultRef: 'develop' });
      expect(gateway.members.get('p2')).toEqual(['u2', 'u1']);
      expect(r.stdout).toBe(
        `Created project shop (p2) from ${path.join(cwd, 'repos/shop.git')} at develop; 1 member added. Until a policy is published, the built-in default applies: nothing runs without approval.\n`,
      );
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('create keeps a URL as it is and defaults the ref to main', async () => {
    const r = await lemni(['projects', 'create', 'api', '--repo', 'https://git.example.com/org/api.git', '--json'], { env: env() });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ name: 'api', repositorySource: 'https://git.example.com/org/api.git', defaultRef: 'main' });
  });

  it('create with an unknown member email makes nothing', async () => {
    const r = await lemni(['projects', 'create', 'shop', '--repo', '/srv/shop.git', '--member', 'nobody@example.org'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: "There is no user with the email nobody@example.org (an administrator creates accounts in the console's Users page).\n" });
    expect(gateway.hits('POST', '/projects')).toEqual([]);
  });

  it('create of an existing name is refused with the gateway’s sentence', async () => {
    const r = await lemni(['projects', 'create', 'demo', '--repo', '/srv/demo.git'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'A project named "demo" already exists. (request req-1)\n' });
  });

  it('create --runtime runsc publishes a policy that differs from the default only by the runtime', async () => {
    const r = await lemni(['projects', 'create', 'secure', '--repo', '/srv/secure.git', '--runtime', 'runsc'], { env: env() });
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('runtime runsc (policy version 2)');
    const published = gateway.policies.get('p2');
    expect(published?.sourceText).toMatch(/runtime: runsc/);
    expect(published?.comment).toBe('sandbox runtime set to runsc (lemni projects update)');
    const init = await lemni(['policy', 'init'], { env: { HOME: home } });
    expect(published?.sourceText).toBe(init.stdout.replace(/runtime: runc/, 'runtime: runsc'));
  });

  it('create for a developer is the gateway’s refusal, nothing else', async () => {
    gateway.projectRefusal = FORBIDDEN;
    const r = await lemni(['projects', 'create', 'x', '--repo', '/srv/x.git'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: `${FORBIDDEN.message} (request req-1)\n` });
  });

  it('show prints repository, ref, runtime and members', async () => {
    const r = await lemni(['projects', 'show', 'demo'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Project     demo\n');
    expect(r.stdout).toContain('Repository  /nonexistent/demo.git\n');
    expect(r.stdout).toContain('Default ref main\n');
    expect(r.stdout).toContain('Runtime     runc (the built-in default policy)\n');
    expect(r.stdout).toContain('Members     2\n  alice@example.org  admin  (Alice)\n  dev@example.org  developer  (Dev)\n');
  });

  it('show for someone who may not list members says so instead of failing', async () => {
    gateway.projectRefusal = FORBIDDEN;
    const r = await lemni(['projects', 'show', 'demo'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Members     (visible to the project’s administrators)');
  });

  it('show of an unknown project names the ones there are', async () => {
    const r = await lemni(['projects', 'show', 'nope'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'Unknown project "nope": the projects you can use are demo (`lemni projects` lists them).\n' });
  });

  it('update changes the ref, the runtime and members, and says each change', async () => {
    gateway.members.set('p1', ['u2']);
    const r = await lemni(['projects', 'update', 'demo', '--ref', 'release', '--runtime', 'runsc', '--add-member', 'DEV@example.org'], { env: env() });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('Project demo: default ref main → release; runtime runsc (policy version 2); dev@example.org added.\n');
    expect(gateway.hits('POST', '/projects/p1')[0]?.body).toEqual({ defaultRef: 'release' });
    expect(gateway.members.get('p1')).toEqual(['u2', 'u1']);
  });

  it('update --remove-member of a non-member is the gateway’s sentence', async () => {
    gateway.members.set('p1', ['u2']);
    const r = await lemni(['projects', 'update', 'demo', '--remove-member', 'dev@example.org'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'User u1 is not a member of project "demo". (request req-1)\n' });
  });

  it('update with nothing to change is a usage error', async () => {
    const r = await lemni(['projects', 'update', 'demo'], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'Say what to change: --repo, --ref, --runtime, --add-member or --remove-member.\n' });
    expect(gateway.requests).toEqual([]);
  });

  it('update --repo is refused while repository access is set', async () => {
    gateway.repositoryAccess.set('p1', { access: { knownHosts: 'h ssh-ed25519 AAAA' }, keyFingerprint: null, updatedAt: new Date().toISOString(), updatedBy: 'u2' });
    const r = await lemni(['projects', 'update', 'demo', '--repo', '/srv/other.git'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('has repository access set');
  });
});

describe('lemni sessions --waiting and --mine', () => {
  const lastList = () =>
    Object.fromEntries(
      new URLSearchParams(
        gateway.requests
          .filter((r) => r.method === 'GET' && r.path.startsWith('/sessions?'))
          .at(-1)
          ?.path.split('?')[1] ?? '',
      ),
    );
  beforeEach(() => {
    gateway.sessions.set('s-wait', sessionView('s-wait', { instruction: 'needs an answer', status: 'running' }));
    gateway.sessions.set('s-other', sessionView('s-other', { instruction: 'someone else', userId: 'u2', status: 'running' }));
    gateway.sessions.set('s-done', sessionView('s-done', { instruction: 'finished', status: 'completed', endedAt: new Date().toISOString() }));
    gateway.approvals = [approvalView('ap-1', { sessionId: 's-wait' }), approvalView('ap-2', { sessionId: 's-wait', state: 'approved' })];
  });

  it('--waiting lists only the sessions waiting for a person, each saying how many answers it awaits', async () => {
    const r = await lemni(['sessions', '--waiting'], { env: env() });
    expect(r.code).toBe(0);
    expect(lastList()).toMatchObject({ waiting: 'true' });
    const rows = r.stdout.trim().split('\n').slice(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(/^s-wait\s+running, 1 waiting\s/);
  });

  it('--waiting with nothing waiting says so', async () => {
    gateway.approvals = [];
    const r = await lemni(['sessions', '--waiting'], { env: env() });
    expect(r.stdout).toBe('No session is waiting for a person.\n');
  });

  it('--mine asks for the sessions of the person signed in', async () => {
    const r = await lemni(['sessions', '--mine'], { env: env() });
    expect(lastList()).toMatchObject({ userId: 'u1' });
    expect(r.stdout).toContain('s-wait');
    expect(r.stdout).not.toContain('s-other');
  });
});

describe('ids by their first characters', () => {
  const S1 = '8a7d1c2e-0000-4000-8000-000000000001';
  const S2 = '8a7d9f00-0000-4000-8000-000000000002';
  const S3 = '3b2c0000-0000-4000-8000-000000000003';
  beforeEach(() => {
    for (const [id, instruction] of [
      [S1, 'fix the login bug'],
      [S2, 'write the release notes'],
      [S3, 'bump the version'],
    ] as const)
      gateway.sessions.set(id, sessionView(id, { instruction, status: 'completed', endedAt: new Date().toISOString() }));
    gateway.approvals = [approvalView('a0b1c2d3-0000-4000-8000-00000000000a', { sessionId: S3 }), approvalView('a0b1ffff-0000-4000-8000-00000000000b', { sessionId: S3 })];
  });

  it('a unique prefix names the session for show, stop and apply’s lookup', async () => {
    const show = await lemni(['session', 'show', '3b2c'], { env: env() });
    expect(show.stderr).toBe('');
    expect(show.stdout).toContain(`Session   ${S3}`);
    const stop = await lemni(['stop', '3b2c0000'], { env: env() });
    expect(stop.stdout).toContain(`Session ${S3} is stopped`);
    expect(gateway.hits('POST', `/sessions/${S3}/stop`)).toHaveLength(1);
  });

  it('an ambiguous prefix names the candidates and changes nothing', async () => {
    const r = await lemni(['stop', '8a7d'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`8a7d is ambiguous: it starts the ids of 2 sessions you can see; give more characters:\n  ${S1}  "fix the login bug"\n  ${S2}  "write the release notes"\n`);
    expect(gateway.requests.filter((q) => q.method === 'POST')).toEqual([]);
  });

  it('a prefix nobody has, and one too short, are explained', async () => {
    const none = await lemni(['session', 'show', 'ffff'], { env: env() });
    expect(none).toEqual({ code: 1, stdout: '', stderr: 'No session you can see has an id starting with ffff (`lemni sessions` lists them).\n' });
    const short = await lemni(['session', 'show', '8a7'], { env: env() });
    expect(short).toEqual({ code: 1, stdout: '', stderr: 'No session 8a7 is visible to you; a short id needs at least its first 4 characters (`lemni sessions` lists them).\n' });
  });

  it('a whole id is used as it is, without a lookup', async () => {
    const r = await lemni(['session', 'show', S1], { env: env() });
    expect(r.code).toBe(0);
    expect(gateway.requests.filter((q) => q.path.startsWith('/sessions?'))).toEqual([]);
  });

  it('approvals take prefixes too, and say who answered by email', async () => {
    const ambiguous = await lemni(['approvals', 'approve', 'a0b1'], { env: env() });
    expect(ambiguous.stderr).toMatch(/^a0b1 is ambiguous: it starts the ids of 2 approvals you can see/);
    const ok = await lemni(['approvals', 'approve', 'a0b1c2'], { env: env() });
    expect(ok.stderr).toBe('');
    expect(ok.stdout).toBe('Approved a0b1c2d3-0000-4000-8000-00000000000a (command: npm install left-pad).\n');
    gateway.approvals[1] = {
      ...(gateway.approvals[1] as ReturnType<typeof approvalView>),
      state: 'approved',
      decidedBy: 'u2',
      decidedByEmail: 'alice@example.org',
      decidedAt: new Date().toISOString(),
    };
    const shown = await lemni(['approvals', 'show', 'a0b1ff'], { env: env() });
    expect(shown.stdout).toContain('approved by alice@example.org');
    expect(shown.stdout).not.toContain('Reason:');
  });

  it('approvals show names the rule once: not again after a sentence that already ends with it', async () => {
    gateway.approvals[1] = {
      ...(gateway.approvals[1] as ReturnType<typeof approvalView>),
      flags: { thirdParty: [], policy: { rule: 'tools.write', reason: 'An edit to `src/calc.js` is shown to a person as a diff before it touches the working copy (tools.write).' } },
    };
    const shown = await lemni(['approvals', 'show', 'a0b1ff', '--no-pager'], { env: env() });
    expect(shown.stdout).toContain('Why it asks: An edit to `src/calc.js` is shown to a person as a diff before it touches the working copy (tools.write).\n');
  });

  it("approvals show says why a request was rejected, in the person's words, and why one expired", async () => {
    const r = await lemni(['approvals', 'reject', 'a0b1c2', '--reason', 'touches CI'], { env: env() });
    expect(r.stderr).toBe('');
    const shown = await lemni(['approvals', 'show', 'a0b1c2'], { env: env() });
    expect(shown.stdout).toMatch(/: rejected[\s\S]*\nReason: touches CI\n/);
    gateway.approvals[1] = { ...(gateway.approvals[1] as ReturnType<typeof approvalView>), state: 'expired', reason: 'nobody answered within 15 minutes' };
    const expired = await lemni(['approvals', 'show', 'a0b1ff'], { env: env() });
    expect(expired.stdout).toContain('\nExpired: nobody answered within 15 minutes\n');
  });

  it('--session filters take a prefix', async () => {
    const r = await lemni(['approvals', '--session', '3b2c', '--json'], { env: env() });
    expect(r.stderr).toBe('');
    expect(gateway.requests.some((q) => q.path === `/approvals?state=pending&sessionId=${S3}`)).toBe(true);
  });
});
