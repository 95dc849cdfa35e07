import { classifyChanges, classifyPath } from './third-party';
import { parsePolicy, recommendedPolicy } from './schema';

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
