import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RepositoryAccessView, type ProjectView } from '@lemniscate/contracts';
import type { CliContext } from '../../../src/context';
import type { Prompter } from '../../../src/interactive/prompter';
import { main } from '../../../src/main';
import { PASSPHRASE_SENTENCE } from '../../../src/commands/repository';
import { FakeGateway, GATEWAY_PASSPHRASE_SENTENCE, GOOD_TOKEN, fakeKeyFingerprint, type Refusal } from '../../support/fake-gateway';
import { buildCli, lemni, repo, type BinResult } from '../../support/run-bin';
import { keyBodyLines, openSshKey } from '../../support/ssh-keys';

/*
 * `lemni repository show|set|clear` against the fake gateway (which plays the routes as
 * apps/gateway/src/projects/repository-access.service.ts answers them): every command's output in
 * text and JSON, every refusal (the CLI's own, before anything is sent, and the gateway's), and, in
 * every one of those paths, that neither the password nor any line of the private key appears in
 * anything the CLI prints. The terminal paths (a password asked without echo, a confirmation) run
 * in-process with a scripted prompter.
 */

const SECRET = 'tok-S3cr3t-never-printed';
const KEY = openSshKey();
const ENCRYPTED_KEY = openSshKey({ passphrase: true });
const FINGERPRINT = fakeKeyFingerprint(KEY.privateKey) as string;
const FORBIDDEN: Refusal = { status: 403, code: 'forbidden', message: 'As a developer you may not update this project: it is outside what your role and project memberships allow.' };
const FORBIDDEN_READ: Refusal = { status: 403, code: 'forbidden', message: 'As a developer you may not read this project: it is outside what your role and project memberships allow.' };
const KNOWN_HOSTS = [
  '# ssh-keyscan -p 2222 git.example.org',
  '[git.example.org]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
  '[git.example.org]:2222 ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEmKSENjQEezOmxkZMy7opKgwFB9nkt5YRrYMjNuG5N87uRgg6CLrbo5wAdT/y6v0mKV9U2W',
  '|1|JfKTdBh7rNbXkVAQCRp4OQoPfmI=|USECr3SWf1JUPsms5AqfD5QfxkM= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
  '',
].join('\n');

const PROJECTS: ProjectView[] = [
  { id: 'p1', name: 'demo', repositorySource: '/nonexistent/demo.git', defaultRef: 'main', createdAt: '2026-01-01T00:00:00.000Z' },
  { id: 'p2', name: 'web', repositorySource: 'https://git.example.org/team/web.git', defaultRef: 'main', createdAt: '2026-01-01T00:00:00.000Z' },
  { id: 'p3', name: 'api', repositorySource: 'ssh://git@git.example.org:2222/team/api.git', defaultRef: 'release', createdAt: '2026-01-01T00:00:00.000Z' },
  { id: 'p4', name: 'lib', repositorySource: 'git@github.com:team/lib.git', defaultRef: 'main', createdAt: '2026-01-01T00:00:00.000Z' },
];

let gateway: FakeGateway;
let home: string;
let files: { key: string; encryptedKey: string; notAKey: string; corruptKey: string; bigKey: string; knownHosts: string; badKnownHosts: string; ca: string; dir: string; caPem: string };
let caDir: string;
let caPem: string;

beforeAll(() => {
  buildCli();
  // A CA certificate as an organisation has one (openssl, as deploy/certs/make-certs.sh uses).
  caDir = mkdtempSync(path.join(os.tmpdir(), 'lemni-ca-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      path.join(caDir, 'ca-key.pem'),
      '-out',
      path.join(caDir, 'ca.pem'),
      '-days',
      '30',
      '-subj',
      '/CN=Example Root CA',
    ],
    { stdio: 'pipe' },
  );
  caPem = readFileSync(path.join(caDir, 'ca.pem'), 'utf8');
}, 180_000);
afterAll(() => rmSync(caDir, { recursive: true, force: true }));

