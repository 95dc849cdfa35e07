import { describeCommand, parseDevcontainer, DevcontainerError } from '../../../src/environment/devcontainer';
import { isEnvironmentInput, environmentKey } from '../../../src/environment/inputs';
import { completeUtf8 } from '../../../src/environment/environment.service';

describe('parseDevcontainer (JSON with comments, the keys honoured, everything else a warning)', () => {
  it('reads comments and trailing commas, image, containerEnv and the three set-up commands in order', () => {
    const dc = parseDevcontainer(
      '.devcontainer/devcontainer.json',
      `// a comment
      {
        /* block */ "image": "lemniscate/sandbox:current",
        "containerEnv": { "A": "1", },
        "postCreateCommand": "npm ci",
        "onCreateCommand": ["python3", "-m", "venv", ".venv"],
        "updateContentCommand": { "one": "echo 1", "two": ["echo", "two words"] },
      }`,
    );
    expect(dc.image).toBe('lemniscate/sandbox:current');
    expect(dc.containerEnv).toEqual({ A: '1' });
    expect(dc.setup.map((c) => `${c.name}: ${describeCommand(c)}`)).toEqual([
      'onCreateCommand: python3 -m venv .venv',
      'updateContentCommand one: echo 1',
      "updateContentCommand two: echo 'two words'",
      'postCreateCommand: npm ci',
    ]);
    expect(dc.warnings).toEqual([]);
  });

  it('resolves build paths against the file and keeps them inside the repository', () => {
    const dc = parseDevcontainer('.devcontainer/devcontainer.json', '{ "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "V": "1" } } }');
    expect(dc.build).toEqual({ dockerfile: '.devcontainer/Dockerfile', context: '.', args: { V: '1' } });
    expect(() => parseDevcontainer('.devcontainer/devcontainer.json', '{ "build": { "dockerfile": "../../x" } }')).toThrow(/points outside the repository/);
    expect(() => parseDevcontainer('.devcontainer/devcontainer.json', '{ "build": { "dockerfile": "/etc/Dockerfile" } }')).toThrow(/points outside the repository/);
  });

  // Every key that could give the environment a privilege, a mount, a port or network is named and ignored.
  it.each([
    'runArgs',
    'privileged',
    'capAdd',
    'securityOpt',
    'mounts',
    'forwardPorts',
    'appPort',
    'remoteUser',
    'containerUser',
    'init',
    'features',
    'overrideCommand',
    'workspaceMount',
    'hostRequirements',
    'postStartCommand',
    'postAttachCommand',
    'initializeCommand',
    'dockerComposeFile',
    'remoteEnv',
  ])('%s is a warning, never honoured', (key) => {
    const dc = parseDevcontainer('.devcontainer.json', JSON.stringify({ image: 'x', [key]: true }));
    expect(dc.warnings).toEqual([`"${key}" is not supported here and was ignored.`]);
  });

  it.each(['HTTP_PROXY', 'https_proxy', 'NO_PROXY', 'NODE_EXTRA_CA_CERTS', 'PATH', 'HOME', 'LANG'])('containerEnv cannot set %s (the platform does)', (name) => {
    const dc = parseDevcontainer('.devcontainer.json', JSON.stringify({ containerEnv: { [name]: 'x', KEPT: 'y' } }));
    expect(dc.containerEnv).toEqual({ KEPT: 'y' });
    expect(dc.warnings).toEqual([expect.stringContaining(`"containerEnv.${name}" is set by the platform`)]);
  });

  it.each([
    ['not an object', '[1]', /must hold an object/],
    ['a syntax error', '{ "image": }', /not valid JSON with comments: .* at line 1/],
    ['an empty image', '{ "image": " " }', /must name a local image/],
    ['both image and build', '{ "image": "a", "build": { "dockerfile": "D" } }', /either "image" or "build"/],
    ['a bad variable name', '{ "containerEnv": { "A B": "1" } }', /is not a variable name/],
    ['a non-string variable', '{ "containerEnv": { "A": 1 } }', /must be a string/],
    ['a NUL in a variable', '{ "containerEnv": { "A": "a\\u0000b" } }', /NUL/],
    ['a command of numbers', '{ "postCreateCommand": [1, 2] }', /only strings/],
    ['a command of the wrong type', '{ "postCreateCommand": 5 }', /must be a string, an array/],
  ])('%s: a sentence', (_what, text, why) => {
    expect(() => parseDevcontainer('.devcontainer.json', text)).toThrow(DevcontainerError);
    expect(() => parseDevcontainer('.devcontainer.json', text)).toThrow(why);
  });
});

describe('environment inputs and key', () => {
  it.each([
    ['.devcontainer/devcontainer.json', true],
    ['.devcontainer/Dockerfile', true],
    ['.devcontainer.json', true],
    ['package-lock.json', true],
    ['web/package.json', true],
    ['requirements-dev.txt', true],
    ['poetry.lock', true],
    ['go.sum', true],
    ['node_modules/x/package.json', false],
    ['vendor/y/go.mod', false],
    ['src/index.js', false],
    ['README.md', false],
  ])('%s is an input: %s', (p, expected) => expect(isEnvironmentInput(p)).toBe(expected));

  it('the key changes with any input file, its path, the base image, the project or the runtime, and with nothing else', () => {
    const files = [
      { path: '.devcontainer/devcontainer.json', blob: 'a'.repeat(40) },
      { path: 'package-lock.json', blob: 'b'.repeat(40) },
    ];
    const owner = { projectId: 'p1', runtime: 'runc' };
    const k = environmentKey({ files }, 'sha256:1', owner);
    expect(environmentKey({ files: [...files] }, 'sha256:1', { ...owner })).toBe(k);
    expect(environmentKey({ files: [files[0]!, { ...files[1]!, blob: 'c'.repeat(40) }] }, 'sha256:1', owner)).not.toBe(k);
    expect(environmentKey({ files: [files[0]!, { ...files[1]!, path: 'x/package-lock.json' }] }, 'sha256:1', owner)).not.toBe(k);
    expect(environmentKey({ files }, 'sha256:2', owner)).not.toBe(k);
    expect(environmentKey({ files }, 'sha256:1', { ...owner, projectId: 'p2' })).not.toBe(k);
    expect(environmentKey({ files }, 'sha256:1', { ...owner, runtime: 'runsc' })).not.toBe(k);
  });
});

describe('completeUtf8: a log read never ends inside a character', () => {
  it.each(['abc', 'é', '€', '😀', 'a€b😀'])('%s cut at every byte', (s) => {
    const whole = Buffer.from(s);
    for (let n = 0; n <= whole.length; n++) {
      const part = whole.subarray(0, n);
      const keep = completeUtf8(part);
      expect(part.subarray(0, keep).toString('utf8')).not.toContain('\uFFFD');
      expect(s.startsWith(part.subarray(0, keep).toString('utf8'))).toBe(true);
    }
    expect(completeUtf8(whole)).toBe(whole.length);
  });
});
