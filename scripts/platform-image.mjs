#!/usr/bin/env node
// `npm run platform-image`: builds lemniscate/platform offline from this checkout's build output (or
// reuses it when nothing changed) and prints its tag on the last line.
import { ROOT } from './setup.mjs';
import { ensurePlatformImage } from './lib/platform-image.mjs';
import { SetupError } from './lib/sh.mjs';

try {
  const { tag, note } = ensurePlatformImage(ROOT, { log: (m) => process.stderr.write(`${m}\n`) });
  process.stderr.write(`${note}\n`);
  process.stdout.write(`${tag}\n`);
} catch (e) {
  process.stderr.write(`${e instanceof SetupError ? e.message : (e?.stack ?? String(e))}\n`);
  process.exit(1);
}
