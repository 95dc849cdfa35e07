#!/usr/bin/env node
// `npm run platform-image`: builds lemniscate/platform offline from this checkout (the TypeScript
// build and the console's build first, each a no-op when up to date), or reuses it when nothing
// changed, and prints its tag on the last line. A fresh clone needs `npm ci` and the Docker engine
// (`npm run setup`) before it.
import { ROOT } from './setup.mjs';
import { ensurePlatformImage } from './lib/platform-image.mjs';
import { ensureConsoleBuild } from './lib/console.mjs';
import { mustRun, SetupError } from './lib/sh.mjs';

try {
  mustRun('npx', ['tsc', '-b', 'tsconfig.build.json'], 'The TypeScript build failed', { cwd: ROOT, quiet: true });
  process.stderr.write(`${ensureConsoleBuild(ROOT)}\n`);
  const { tag, note } = ensurePlatformImage(ROOT, { log: (m) => process.stderr.write(`${m}\n`) });
  process.stderr.write(`${note}\n`);
  process.stdout.write(`${tag}\n`);
} catch (e) {
  process.stderr.write(`${e instanceof SetupError ? e.message : (e?.stack ?? String(e))}\n`);
  process.exit(1);
}
