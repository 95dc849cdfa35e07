// The machine's PostgreSQL server, for the medium tests that run against both PGlite and PostgreSQL.
// A dedicated superuser role over loopback TCP (tests create and drop their own databases, and the
// audit tamper tests need superuser rights); the role never exists outside a test machine.
import { run, mustRun, has, isRoot, SetupError, waitFor } from './sh.mjs';
import { aptInstall } from './engine.mjs';

export const TEST_PG_URL = 'postgres://lemniscate_test:lemniscate_test@127.0.0.1:5432/postgres';

function clusterOnline() {
  const r = run('pg_lsclusters', ['--no-header']);
  return r.ok && /\bonline\b/.test(r.stdout) ? r.stdout.trim().split(/\s+/).slice(0, 2) : null;
}

function psql(sql) {
  return run('su', ['postgres', '-s', '/bin/sh', '-c', `psql -v ON_ERROR_STOP=1 -qAtX -c "${sql.replace(/"/g, '\\"')}"`]);
}

export async function ensurePostgres({ log }) {
  if (process.env.LEMNISCATE_TEST_PG_URL) return `using LEMNISCATE_TEST_PG_URL`;
  if (!has('pg_lsclusters')) {
    if (!isRoot()) throw new SetupError('PostgreSQL is not installed and this user is not root: set LEMNISCATE_TEST_PG_URL to a server where the tests may create databases.');
    log('installing postgresql from Debian');
    aptInstall(['postgresql'], 'The PostgreSQL tests');
  }
  let note = 'already running';
  if (!clusterOnline()) {
    if (!isRoot()) throw new SetupError('PostgreSQL is not running and this user is not root: start it, or set LEMNISCATE_TEST_PG_URL.');
    const list = run('pg_lsclusters', ['--no-header']).stdout.trim().split('\n')[0]?.split(/\s+/) ?? [];
    if (list.length < 2) throw new SetupError('No PostgreSQL cluster exists on this machine; create one with pg_createcluster or set LEMNISCATE_TEST_PG_URL.');
    mustRun('pg_ctlcluster', [list[0], list[1], 'start'], 'Could not start PostgreSQL', { quiet: true });
    await waitFor(() => clusterOnline() !== null, { timeoutMs: 30000, what: 'PostgreSQL' });
    note = `started cluster ${list[0]}/${list[1]}`;
  }
  const exists = psql("SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_test'");
  if (!exists.ok) throw new SetupError(`Could not query PostgreSQL as its postgres user: ${exists.stderr.trim()}`);
  if (exists.stdout.trim() !== '1') {
    mustRun('su', ['postgres', '-s', '/bin/sh', '-c', `psql -qAtX -c "CREATE ROLE lemniscate_test LOGIN SUPERUSER PASSWORD 'lemniscate_test'"`], 'Could not create the PostgreSQL test role', { quiet: true });
    note += ', test role created';
  }
  process.env.LEMNISCATE_TEST_PG_URL = TEST_PG_URL;
  return note;
}