beforeEach(async () => {
  gateway = await new FakeGateway().start();
  gateway.projects = PROJECTS.map((p) => ({ ...p }));
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-home-'));
  const put = (name: string, text: string) => {
    const file = path.join(home, name);
    writeFileSync(file, text, { mode: 0o600 });
    return file;
  };
  // The markers and the header are right (no passphrase), but the key is cut short: the CLI cannot tell; the gateway's ssh-keygen refuses it.
  const u32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
  const cut = Buffer.concat([Buffer.from('openssh-key-v1\0', 'latin1'), u32(4), Buffer.from('none'), u32(4), Buffer.from('none'), u32(0), u32(1), u32(1000), Buffer.from('short')]);
  files = {
    key: put('deploy_key', KEY.privateKey),
    encryptedKey: put('encrypted_key', ENCRYPTED_KEY.privateKey),
    notAKey: put('not_a_key', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl deploy@example\n'),
    corruptKey: put('corrupt_key', `-----BEGIN OPENSSH PRIVATE KEY-----\n${cut.toString('base64')}\n-----END OPENSSH PRIVATE KEY-----\n`),
    bigKey: put('big_key', `${KEY.privateKey}${'#'.repeat(16_384)}`),
    knownHosts: put('known_hosts', KNOWN_HOSTS),
    badKnownHosts: put('bad_known_hosts', 'git.example.org is our server\n'),
    ca: put('ca.pem', caPem),
    dir: path.join(home, 'a-directory'),
    caPem,
  };
  mkdirSync(files.dir);
});
afterEach(async () => {
  await gateway.close();
  rmSync(home, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({ HOME: home, LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN, TZ: 'UTC', ...extra });

/** Neither the password nor any line of a private key is in anything the CLI printed. */
function expectNoSecret(r: Pick<BinResult, 'stdout' | 'stderr'>): void {
  const printed = `${r.stdout}\n${r.stderr}`;
  expect(printed).not.toContain(SECRET);
  for (const line of [...keyBodyLines(KEY.privateKey), ...keyBodyLines(ENCRYPTED_KEY.privateKey)]) expect(printed).not.toContain(line);
}

const accessPosts = () => gateway.requests.filter((q) => q.route === 'setRepositoryAccess');

const UPDATED = /^Updated {6}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ d ago\) by user u1$|^Updated {6}\d\d:\d\d:\d\d \(\d+ s ago\) by user u1$/m;

describe('lemni repository show', () => {
  it('a local repository with nothing set: the block, and the JSON view', async () => {
    const r = await lemni(['repository', 'show', '--project', 'demo'], { env: env() });
    expect(r).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'Project      demo',
        'Source       /nonexistent/demo.git',
        'Transport    a local path on the exec-host',
        'Default ref  main',
        'Credential   none (a local path on the exec-host is read without one)',
        'Known hosts  none',
        'CA           none',
        'Updated      never (no access set)',
        '',
      ].join('\n'),
    });
    const json = await lemni(['repository', 'show', '--project', 'demo', '--json'], { env: env() });
    expect(RepositoryAccessView.parse(JSON.parse(json.stdout))).toEqual({
      projectId: 'p1',
      repositorySource: '/nonexistent/demo.git',
      transport: 'local',
      defaultRef: 'main',
      credential: null,
      knownHosts: null,
      caPem: null,
      updatedAt: null,
      updatedBy: null,
    });
  });

  it('an https repository: the user name and the CA, never the password (there is none to show)', async () => {
    gateway.repositoryAccess.set('p2', {
      access: { credential: { kind: 'https', username: 'ci-bot', password: SECRET }, caPem: files.caPem },
      keyFingerprint: null,
      updatedAt: '2026-01-05T14:02:11.000Z',
      updatedBy: 'u1',
    });
    const r = await lemni(['repository', 'show', '--project', 'web'], { env: env() });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const lines = r.stdout.split('\n');
    expect(lines.slice(0, 5)).toEqual([
      'Project      web',
      'Source       https://git.example.org/team/web.git',
      'Transport    https',
      'Default ref  main',
      'Credential   https, user name ci-bot; the password or token is sealed, never shown',
    ]);
    expect(lines[5]).toBe('Known hosts  none');
    expect(lines[6]).toMatch(/^CA {11}given: 1 certificate \(CN=Example Root CA, valid until \d{4}-\d\d-\d\d\)$/);
    expect(lines[7]).toMatch(/^Updated {6}2026-01-05 14:02:11 \(\d+ d ago\) by user u1$/);
    expectNoSecret(r);
    const json = await lemni(['repository', 'show', '--project', 'web', '--json'], { env: env() });
    expect(JSON.parse(json.stdout)).toMatchObject({ transport: 'https', credential: { kind: 'https', username: 'ci-bot', keyFingerprint: null }, caPem: files.caPem });
    expectNoSecret(json);
  });

  it('an ssh repository: the key fingerprint and the known host keys, counted and named (a hashed host is counted, not named)', async () => {
    gateway.repositoryAccess.set('p3', {
      access: { credential: { kind: 'ssh', privateKey: KEY.privateKey }, knownHosts: KNOWN_HOSTS },
      keyFingerprint: FINGERPRINT,
      updatedAt: new Date().toISOString(),
      updatedBy: 'u1',
    });
    const r = await lemni(['repository', 'show', '--project', 'api'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Credential   ssh key ${FINGERPRINT}; the key is sealed, never shown\n`);
    expect(r.stdout).toContain('Known hosts  3 host keys for [git.example.org]:2222, a hashed host\n');
    expect(r.stdout).toContain('Transport    ssh\nDefault ref  release\n');
    expect(r.stdout).toMatch(UPDATED);
    expectNoSecret(r);
  });

  it('resolves the project as the other commands do: --project before the command, LEMNISCATE_PROJECT, the profile', async () => {
    const before = await lemni(['--project', 'web', 'repository', 'show', '--json'], { env: env() });
    expect(JSON.parse(before.stdout)).toMatchObject({ projectId: 'p2' });
    const fromEnv = await lemni(['repository', 'show', '--json'], { env: env({ LEMNISCATE_PROJECT: 'api' }) });
    expect(JSON.parse(fromEnv.stdout)).toMatchObject({ projectId: 'p3' });
    mkdirSync(path.join(home, '.lemniscate'), { mode: 0o700 });
    writeFileSync(path.join(home, '.lemniscate', 'config.yaml'), `profiles:\n  admin: { gateway: ${gateway.url}, token: ${GOOD_TOKEN}, project: lib }\ndefaultProfile: admin\n`, { mode: 0o600 });
    const fromProfile = await lemni(['repository', 'show', '--json'], { env: { HOME: home } });
    expect(JSON.parse(fromProfile.stdout)).toMatchObject({ projectId: 'p4' });
    // A project id works too, as everywhere.
    const byId = await lemni(['repository', 'show', '--project', 'p2', '--json'], { env: env() });
    expect(JSON.parse(byId.stdout)).toMatchObject({ projectId: 'p2' });
  });

  const refusals: [string, string[], Record<string, string>, () => void, string][] = [
    ['no project', ['repository', 'show'], {}, () => undefined, 'Name the project with --project NAME.'],
    ['an unknown project', ['repository', 'show', '--project', 'nope'], {}, () => undefined, 'Unknown project "nope": the projects you can use are demo, web, api, lib (`lemni projects` lists them).'],
    ['a non-member', ['repository', 'show', '--project', 'web'], {}, () => (gateway.repositoryRefusals.read = FORBIDDEN_READ), `${FORBIDDEN_READ.message} (request req-1)`],
    [
      'no gateway',
      ['repository', 'show', '--project', 'web'],
      { LEMNISCATE_GATEWAY: 'http://127.0.0.1:1' },
      () => undefined,
      'Cannot reach the gateway at http://127.0.0.1:1: is it running? (`npm start`)',
    ],
  ];
  it.each(refusals)('%s: one sentence, exit 1, nothing on stdout', async (_what, args, extra, setup, sentence) => {
    setup();
    for (const json of [false, true]) {
      const r = await lemni([...args, ...(json ? ['--json'] : [])], { env: env(extra) });
      expect(r).toEqual({ code: 1, stdout: '', stderr: `${sentence}\n` });
    }
  });
});

interface SetSuccess {
  what: string;
  project: string;
  args: () => string[];
  input?: string;
  /** The body the gateway must have received. */
  sent: () => unknown;
  /** Lines the printed view holds. */
  shows: () => string[];
  stored: string;
}

const SEALED_PASSWORD =
  'The password or token is stored sealed (encrypted) by the gateway and is never shown again, to anyone; `lemni repository set` replaces it, `lemni repository clear` deletes it.';
const SEALED_KEY = 'The private key is stored sealed (encrypted) by the gateway and is never shown again, to anyone; `lemni repository set` replaces it, `lemni repository clear` deletes it.';

const successes: SetSuccess[] = [
  {
    what: 'https, the token on standard input (its newline dropped)',
    project: 'web',
    args: () => ['--https-user', 'ci-bot', '--password-stdin'],
    input: `${SECRET}\n`,
    sent: () => ({ credential: { kind: 'https', username: 'ci-bot', password: SECRET } }),
    shows: () => ['Credential   https, user name ci-bot; the password or token is sealed, never shown', 'CA           none'],
    stored: SEALED_PASSWORD,
  },
  {
    what: 'https with a CA, the token on standard input with a CRLF',
    project: 'web',
    args: () => ['--https-user', 'ci-bot', '--password-stdin', '--ca', files.ca],
    input: `${SECRET}\r\n`,
    sent: () => ({ credential: { kind: 'https', username: 'ci-bot', password: SECRET }, caPem: files.caPem }),
    shows: () => ['Credential   https, user name ci-bot; the password or token is sealed, never shown'],
    stored: SEALED_PASSWORD,
  },
  {
    what: 'ssh:// with a key and known hosts',
    project: 'api',
    args: () => ['--ssh-key', files.key, '--known-hosts', files.knownHosts],
    sent: () => ({ credential: { kind: 'ssh', privateKey: KEY.privateKey }, knownHosts: KNOWN_HOSTS }),
    shows: () => [`Credential   ssh key ${FINGERPRINT}; the key is sealed, never shown`, 'Known hosts  3 host keys for [git.example.org]:2222, a hashed host'],
    stored: SEALED_KEY,
  },
  {
    what: 'user@host:path with a key and known hosts',
    project: 'lib',
    args: () => ['--ssh-key', files.key, '--known-hosts', files.knownHosts],
    sent: () => ({ credential: { kind: 'ssh', privateKey: KEY.privateKey }, knownHosts: KNOWN_HOSTS }),
    shows: () => [`Credential   ssh key ${FINGERPRINT}; the key is sealed, never shown`],
    stored: SEALED_KEY,
  },
  {
    what: 'a public ssh:// repository: known hosts only',
    project: 'api',
    args: () => ['--no-credential', '--known-hosts', files.knownHosts],
    sent: () => ({ knownHosts: KNOWN_HOSTS }),
    shows: () => ['Credential   none', 'Known hosts  3 host keys for [git.example.org]:2222, a hashed host'],
    stored: 'No credential is stored: the platform fetches the repository of api without one.',
  },
  {
    what: 'a public https repository: a CA only',
    project: 'web',
    args: () => ['--no-credential', '--ca', files.ca],
    sent: () => ({ caPem: files.caPem }),
    shows: () => ['Credential   none'],
    stored: 'No credential is stored: the platform fetches the repository of web without one.',
  },
];

describe.each(successes.flatMap((s) => (['text', 'json'] as const).map((format) => ({ ...s, format }))))('lemni repository set: $what ($format)', (c) => {
  it('sends exactly the access, prints the view and says the credential is sealed, never the secret', async () => {
    const r = await lemni(['repository', 'set', '--project', c.project, ...c.args(), ...(c.format === 'json' ? ['--json'] : [])], { env: env(), input: c.input });
    expect(r.code).toBe(0);
    expect(accessPosts().map((q) => q.body)).toEqual([c.sent()]);
    if (c.format === 'json') {
      const view = RepositoryAccessView.parse(JSON.parse(r.stdout));
      expect(view.projectId).toBe(PROJECTS.find((p) => p.name === c.project)?.id);
      expect(r.stderr).toBe(`${c.stored}\n`);
    } else {
      expect(r.stderr).toBe('');
      expect(r.stdout.startsWith(`Project      ${c.project}\n`)).toBe(true);
      for (const line of c.shows()) expect(r.stdout.split('\n')).toContain(line);
      expect(r.stdout).toMatch(UPDATED);
      expect(r.stdout.endsWith(`\n\n${c.stored}\n`)).toBe(true);
    }
    expectNoSecret(r);
    // What show prints next is what set printed.
    if (c.format === 'text') {
      const shown = await lemni(['repository', 'show', '--project', c.project], { env: env() });
      const steady = (text: string) => text.replace(/^Updated .*$/m, 'Updated');
      expect(steady(`${shown.stdout}\n${c.stored}\n`)).toBe(steady(r.stdout));
    }
  });
});

interface SetRefusal {
  what: string;
  args: () => string[];
  input?: string;
  env?: Record<string, string>;
  setup?: () => void;
  stderr: () => string;
  /** Whether the access reached the gateway (a refusal of the gateway's) or was refused before. */
  sent: boolean;
  only?: boolean;
}

const NO_STDIN = 'Standard input held no password or token; nothing was set. Pipe it in: `printf \'%s\' "$TOKEN" | lemni repository set --https-user USER --password-stdin`.';
const setRefusals: SetRefusal[] = [
  {
    what: 'no credential option',
    args: () => ['--project', 'web'],
    stderr: () =>
      'Say how the platform authenticates to the repository: --https-user USER (the password or token is then asked for, or read with --password-stdin), --ssh-key FILE, or --no-credential for a public repository.',
    sent: false,
  },
  {
    what: 'two credentials',
    args: () => ['--project', 'api', '--https-user', 'ci-bot', '--ssh-key', files.key],
    stderr: () => 'Give one of --https-user, --ssh-key and --no-credential, not --https-user and --ssh-key.',
    sent: false,
  },
  {
    what: 'a key and --no-credential',
    args: () => ['--project', 'api', '--ssh-key', files.key, '--no-credential', '--known-hosts', files.knownHosts],
    stderr: () => 'Give one of --https-user, --ssh-key and --no-credential, not --ssh-key and --no-credential.',
    sent: false,
  },
  {
    what: '--password-stdin without --https-user',
    args: () => ['--project', 'web', '--no-credential', '--password-stdin'],
    input: SECRET,
    stderr: () => "--password-stdin goes with --https-user USER: it reads that user's password or token.",
    sent: false,
  },
  { what: 'no project', args: () => ['--https-user', 'ci-bot', '--password-stdin'], input: SECRET, stderr: () => 'Name the project with --project NAME.', sent: false },
  {
    what: 'an unknown project',
    args: () => ['--project', 'nope', '--https-user', 'ci-bot', '--password-stdin'],
    input: SECRET,
    stderr: () => 'Unknown project "nope": the projects you can use are demo, web, api, lib (`lemni projects` lists them).',
    sent: false,
  },
  {
    what: 'a non-administrator (the https token)',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin'],
    input: SECRET,
    setup: () => (gateway.repositoryRefusals.set = FORBIDDEN),
    stderr: () => `${FORBIDDEN.message} (request req-1)`,
    sent: true,
  },
  {
    what: 'a non-administrator (the ssh key)',
    args: () => ['--project', 'api', '--ssh-key', files.key, '--known-hosts', files.knownHosts],
    setup: () => (gateway.repositoryRefusals.set = FORBIDDEN),
    stderr: () => `${FORBIDDEN.message} (request req-1)`,
    sent: true,
  },
  { what: 'empty standard input', args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin'], input: '', stderr: () => NO_STDIN, sent: false },
  { what: 'a lone newline on standard input', args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin'], input: '\n', stderr: () => NO_STDIN, sent: false },
  {
    what: 'two lines on standard input',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin'],
    input: `${SECRET}\n${SECRET}\n`,
    stderr: () => 'The repository access of project "web" cannot be set: the password or token must be one line.',
    sent: false,
  },
  {
    what: 'no terminal and no --password-stdin',
    args: () => ['--project', 'web', '--https-user', 'ci-bot'],
    input: SECRET,
    stderr: () => 'No terminal to ask for the password or token: pipe it on standard input with --password-stdin (it is never taken as an argument, which other users of the machine can see).',
    sent: false,
  },
  {
    what: 'a password given as an option (there is no such option)',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password', SECRET],
    stderr: () => "error: unknown option '--password'",
    sent: false,
  },
  {
    what: 'a password given as --password=VALUE (the value is not repeated)',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', `--password=${SECRET}`],
    stderr: () => "error: unknown option '--password=…'",
    sent: false,
  },
  {
    what: 'a password given as an argument',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', SECRET],
    stderr: () => "error: too many arguments for 'set'. Expected 0 arguments but got 1.",
    sent: false,
  },
  {
    what: 'ssh:// without known hosts',
    args: () => ['--project', 'api', '--ssh-key', files.key],
    stderr: () =>
      'The repository of project "api" is reached over SSH, and the platform never trusts a host key on first use: give the server\'s host keys with --known-hosts FILE (`ssh-keyscan -p 2222 git.example.org > known_hosts` writes them; compare them with the fingerprints the server\'s administrator publishes).',
    sent: false,
  },
  {
    what: 'user@host:path without known hosts',
    args: () => ['--project', 'lib', '--no-credential'],
    stderr: () =>
      'The repository of project "lib" is reached over SSH, and the platform never trusts a host key on first use: give the server\'s host keys with --known-hosts FILE (`ssh-keyscan -p 22 github.com > known_hosts` writes them; compare them with the fingerprints the server\'s administrator publishes).',
    sent: false,
  },
  {
    what: 'a key file that does not exist',
    args: () => ['--project', 'api', '--ssh-key', `${files.key}.nope`, '--known-hosts', files.knownHosts],
    stderr: () => `Cannot read the SSH key ${files.key}.nope: there is no such file.`,
    sent: false,
  },
  {
    what: 'a key that is a directory',
    args: () => ['--project', 'api', '--ssh-key', files.dir, '--known-hosts', files.knownHosts],
    stderr: () => `Cannot read the SSH key ${files.dir}: it is a directory.`,
    sent: false,
  },
  {
    what: 'a known hosts file that does not exist',
    args: () => ['--project', 'api', '--ssh-key', files.key, '--known-hosts', path.join(home, 'missing')],
    stderr: () => `Cannot read the known hosts file ${path.join(home, 'missing')}: there is no such file.`,
    sent: false,
  },
  {
    what: 'a CA file that does not exist',
    args: () => ['--project', 'web', '--no-credential', '--ca', path.join(home, 'missing.pem')],
    stderr: () => `Cannot read the CA certificate file ${path.join(home, 'missing.pem')}: there is no such file.`,
    sent: false,
  },
  {
    what: 'a key file larger than the gateway takes',
    args: () => ['--project', 'api', '--ssh-key', files.bigKey, '--known-hosts', files.knownHosts],
    stderr: () => `The SSH key ${files.bigKey} is larger than 16384 bytes, the most the gateway takes.`,
    sent: false,
  },
  { what: 'a passphrase-protected key', args: () => ['--project', 'api', '--ssh-key', files.encryptedKey, '--known-hosts', files.knownHosts], stderr: () => PASSPHRASE_SENTENCE, sent: false },
  {
    what: 'a public key given as the private key',
    args: () => ['--project', 'api', '--ssh-key', files.notAKey, '--known-hosts', files.knownHosts],
    stderr: () => `The repository access of project "api" cannot be set: the SSH key in ${files.notAKey} must be an OpenSSH private key (-----BEGIN OPENSSH PRIVATE KEY-----).`,
    sent: false,
  },
  {
    what: "a key only the gateway's ssh-keygen finds unreadable (the gateway's sentence)",
    args: () => ['--project', 'api', '--ssh-key', files.corruptKey, '--known-hosts', files.knownHosts],
    stderr: () => `${GATEWAY_PASSPHRASE_SENTENCE} (request req-1)`,
    sent: true,
  },
  {
    what: 'known hosts that hold no host key',
    args: () => ['--project', 'api', '--ssh-key', files.key, '--known-hosts', files.badKnownHosts],
    stderr: () =>
      `The repository access of project "api" cannot be set: the known hosts in ${files.badKnownHosts} must hold at least one known_hosts line ("host key-type key", as ssh-keyscan prints it).`,
    sent: false,
  },
  {
    what: 'a CA file that is not a certificate',
    args: () => ['--project', 'web', '--no-credential', '--ca', files.knownHosts],
    stderr: () => `The repository access of project "web" cannot be set: the CA certificate in ${files.knownHosts} must be one or more CA certificates in PEM form (-----BEGIN …-----).`,
    sent: false,
  },
  {
    what: 'a user name with ":"',
    args: () => ['--project', 'web', '--https-user', `ci:${SECRET}`, '--password-stdin'],
    input: SECRET,
    stderr: () => 'The repository access of project "web" cannot be set: the user name given with --https-user must not contain spaces or ":".',
    sent: false,
  },
  {
    what: 'an SSH key for an https repository',
    args: () => ['--project', 'web', '--ssh-key', files.key],
    stderr: () => 'The repository access of project "web" cannot be set: the repository is reached over https://: give a user name and password or token, not an SSH key.',
    sent: false,
  },
  {
    what: 'a user name for an ssh repository',
    args: () => ['--project', 'api', '--https-user', 'ci-bot', '--password-stdin', '--known-hosts', files.knownHosts],
    input: SECRET,
    stderr: () => 'The repository access of project "api" cannot be set: the repository is reached over SSH: give an SSH private key, not a user name and password.',
    sent: false,
  },
  {
    what: 'known hosts for an https repository',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin', '--known-hosts', files.knownHosts],
    input: SECRET,
    stderr: () => 'The repository access of project "web" cannot be set: known hosts apply to an ssh:// repository; this one is reached over https://.',
    sent: false,
  },
  {
    what: 'a CA for an ssh repository',
    args: () => ['--project', 'api', '--ssh-key', files.key, '--known-hosts', files.knownHosts, '--ca', files.ca],
    stderr: () => 'The repository access of project "api" cannot be set: a CA certificate applies to an https:// repository; this one is reached over SSH.',
    sent: false,
  },
  {
    what: 'a local repository',
    args: () => ['--project', 'demo', '--https-user', 'ci-bot', '--password-stdin'],
    input: SECRET,
    stderr: () => 'The repository access of project "demo" cannot be set: the repository is a local path on the exec-host: it is read without a credential.',
    sent: false,
  },
  {
    what: 'no gateway',
    args: () => ['--project', 'web', '--https-user', 'ci-bot', '--password-stdin'],
    input: SECRET,
    env: { LEMNISCATE_GATEWAY: 'http://127.0.0.1:1' },
    stderr: () => 'Cannot reach the gateway at http://127.0.0.1:1: is it running? (`npm start`)',
    sent: false,
  },
];

describe('lemni repository set: every refusal is one sentence, exit 1, nothing on stdout, and never the secret', () => {
  it.each(setRefusals.flatMap((c) => (['text', 'json'] as const).map((format) => [`${c.what} (${format})`, c, format] as const)))('%s', async (_name, c, format) => {
    c.setup?.();
    const r = await lemni(['repository', 'set', ...c.args(), ...(format === 'json' ? ['--json'] : [])], { env: env(c.env), input: c.input });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr.split('\n')[0]).toBe(c.stderr());
    expect(accessPosts()).toHaveLength(c.sent ? 1 : 0);
    expect(gateway.repositoryAccess.size).toBe(0);
    expectNoSecret(r);
  });

  const unreadable = process.getuid?.() === 0 ? it.skip : it;
  unreadable('a key file nobody may read (skipped as root, who reads it anyway)', async () => {
    chmodSync(files.key, 0o000);
    const r = await lemni(['repository', 'set', '--project', 'api', '--ssh-key', files.key, '--known-hosts', files.knownHosts], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: `Cannot read the SSH key ${files.key}: permission denied.\n` });
  });

  it("the CLI refuses a passphrase-protected key with the gateway's own sentence (the gateway's source says it so)", () => {
    expect(PASSPHRASE_SENTENCE).toBe(GATEWAY_PASSPHRASE_SENTENCE);
    const gatewaySource = readFileSync(path.join(repo, 'apps/gateway/src/projects/repository-access.service.ts'), 'utf8').replace(/'\s*\+\s*'/g, '');
    expect(gatewaySource).toContain(`'${PASSPHRASE_SENTENCE}'`);
  });

  it('a second set replaces the whole access: a key then --no-credential leaves known hosts only', async () => {
    await lemni(['repository', 'set', '--project', 'api', '--ssh-key', files.key, '--known-hosts', files.knownHosts], { env: env() });
    const r = await lemni(['repository', 'set', '--project', 'api', '--no-credential', '--known-hosts', files.knownHosts, '--json'], { env: env() });
    expect(JSON.parse(r.stdout)).toMatchObject({ credential: null, knownHosts: KNOWN_HOSTS });
    expect(gateway.repositoryAccess.get('p3')?.access).toEqual({ knownHosts: KNOWN_HOSTS });
  });
});

/** A context for main() in-process: a terminal (or not) with a scripted prompter, the fake gateway over real fetch. */
function terminal(answers: { text?: string; confirm?: boolean }, isTTY = true) {
  const out = { stdout: '', stderr: '' };
  const asked: { kind: 'text' | 'confirm'; message: string; secret?: boolean }[] = [];
  const unused = () => Promise.reject(new Error('not asked in these commands'));
  const prompter: Prompter = {
    instruction: unused,
    approval: unused,
    extension: unused,
    question: unused,
    text: (message, options) => {
      asked.push({ kind: 'text', message, secret: options?.secret });
      return Promise.resolve(answers.text ?? '');
    },
    confirm: (message) => {
      asked.push({ kind: 'confirm', message });
      return Promise.resolve(answers.confirm ?? false);
    },
  };
  const ctx: CliContext = {
    env: env(),
    cwd: home,
    stdout: (t) => void (out.stdout += t),
    stderr: (t) => void (out.stderr += t),
    isTTY,
    onInterrupt: () => () => undefined,
    readStdin: () => Promise.reject(new Error('standard input is the terminal here')),
    prompter: () => Promise.resolve(prompter),
    fetch: globalThis.fetch,
  };
  return { ctx, out, asked };
}

describe('lemni repository set at a terminal', () => {
  it('asks for the password or token without echo, after checking everything else, and sends it', async () => {
    const t = terminal({ text: SECRET });
    const code = await main(['repository', 'set', '--project', 'web', '--https-user', 'ci-bot', '--ca', files.ca], t.ctx);
    expect(code).toBe(0);
    expect(t.asked).toEqual([{ kind: 'text', message: 'Password or token of ci-bot', secret: true }]);
    expect(accessPosts().map((q) => q.body)).toEqual([{ credential: { kind: 'https', username: 'ci-bot', password: SECRET }, caPem: files.caPem }]);
    expect(t.out.stdout.endsWith(`\n\n${SEALED_PASSWORD}\n`)).toBe(true);
    expectNoSecret(t.out);
  });

  it('an empty answer sets nothing', async () => {
    const t = terminal({ text: '' });
    expect(await main(['repository', 'set', '--project', 'web', '--https-user', 'ci-bot'], t.ctx)).toBe(1);
    expect(t.out).toEqual({ stdout: '', stderr: 'The password or token is empty; nothing was set.\n' });
    expect(accessPosts()).toEqual([]);
  });

  it('nobody is asked for a secret the gateway would refuse anyway: a wrong transport is said first', async () => {
    const t = terminal({ text: SECRET });
    expect(await main(['repository', 'set', '--project', 'web', '--https-user', 'ci-bot', '--known-hosts', files.knownHosts], t.ctx)).toBe(1);
    expect(t.asked).toEqual([]);
    expect(t.out.stderr).toBe('The repository access of project "web" cannot be set: known hosts apply to an ssh:// repository; this one is reached over https://.\n');
  });

  it('a refusal of the gateway after the prompt is its sentence, and the secret is not in it', async () => {
    gateway.repositoryRefusals.set = FORBIDDEN;
    const t = terminal({ text: SECRET });
    expect(await main(['repository', 'set', '--project', 'web', '--https-user', 'ci-bot'], t.ctx)).toBe(1);
    expect(t.out).toEqual({ stdout: '', stderr: `${FORBIDDEN.message} (request req-1)\n` });
  });
});

describe('lemni repository clear', () => {
  const held = () =>
    gateway.repositoryAccess.set('p2', {
      access: { credential: { kind: 'https', username: 'ci-bot', password: SECRET }, caPem: files.caPem },
      keyFingerprint: null,
      updatedAt: new Date().toISOString(),
      updatedBy: 'u1',
    });
  const CLEARED = 'The repository access of project web is cleared: no credential, known hosts or CA certificate is kept, and the platform fetches its repository without them.';

  it('--yes clears without asking (text and JSON)', async () => {
    held();
    const r = await lemni(['repository', 'clear', '--project', 'web', '--yes'], { env: env() });
    expect(r).toEqual({ code: 0, stdout: `${CLEARED}\n`, stderr: '' });
    expect(gateway.repositoryAccess.has('p2')).toBe(false);
    held();
    const json = await lemni(['repository', 'clear', '--project', 'web', '-y', '--json'], { env: env() });
    expect(json.stderr).toBe(`${CLEARED}\n`);
    expect(RepositoryAccessView.parse(JSON.parse(json.stdout))).toMatchObject({ projectId: 'p2', credential: null, caPem: null, updatedAt: null });
    expect(gateway.requests.filter((q) => q.route === 'clearRepositoryAccess')).toHaveLength(2);
  });

  const refusals: [string, string[], () => void, string, boolean][] = [
    [
      'without a terminal, --yes is required',
      ['--project', 'web'],
      () => undefined,
      "`lemni repository clear` deletes the project's repository credential: confirm with --yes (there is no terminal to ask).",
      false,
    ],
    ['no project', ['--yes'], () => undefined, 'Name the project with --project NAME.', false],
    ['an unknown project', ['--project', 'nope', '--yes'], () => undefined, 'Unknown project "nope": the projects you can use are demo, web, api, lib (`lemni projects` lists them).', false],
    ['a non-administrator', ['--project', 'web', '--yes'], () => (gateway.repositoryRefusals.clear = FORBIDDEN), `${FORBIDDEN.message} (request req-1)`, true],
  ];
  it.each(refusals)('%s', async (_what, args, setup, sentence, sent) => {
    held();
    setup();
    const r = await lemni(['repository', 'clear', ...args], { env: env() });
    expect(r).toEqual({ code: 1, stdout: '', stderr: `${sentence}\n` });
    expect(gateway.requests.filter((q) => q.route === 'clearRepositoryAccess')).toHaveLength(sent ? 1 : 0);
    expect(gateway.repositoryAccess.has('p2')).toBe(true);
    expectNoSecret(r);
  });

  it('at a terminal, asks first, naming what is set (never the secret); yes clears it', async () => {
    held();
    const t = terminal({ confirm: true });
    expect(await main(['repository', 'clear', '--project', 'web'], t.ctx)).toBe(0);
    expect(t.asked).toHaveLength(1);
    expect(t.asked[0]?.message).toBe('Clear the repository access of project web (the https credential of ci-bot, 1 CA certificate)? The credential is deleted for good.');
    expect(t.asked[0]?.message).not.toContain(SECRET);
    expect(t.out).toEqual({ stdout: `${CLEARED}\n`, stderr: '' });
    expect(gateway.repositoryAccess.has('p2')).toBe(false);
  });

  it('at a terminal, no clears nothing and exits 1', async () => {
    held();
    const t = terminal({ confirm: false });
    expect(await main(['repository', 'clear', '--project', 'web'], t.ctx)).toBe(1);
    expect(t.out).toEqual({ stdout: '', stderr: 'Nothing was cleared.\n' });
    expect(gateway.requests.filter((q) => q.route === 'clearRepositoryAccess')).toEqual([]);
    expect(gateway.repositoryAccess.has('p2')).toBe(true);
  });

  it('at a terminal, the question names an SSH key by its fingerprint and the host keys; with nothing set, says so', async () => {
    gateway.repositoryAccess.set('p3', {
      access: { credential: { kind: 'ssh', privateKey: KEY.privateKey }, knownHosts: KNOWN_HOSTS },
      keyFingerprint: FINGERPRINT,
      updatedAt: new Date().toISOString(),
      updatedBy: 'u1',
    });
    const ssh = terminal({ confirm: true });
    expect(await main(['repository', 'clear', '--project', 'api'], ssh.ctx)).toBe(0);
    expect(ssh.asked[0]?.message).toBe(
      `Clear the repository access of project api (the SSH key ${FINGERPRINT}, 3 host keys for [git.example.org]:2222, a hashed host)? The credential is deleted for good.`,
    );
    expectNoSecret(ssh.out);
    const none = terminal({ confirm: true });
    expect(await main(['repository', 'clear', '--project', 'api'], none.ctx)).toBe(0);
    expect(none.asked[0]?.message).toBe('Clear the repository access of project api (nothing is set)? The credential is deleted for good.');
  });
});
