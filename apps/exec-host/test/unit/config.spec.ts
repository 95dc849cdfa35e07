import { loadConfig, instanceLabel } from '../../src/config';
import { StartupError } from '../../src/errors';

const token = 'a-long-enough-random-token';

describe('loadConfig', () => {
  it('refuses to start without a token, in one sentence', () => {
    expect(() => loadConfig({})).toThrow(StartupError);
    expect(() => loadConfig({})).toThrow(/will not start without LEMNISCATE_EXEC_HOST_TOKEN/);
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: '   ' })).toThrow(/without LEMNISCATE_EXEC_HOST_TOKEN/);
  });

  it('refuses a short token', () => {
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: 'short' })).toThrow(/shorter than 16 characters/);
  });

  it('binds 127.0.0.1:7071 by default and reads the port', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).listen).toEqual({ kind: 'tcp', host: '127.0.0.1', port: 7071 });
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_PORT: '9000' }).listen).toEqual({ kind: 'tcp', host: '127.0.0.1', port: 9000 });
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_PORT: '70000' })).toThrow(/between 1 and 65535/);
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_PORT: 'abc' })).toThrow(/not "abc"/);
  });

  it('prefers a unix socket when given, and wants it absolute', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_SOCKET: '/run/x.sock' }).listen).toEqual({ kind: 'socket', path: '/run/x.sock' });
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_SOCKET: 'x.sock' })).toThrow(/absolute path/);
  });

  it('defaults the image, the seccomp profile from the repository and its schema beside it', () => {
    const c = loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_STATE_DIR: '/tmp/x' });
    expect(c.image).toBe('lemniscate/sandbox:current');
    expect(c.seccompProfilePath).toMatch(/\/images\/sandbox\/seccomp\.json$/);
    expect(c.seccompSchemaPath).toMatch(/\/images\/sandbox\/seccomp\.schema\.json$/);
    expect(c.stateDir).toBe('/tmp/x');
    expect(c.instance).toBe(instanceLabel('/tmp/x'));
    expect(instanceLabel('/tmp/y')).not.toBe(c.instance);
  });

  it('runs the reaper every 30 s unless LEMNISCATE_EXEC_HOST_REAPER_SECONDS says otherwise, and refuses a value that is not a duration', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).reaperIntervalMs).toBe(30_000);
    for (const [raw, ms] of [
      ['1', 1000],
      ['0.5', 500],
      ['0.1', 100],
      ['120', 120_000],
      ['86400', 86_400_000],
    ] as const) {
      expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_REAPER_SECONDS: raw }).reaperIntervalMs).toBe(ms);
    }
    for (const raw of ['0', '0.05', '-1', 'abc', '1e3', '', ' 1', '86401', 'Infinity', 'NaN']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_REAPER_SECONDS: raw })).toThrow(
        /LEMNISCATE_EXEC_HOST_REAPER_SECONDS must be a number of seconds between 0\.1 and 86400/,
      );
    }
  });
  it('gives the set-up no extra CA unless LEMNISCATE_EGRESS_CA_BUNDLE names an existing absolute file', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).egressCaBundle).toBeNull();
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EGRESS_CA_BUNDLE: '/etc/hostname' }).egressCaBundle).toBe('/etc/hostname');
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EGRESS_CA_BUNDLE: 'ca.pem' })).toThrow(/must be an absolute path/);
    expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EGRESS_CA_BUNDLE: '/nowhere/ca.pem' })).toThrow(/does not exist/);
  });

  it('keeps 2 prepared environments per project unless LEMNISCATE_ENVIRONMENTS_KEPT says otherwise', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).environmentsKept).toBe(2);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_ENVIRONMENTS_KEPT: '5' }).environmentsKept).toBe(5);
    for (const bad of ['0', '-1', '1.5', 'x', '101']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_ENVIRONMENTS_KEPT: bad })).toThrow(/LEMNISCATE_ENVIRONMENTS_KEPT must be a whole number between 1 and 100/);
    }
  });

  it('finds the cgroup layout itself unless LEMNISCATE_CGROUP_LAYOUT forces one, and refuses anything else with a sentence', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).cgroupLayout).toBe('auto');
    for (const layout of ['auto', 'v1', 'v2', 'engine'] as const) {
      expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_CGROUP_LAYOUT: layout }).cgroupLayout).toBe(layout);
    }
    for (const bad of ['', 'V2', 'unified', 'hybrid', 'cgroup2', ' v1', 'engine ']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_CGROUP_LAYOUT: bad })).toThrow(
        new RegExp(`^LEMNISCATE_CGROUP_LAYOUT must be auto \\(the layout this host has\\), v1, v2 or engine \\(the container engine only\\), not "${bad}"\\.$`),
      );
    }
  });

  it("runs commands through each sandbox's runner unless LEMNISCATE_SANDBOX_RUNNER is off, and refuses anything else with a sentence", () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).commandRunner).toBe(true);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_SANDBOX_RUNNER: 'on' }).commandRunner).toBe(true);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_SANDBOX_RUNNER: 'off' }).commandRunner).toBe(false);
    for (const bad of ['', 'ON', 'true', '1', 'no', ' off']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_SANDBOX_RUNNER: bad })).toThrow(
        `LEMNISCATE_SANDBOX_RUNNER must be on (commands through each sandbox's runner) or off (an engine exec per command), not "${bad}".`,
      );
    }
  });
});
