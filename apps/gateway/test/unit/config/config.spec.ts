import { ConfigError, loadConfig } from '../../../src/config/config';

describe('loadConfig', () => {
  it('binds to loopback on 7070 by default and keeps PGlite under the data directory', () => {
    const c = loadConfig({ LEMNISCATE_DATA_DIR: '/var/lib/lemni' });
    expect(c.host).toBe('127.0.0.1');
    expect(c.port).toBe(7070);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.dataDir).toBe('/var/lib/lemni');
    expect(c.cookieSecure).toBe(false);
  });

  it('refuses an unreadable value with its name instead of falling back to the default', () => {
    expect(() => loadConfig({ LEMNISCATE_GATEWAY_PORT: 'seventy' })).toThrow(ConfigError);
    expect(() => loadConfig({ LEMNISCATE_GATEWAY_PORT: 'seventy' })).toThrow('LEMNISCATE_GATEWAY_PORT: must be a port number (0–65535).');
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL: must be a postgres:\/\/ URL/);
    expect(() => loadConfig({ LEMNISCATE_ADMIN_PASSWORD: 'short' })).toThrow(/LEMNISCATE_ADMIN_PASSWORD: must be at least 12 characters/);
  });

  it("reads the models and the gateway's own LEMNISCATE_SESSION_* variables once, with the rest of the environment", () => {
    const c = loadConfig({ LEMNISCATE_DEFAULT_MODEL: 'scripted:/tmp/s.json', LEMNISCATE_MODELS_CONFIG: '/etc/lemni/models.yaml', LEMNISCATE_SESSION_MAX_ACTIONS: '7', LEMNISCATE_OTHER: 'x' });
    expect(c.models).toEqual({ default: 'scripted:/tmp/s.json', configFile: '/etc/lemni/models.yaml' });
    expect(c.sessionEnvironment).toEqual({ LEMNISCATE_SESSION_MAX_ACTIONS: '7' });
    expect(loadConfig({}).models).toEqual({ default: undefined, configFile: undefined });
  });

  it('treats an empty variable as unset', () => {
    expect(loadConfig({ LEMNISCATE_GATEWAY_PORT: '' }).port).toBe(7070);
  });
});
