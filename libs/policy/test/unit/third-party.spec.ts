import { classifyChanges, classifyPath } from '../../src/third-party';
import { parsePolicy, recommendedPolicy } from '../../src/schema';

describe('classifyPath', () => {
  it.each([
    ['.github/workflows/release.yml', 'ci'],
    ['.gitlab-ci.yml', 'ci'],
    ['.circleci/config.yml', 'ci'],
    ['azure-pipelines.yml', 'ci'],
    ['.buildkite/pipeline.yml', 'ci'],
    ['Jenkinsfile', 'ci'],
    ['.drone.yml', 'ci'],
    ['Makefile', 'ci'],
    ['build/rules.mk', 'ci'],
    ['Dockerfile', 'ci'],
    ['images/Dockerfile.sandbox', 'ci'],
    ['docker-compose.override.yml', 'ci'],
    ['compose.yaml', 'ci'],
    ['native/CMakeLists.txt', 'ci'],
    ['app/build.gradle.kts', 'ci'],
    ['.devcontainer/devcontainer.json', 'ci'],
    ['.git/config', 'vcs'],
    ['.gitattributes', 'vcs'],
    ['.gitmodules', 'vcs'],
    ['.githooks/pre-commit', 'vcs'],
    ['.husky/pre-push', 'vcs'],
    ['.pre-commit-config.yaml', 'vcs'],
    ['lefthook.yml', 'vcs'],
    ['package.json', 'manifests'],
    ['web/package-lock.json', 'manifests'],
    ['yarn.lock', 'manifests'],
    ['pnpm-lock.yaml', 'manifests'],
    ['.npmrc', 'manifests'],
    ['requirements-dev.txt', 'manifests'],
    ['pyproject.toml', 'manifests'],
    ['poetry.lock', 'manifests'],
    ['go.mod', 'manifests'],
    ['go.sum', 'manifests'],
    ['crates/x/Cargo.toml', 'manifests'],
    ['Cargo.lock', 'manifests'],
    ['pom.xml', 'manifests'],
    ['Gemfile.lock', 'manifests'],
    ['composer.json', 'manifests'],
    ['src/Api/Api.csproj', 'manifests'],
    ['./src/../package.json', 'manifests'],
    ['MAKEFILE', 'ci'],
  ])('%s is %s', (path, cls) => {
    expect(classifyPath(path, recommendedPolicy)).toBe(cls);
  });

  it.each(['src/index.ts', 'README.md', 'docs/Makefile.md', 'test/package.json.snap', 'github/workflow.ts'])('%s is an ordinary file', (path) => {
    expect(classifyPath(path, recommendedPolicy)).toBeNull();
  });

  it('uses the classes of the policy', () => {
    const policy = parsePolicy({ version: 1, thirdPartyFiles: { classes: { infra: ['terraform/**', '*.tf'] } } });
    expect(classifyPath('terraform/main.tf', policy)).toBe('infra');
    expect(classifyPath('Makefile', policy)).toBeNull();
  });
});

describe('classifyChanges', () => {
  const approve = parsePolicy({ version: 1, thirdPartyFiles: { mode: 'approve', maxDiffBytes: 100 } });

  it('no change needs nothing', () => {
    expect(classifyChanges([], recommendedPolicy).effect).toBe('allow');
  });

  it('ordinary changes go to a person', () => {
    expect(classifyChanges([{ path: 'src/a.ts', binary: false, diffBytes: 10 }], recommendedPolicy)).toMatchObject({ effect: 'ask', rule: 'changes.review' });
  });

  it('a third-party change is refused under forbid, listing every such file', () => {
    const d = classifyChanges(
      [
        { path: 'src/a.ts', binary: false, diffBytes: 10 },
        { path: 'package.json', binary: false, diffBytes: 10 },
        { path: '.github/workflows/ci.yml', binary: false, diffBytes: 10 },
      ],
      recommendedPolicy,
    );
    expect(d).toMatchObject({
      effect: 'deny',
      rule: 'thirdPartyFiles.manifests',
      thirdParty: [
        { path: 'package.json', class: 'manifests' },
        { path: '.github/workflows/ci.yml', class: 'ci' },
      ],
    });
    expect(d.reason).toContain('forbids changing them');
  });

  it('binary and oversized changes are flagged under approve', () => {
    const d = classifyChanges(
      [
        { path: 'logo.png', binary: true, diffBytes: 10 },
        { path: 'big.sql', binary: false, diffBytes: 101 },
      ],
      approve,
    );
    expect(d).toMatchObject({
      effect: 'ask',
      rule: 'thirdPartyFiles.binary',
      thirdParty: [
        { path: 'logo.png', class: 'binary' },
        { path: 'big.sql', class: 'oversize' },
      ],
    });
  });

  it('binary content is ordinary when the policy says so', () => {
    const policy = parsePolicy({ version: 1, thirdPartyFiles: { binary: false } });
    expect(classifyChanges([{ path: 'logo.png', binary: true, diffBytes: 10 }], policy).rule).toBe('changes.review');
  });
});

describe('classifyChanges: symbolic links out of the working copy (G01)', () => {
  const plain = { binary: false, diffBytes: 40 };
  const out = [
    ['leak', '/etc/passwd'],
    ['up', '../../..'],
    ['src/x', '/etc/passwd'],
  ] as const;

  it.each(out)('refuses %s → %s by default, with a sentence naming the link and its target', (path, target) => {
    const d = classifyChanges([{ path, ...plain, symlink: { target, outside: true } }], parsePolicy({ version: 1 }));
    expect(d).toMatchObject({ effect: 'deny', rule: 'thirdPartyFiles.symlinksOutside', thirdParty: [{ path, class: 'symlink_outside' }] });
    expect(d.reason).toBe(`The change creates a symlink ${path} → ${target}, which points outside the working copy; such links are refused (thirdPartyFiles.symlinksOutside).`);
  });

  it('refuses them even where third-party files only need an approval (their own key, not thirdPartyFiles.mode)', () => {
    const d = classifyChanges([{ path: 'leak', ...plain, symlink: { target: '/etc/passwd', outside: true } }], parsePolicy({ version: 1, thirdPartyFiles: { mode: 'approve' } }));
    expect(d.effect).toBe('deny');
  });

  it('asks a dedicated, flagged approval when the policy says symlinksOutside: approve', () => {
    const d = classifyChanges(
      [
        { path: 'leak', ...plain, symlink: { target: '/etc/passwd', outside: true } },
        { path: 'package.json', ...plain },
      ],
      parsePolicy({ version: 1, thirdPartyFiles: { symlinksOutside: 'approve' } }),
    );
    expect(d).toMatchObject({ effect: 'ask', rule: 'thirdPartyFiles.symlinksOutside' });
    expect(d.thirdParty).toEqual([
      { path: 'leak', class: 'symlink_outside' },
      { path: 'package.json', class: 'manifests' },
    ]);
  });

  it('keeps a link inside the working copy an ordinary change', () => {
    const d = classifyChanges([{ path: 'inside', ...plain, symlink: { target: 'src/calc.js', outside: false } }], parsePolicy({ version: 1 }));
    expect(d).toMatchObject({ effect: 'ask', rule: 'changes.review' });
    expect(d.thirdParty).toBeUndefined();
  });

  it('refuses an unknown value for the key with the allowed ones', () => {
    expect(() => parsePolicy({ version: 1, thirdPartyFiles: { symlinksOutside: 'allow' } })).toThrow(/symlinksOutside/);
  });
});
