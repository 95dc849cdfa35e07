// The console's production build (apps/console/dist), which the gateway serves. Rebuilt only when
// its inputs (its sources and the libraries it bundles) change.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { mustRun } from './sh.mjs';

const INPUTS = ['apps/console/src', 'apps/console/index.html', 'apps/console/vite.config.ts', 'apps/console/package.json', 'libs/contracts/src', 'libs/policy/src'];

function hashTree(root, rel, h) {
  const full = path.join(root, rel);
  const st = fs.statSync(full, { throwIfNoEntry: false });
  if (!st) return;
  if (st.isDirectory()) {
    for (const name of fs.readdirSync(full).sort()) {
      if (name === 'node_modules' || name === 'dist' || name.endsWith('.spec.ts')) continue;
      hashTree(root, path.join(rel, name), h);
    }
  } else {
    h.update(rel + '\0');
    h.update(fs.readFileSync(full));
  }
}

export function ensureConsoleBuild(root) {
  const h = crypto.createHash('sha256');
  for (const input of INPUTS) hashTree(root, input, h);
  const want = h.digest('hex');
  const stamp = path.join(root, 'apps/console/dist/.lemniscate-inputs');
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return 'apps/console/dist up to date';
  mustRun('npx', ['vite', 'build', '--config', 'vite.config.ts', '--logLevel', 'warn'], 'The console build failed', { cwd: path.join(root, 'apps/console'), quiet: true });
  fs.writeFileSync(stamp, want);
  return 'built apps/console/dist';
}
