// Debian's Chromium for the browser tests: Playwright drives /usr/bin/chromium, never a downloaded browser.
import * as fs from 'node:fs';
import { isRoot, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';

export const CHROMIUM = process.env.LEMNISCATE_CHROMIUM ?? '/usr/bin/chromium';

export function ensureChromium({ log }) {
  if (fs.existsSync(CHROMIUM)) return `${CHROMIUM} present`;
  if (!isRoot()) throw new SetupError(`Chromium is missing at ${CHROMIUM}: install Debian's chromium package, or set LEMNISCATE_CHROMIUM to a Chromium binary.`);
  log('installing chromium from Debian');
  aptInstall(['chromium'], 'The browser tests');
  return 'installed from Debian';
}
