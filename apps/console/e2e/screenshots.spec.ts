import { expect, test } from '@playwright/test';
import { fileURLToPath } from 'node:url';
import { openView } from './helpers';

const outDir = fileURLToPath(new URL('../../../artifacts/console/views/', import.meta.url));

// One picture of each page with sample data, for reviewing the design (artifacts/console/views).
// A width after the query takes the picture at that width (390: a phone).
const SHOTS: [string, Record<string, string>, number?][] = [
  ['signin', { view: 'signin' }],
  ['dashboard', { view: 'dashboard' }],
  ['approvals-command', { view: 'approvals', role: 'developer' }],
  ['approvals-diff', { view: 'approvals', role: 'developer', selected: 'apr_2' }],
  ['approvals-third-party', { view: 'approvals', role: 'developer', selected: 'apr_3' }],
  ['sessions', { view: 'sessions' }],
  ['session-running', { view: 'session' }],
  ['session-completed', { view: 'session', variant: 'completed' }],
  ['policies-edit', { view: 'policies' }],
  ['policies-invalid', { view: 'policies', variant: 'invalid' }],
  ['policies-history', { view: 'policies', tab: 'history' }],
  ['environment-ready', { view: 'environment' }],
  ['environment-preparing', { view: 'environment', variant: 'preparing', role: 'developer' }],
  ['environment-failed', { view: 'environment', variant: 'failed' }],
  ['environment-base', { view: 'environment', variant: 'base', role: 'security_officer' }],
  ['environment-preparing-390', { view: 'environment', variant: 'preparing', role: 'developer' }, 390],
  ['environment-failed-390', { view: 'environment', variant: 'failed' }, 390],
  ['users', { view: 'users', selected: 'usr_dev' }],
  ['audit', { view: 'audit', role: 'security_officer' }],
  ['audit-broken', { view: 'audit', variant: 'broken' }],
  ['exec-hosts', { view: 'exec-hosts' }],
  ['exec-hosts-officer-390', { view: 'exec-hosts', role: 'security_officer' }, 390],
  ['error-state', { view: 'sessions', state: 'error' }],
  ['diff-split', { view: 'diff' }],
];

for (const [name, query, width] of SHOTS) {
  test(`screenshot: ${name}`, async ({ page }) => {
    if (width) await page.setViewportSize({ width, height: 844 });
    await openView(page, query);
    if (name === 'diff-split') await page.getByRole('button', { name: 'Side by side' }).click();
    if (name === 'policies-invalid') await expect(page.locator('.cm-lintRange-error')).toHaveCount(2);
    await page.screenshot({ path: `${outDir}${name}.png`, fullPage: true });
  });
}

// The pictures docs/console.md shows (LEMNISCATE_DOCS_SCREENSHOTS=1 writes them to docs/screenshots/,
// to be looked at and committed when the pages change): approvals, policy publish and audit, at 1440 and 390.
const docsDir = fileURLToPath(new URL('../../../docs/screenshots/', import.meta.url));
const DOCS: [string, Record<string, string>, (page: import('@playwright/test').Page) => Promise<void>][] = [
  ['approvals-command', { view: 'approvals', role: 'developer' }, async () => undefined],
  ['approvals-diff', { view: 'approvals', role: 'developer', selected: 'apr_3' }, async () => undefined],
  [
    'policy-publish',
    { view: 'policies' },
    async (page) => {
      await page
        .getByRole('button', { name: /^Publish/ })
        .first()
        .click();
    },
  ],
  [
    'audit',
    { view: 'audit', role: 'security_officer' },
    async (page) => {
      await page.getByRole('button', { name: 'Details of entry 1041' }).click();
    },
  ],
];
for (const [name, query, prepare] of DOCS) {
  for (const width of [1440, 390]) {
    test(`docs screenshot: ${name} at ${width}`, async ({ page }) => {
      test.skip(process.env.LEMNISCATE_DOCS_SCREENSHOTS !== '1', 'written only when asked for (LEMNISCATE_DOCS_SCREENSHOTS=1)');
      await page.setViewportSize({ width, height: 900 });
      await openView(page, query);
      await prepare(page);
      // Nothing may be clipped sideways at either width.
      expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
      await page.screenshot({ path: `${docsDir}${name}-${width}.png`, fullPage: true });
    });
  }
}
