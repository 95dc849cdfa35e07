import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CliError } from '../../../src/errors';
import { configPath, loadConfig, resolveConnection, saveConfig, withProfile, type CliConfig } from '../../../src/config/config';

let home: string;
let file: string;
const config: CliConfig = {
  profiles: {
    developer: { gateway: 'http://127.0.0.1:7070', token: 'dev-token', project: 'demo' },
    admin: { gateway: 'http://127.0.0.1:7070/', token: 'admin-token' },
  },
  defaultProfile: 'developer',
};

beforeEach(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-config-'));
  file = configPath({ HOME: home });
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe('configuration file', () => {
  it('lives in $HOME/.lemniscate/config.yaml', () => {
    expect(file).toBe(path.join(home, '.lemniscate', 'config.yaml'));
  });

  it('is written with mode 600 in a directory with mode 700, and reads back', () => {
    saveConfig(file, config);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    const warnings: string[] = [];
    expect(loadConfig(file, (w) => warnings.push(w))).toEqual(config);
    expect(warnings).toEqual([]);
  });

  it('a missing file is an empty configuration', () => {
    expect(loadConfig(file, () => undefined)).toEqual({ profiles: {} });
  });

  it('warns when other users can read it', () => {
    saveConfig(file, config);
    chmodSync(file, 0o644);
    const warnings: string[] = [];
    loadConfig(file, (w) => warnings.push(w));
    expect(warnings).toEqual([`Warning: ${file} holds API tokens and other users can read it; run \`chmod 600 ${file}\`.`]);
  });

  it('refuses a file other users can modify', () => {
    saveConfig(file, config);
    chmodSync(file, 0o666);
    expect(() => loadConfig(file, () => undefined)).toThrow(`Refusing to use ${file}: other users can modify it; run \`chmod 600 ${file}\` and check its content.`);
  });

  it('names what is wrong in an invalid file', () => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, 'profiles:\n  dev:\n    gateway: ftp://x\n    token: t\n', { mode: 0o600 });
    expect(() => loadConfig(file, () => undefined)).toThrow(`${file} is not a valid configuration: profiles.dev.gateway must be an http:// or https:// URL.`);
    writeFileSync(file, 'profiles: {}\ndefaultProfile: ghost\n');
    expect(() => loadConfig(file, () => undefined)).toThrow('defaultProfile names a profile that is not defined under "profiles"');
    writeFileSync(file, 'profiles: [\n');
    expect(() => loadConfig(file, () => undefined)).toThrow(/is not valid YAML/);
  });

  it('withProfile adds a profile and makes the first one the default', () => {
    const one = withProfile({ profiles: {} }, 'ci', { gateway: 'https://g.example.org', token: 't' }, false);
    expect(one.defaultProfile).toBe('ci');
    const two = withProfile(one, 'other', { gateway: 'https://g.example.org', token: 'u' }, false);
    expect(two.defaultProfile).toBe('ci');
    expect(withProfile(two, 'other', { gateway: 'https://g.example.org', token: 'u' }, true).defaultProfile).toBe('other');
    saveConfig(file, two);
    expect(readFileSync(file, 'utf8')).toContain('defaultProfile: ci');
  });
});

describe('resolveConnection: flags > environment > profile', () => {
  it('uses the default profile when nothing else is given', () => {
    expect(resolveConnection({}, {}, config, file)).toEqual({ gateway: 'http://127.0.0.1:7070', token: 'dev-token', project: 'demo', profile: 'developer' });
  });

  it('--profile picks another profile (and trailing slashes are dropped)', () => {
    expect(resolveConnection({ profile: 'admin' }, {}, config, file)).toEqual({ gateway: 'http://127.0.0.1:7070', token: 'admin-token', project: undefined, profile: 'admin' });
  });

  it('the environment overrides the profile', () => {
    const c = resolveConnection({}, { LEMNISCATE_GATEWAY: 'https://env.example.org', LEMNISCATE_TOKEN: 'env-token', LEMNISCATE_PROJECT: 'envproj' }, config, file);
    expect(c).toMatchObject({ gateway: 'https://env.example.org', token: 'env-token', project: 'envproj' });
  });

  it('flags override the environment', () => {
    const c = resolveConnection(
      { gateway: 'https://flag.example.org', token: 'flag-token', project: 'p' },
      { LEMNISCATE_GATEWAY: 'https://env.example.org', LEMNISCATE_TOKEN: 'env-token' },
      config,
      file,
    );
    expect(c).toMatchObject({ gateway: 'https://flag.example.org', token: 'flag-token', project: 'p' });
  });

  it('LEMNISCATE_PROFILE selects a profile, --profile wins over it', () => {
    expect(resolveConnection({}, { LEMNISCATE_PROFILE: 'admin' }, config, file).token).toBe('admin-token');
    expect(resolveConnection({ profile: 'developer' }, { LEMNISCATE_PROFILE: 'admin' }, config, file).token).toBe('dev-token');
  });

  it('an unknown profile is an error that lists the known ones', () => {
    expect(() => resolveConnection({ profile: 'ghost' }, {}, config, file)).toThrow(`No profile named "ghost" in ${file}; known profiles: developer, admin.`);
  });

  it('no gateway anywhere is an error saying what to do', () => {
    const error = (() => {
      try {
        resolveConnection({}, {}, { profiles: {} }, file);
      } catch (e) {
        return e as CliError;
      }
      return null;
    })();
    expect(error?.message).toBe('No gateway configured: run `lemni login`, pass --gateway URL, or set LEMNISCATE_GATEWAY.');
    expect(error?.exitCode).toBe(1);
  });

  it('a gateway that is not an http(s) URL is refused with its source', () => {
    expect(() => resolveConnection({ gateway: 'localhost:7070' }, {}, config, file)).toThrow('The gateway URL from the command line must start with http:// or https:// (got "localhost:7070").');
    expect(() => resolveConnection({}, { LEMNISCATE_GATEWAY: 'not a url' }, config, file)).toThrow(
      'The gateway URL from LEMNISCATE_GATEWAY is not a URL: "not a url" (expected e.g. http://127.0.0.1:7070).',
    );
  });
});
