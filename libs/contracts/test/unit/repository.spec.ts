import { CreateProjectRequest, RepositoryAccess, RepositoryCredential, repositoryAccessProblem, repositorySourceProblem, repositoryTransport, RepositoryDirectoryRequest } from '../../src';

const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n';
const KNOWN = '[git.example.test]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('repositoryTransport', () => {
  it.each([
    ['/srv/git/demo.git', 'local'],
    ['/home/a b/repo', 'local'],
    ['https://git.example.test/org/repo.git', 'https'],
    ['HTTPS://git.example.test/org/repo.git', 'https'],
    ['ssh://git@git.example.test:2222/org/repo.git', 'ssh'],
    ['git@github.com:org/repo.git', 'ssh'],
    ['deploy@10.0.0.1:repo', 'ssh'],
    ['http://git.example.test/repo.git', null],
    ['git://git.example.test/repo.git', null],
    ['file:///srv/git/demo.git', null],
    ['ext::sh -c touch% /tmp/pwned', null],
    ['fd::17', null],
    ['relative/path', null],
    ['./repo', null],
    ['-uhelp', null],
    ['', null],
    ['/srv/\0/x', null],
  ])('%j is %s', (source, transport) => {
    expect(repositoryTransport(source)).toBe(transport);
  });
});

describe('repositorySourceProblem', () => {
  // Every place a credential can hide in a URL, for both URL transports.
  const secrets = ['user:pass@', 'user:@', ':token@', 'x-access-token:ghp_abc@', 'oauth2:glpat-abc@'];
  const hosts = ['git.example.test', 'git.example.test:8443', '10.0.0.1'];
  const cases: string[] = [];
  for (const s of secrets) for (const h of hosts) cases.push(`https://${s}${h}/org/repo.git`, `ssh://${s}${h}/org/repo.git`);
  it.each(cases)('refuses a credential in %s, pointing at the repository credential', (source) => {
    expect(repositorySourceProblem(source)).toMatch(/must not carry a user name, password or token: set the project's repository credential/);
    expect(CreateProjectRequest.safeParse({ name: 'p', repositorySource: source }).success).toBe(false);
  });

  it.each(['https://user@git.example.test/org/repo.git'])('refuses a user name in an https URL too (%s)', (source) => {
    expect(repositorySourceProblem(source)).toMatch(/must not carry a user name/);
  });

  it.each(['ssh://git@git.example.test/org/repo.git', 'git@git.example.test:org/repo.git', 'https://git.example.test/org/repo.git', '/srv/git/demo.git'])('accepts %s', (source) => {
    expect(repositorySourceProblem(source)).toBeNull();
    expect(CreateProjectRequest.parse({ name: 'p', repositorySource: source }).repositorySource).toBe(source);
  });

  it.each([
    ['http://git.example.test/repo.git', /plain http:\/\/, git:\/\/ and file:\/\/ are not fetched from/],
    ['git://git.example.test/repo.git', /not fetched from/],
    ['ext::sh -c id', /not fetched from/],
    ['repo', /must be an absolute path/],
    ['https://git.example.test/repo.git?token=abc', /query string or fragment/],
    ['https://git.example.test/repo.git#main', /query string or fragment/],
  ])('refuses %s with a sentence', (source, sentence) => {
    expect(repositorySourceProblem(source)).toMatch(sentence);
    const parsed = CreateProjectRequest.safeParse({ name: 'p', repositorySource: source });
    expect(parsed.success).toBe(false);
  });
});

describe('RepositoryAccess', () => {
  it('accepts each credential kind with what it needs', () => {
    expect(RepositoryAccess.parse({ credential: { kind: 'https', username: 'ci', password: 'tok' }, caPem: CA })).toBeTruthy();
    expect(RepositoryAccess.parse({ credential: { kind: 'ssh', privateKey: KEY }, knownHosts: KNOWN })).toBeTruthy();
    expect(RepositoryAccess.parse({})).toEqual({});
  });

  it.each([
    ['an unknown kind', { credential: { kind: 'token', token: 'x' } }],
    ['an extra field', { credential: { kind: 'https', username: 'u', password: 'p', scope: 'all' } }],
    ['a user name with a colon', { credential: { kind: 'https', username: 'u:x', password: 'p' } }],
    ['a password over two lines', { credential: { kind: 'https', username: 'u', password: 'p\nq' } }],
    ['an empty password', { credential: { kind: 'https', username: 'u', password: '' } }],
    ['a public key given as the private key', { credential: { kind: 'ssh', privateKey: KNOWN } }],
    ['a key protected by a passphrase', { credential: { kind: 'ssh', privateKey: '-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nabc\n-----END RSA PRIVATE KEY-----' } }],
    ['known hosts without a key line', { knownHosts: 'git.example.test' }],
    ['known hosts with an unknown marker', { knownHosts: `@trust-me ${KNOWN}` }],
    ['a CA that is not a certificate', { caPem: 'hello' }],
    ['a field the platform does not know', { proxy: 'http://x' }],
  ])('refuses %s', (_name, body) => {
    expect(RepositoryAccess.safeParse(body).success).toBe(false);
  });

  it('keeps markers known_hosts defines', () => {
    expect(RepositoryAccess.safeParse({ knownHosts: `@cert-authority *.example.test ssh-ed25519 AAAA\n${KNOWN}` }).success).toBe(true);
  });

  // Every credential kind × every transport: what does not fit is said, what fits is accepted.
  const kinds = {
    none: {},
    https: { credential: RepositoryCredential.parse({ kind: 'https', username: 'u', password: 'p' }) },
    ssh: { credential: RepositoryCredential.parse({ kind: 'ssh', privateKey: KEY }) },
  } as const;
  const extras = { nothing: {}, knownHosts: { knownHosts: KNOWN }, ca: { caPem: CA } } as const;
  const sources = { local: '/srv/git/demo.git', https: 'https://git.example.test/r.git', ssh: 'ssh://git@git.example.test/r.git' } as const;
  const grid: [string, string, string][] = [];
  for (const s of Object.keys(sources)) for (const k of Object.keys(kinds)) for (const e of Object.keys(extras)) grid.push([s, k, e]);
  it.each(grid)('source %s × credential %s × %s', (s, k, e) => {
    const access = { ...kinds[k as keyof typeof kinds], ...extras[e as keyof typeof extras] };
    const problem = repositoryAccessProblem(sources[s as keyof typeof sources], access);
    const fits = s === 'https' ? k !== 'ssh' && e !== 'knownHosts' : s === 'ssh' ? k !== 'https' && e === 'knownHosts' : false;
    if (fits) expect(problem).toBeNull();
    else expect(problem).toMatch(/^(the repository|known hosts|a CA certificate|an SSH repository)/);
  });
});

describe('RepositoryDirectoryRequest', () => {
  const base = { projectId: 'p', repository: { source: 'https://git.example.test/r.git', ref: 'main' } };
  it.each(['.lemniscate/agents', 'docs', 'a/b/c'])('accepts the directory %s', (directory) => {
    expect(RepositoryDirectoryRequest.safeParse({ ...base, directory }).success).toBe(true);
  });
  it.each(['/etc', '../x', 'a/../../b', '.', './a', 'a/./b', 'a/..', 'a\\b', ''])('refuses the directory %j', (directory) => {
    expect(RepositoryDirectoryRequest.safeParse({ ...base, directory }).success).toBe(false);
  });
});
