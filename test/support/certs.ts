import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const MAKE_CERTS = path.resolve(__dirname, '../../deploy/certs/make-certs.sh');

/** A certificate and its key: their files and their PEM text. */
export interface CertPair {
  cert: string;
  key: string;
  certPem: string;
  keyPem: string;
}

/** A set made by deploy/certs/make-certs.sh: a CA, the gateway's client certificate, one per exec-host. */
export interface CertSet {
  dir: string;
  ca: string;
  caPem: string;
  gateway: CertPair;
  hosts: Record<string, CertPair>;
}

export interface TestCerts {
  /** The pool's CA and its certificates. */
  good: CertSet;
  /**
   * A second CA, foreign to the first, with certificates carrying the very same names (a gateway
   * "lemniscate-gateway" and the same exec-host ids): what an attacker who can make certificates has.
   */
  foreign: CertSet;
  remove(): void;
}

function pair(dir: string, name: string): CertPair {
  const cert = path.join(dir, `${name}.pem`);
  const key = path.join(dir, `${name}-key.pem`);
  return { cert, key, certPem: fs.readFileSync(cert, 'utf8'), keyPem: fs.readFileSync(key, 'utf8') };
}

/** Makes a set into `dir` with the repository's script (as an operator would). */
export function makeCertSet(dir: string, hostIds: string[]): CertSet {
  execFileSync('bash', [MAKE_CERTS, dir, ...hostIds], { stdio: 'pipe' });
  const ca = path.join(dir, 'ca.pem');
  return { dir, ca, caPem: fs.readFileSync(ca, 'utf8'), gateway: pair(dir, 'gateway'), hosts: Object.fromEntries(hostIds.map((id) => [id, pair(dir, id)])) };
}

/** Two certificate sets in a temporary directory: the pool's and a foreign CA's with the same names. */
export function makeTestCerts(hostIds: string[] = ['exec-1', 'exec-2']): TestCerts {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-certs-'));
  return {
    good: makeCertSet(path.join(root, 'pool'), hostIds),
    foreign: makeCertSet(path.join(root, 'foreign'), hostIds),
    remove: () => fs.rmSync(root, { recursive: true, force: true }),
  };
}
