// npm dependencies: `npm ci` when node_modules does not match package-lock.json, else nothing.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { mustRun } from './sh.mjs';

export function ensureDeps(root) {
  const lock = fs.readFileSync(path.join(root, 'package-lock.json'));
  const want = crypto.createHash('sha256').update(lock).update(process.version).digest('hex');
  const stampFile = path.join(root, 'node_modules/.lemniscate-deps');
  if (fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === want) return 'node_modules matches package-lock.json';
  mustRun('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], 'Installing the npm dependencies failed', { cwd: root, quiet: true });
  fs.writeFileSync(stampFile, want);
  return 'installed with npm ci';
}
