import { expect, test } from '@playwright/test';
import type { SessionMode } from '@lemniscate/contracts';
import { sessions } from '../harness/fixtures';
import { openView } from './helpers';

// What a person must read for each mode (the contracts' unit test holds SESSION_MODE_LABELS to these).
const SESSION_MODE_LABELS: Record<SessionMode, string> = { interactive: 'Interactive', headless: 'Headless', headless_with_approvals: 'Headless, approvals waited for' };

// L4: the list and the session page say how each session was started, for every mode the contract
// declares; the sample sessions are checked to cover them all.
test.describe('session mode', () => {
  test('the sample sessions cover every mode', () => {
    expect(new Set(sessions.map((s) => s.mode))).toEqual(new Set(Object.keys(SESSION_MODE_LABELS)));
  });

  test(`the list shows the mode of each of the ${sessions.length} sessions`, async ({ page }) => {
    await openView(page, { view: 'sessions' });
    const table = page.getByRole('table', { name: 'Sessions' });
    const headers = await table.getByRole('columnheader').allTextContents();
    const column = headers.indexOf('Mode');
    expect(column).toBeGreaterThanOrEqual(0);
    for (const s of sessions) {
      const row = table.getByRole('row').filter({ has: page.getByRole('link', { name: s.instruction }) });
      await expect(row.getByRole('cell').nth(column)).toHaveText(SESSION_MODE_LABELS[s.mode]);
    }
  });

  for (const s of sessions) {
    test(`the page of ${s.id} (${s.mode}, ${s.status}) shows its mode and where its tree stood`, async ({ page }) => {
      await openView(page, { view: 'session', id: s.id });
      const facts = page.getByRole('region', { name: 'Facts' });
      const fact = (term: string) => facts.locator('dt', { hasText: new RegExp(`^${term}$`) }).locator('xpath=following-sibling::dd[1]');
      await expect(fact('Mode')).toHaveText(SESSION_MODE_LABELS[s.mode]);
      await expect(fact('Tree at the start')).toHaveText(s.fingerprintStart ?? '—');
      const end =
        s.status === 'running'
          ? '— (still running)'
          : s.fingerprintEnd === null
            ? 'unknown (the sandbox could not be read at the end)'
            : s.fingerprintEnd === s.fingerprintStart
              ? 'unchanged: nothing was kept'
              : s.fingerprintEnd;
      await expect(fact('Tree at the end')).toHaveText(end);
      // A fingerprint is one long word: it must wrap inside the card, not run out of it.
      const card = await facts.boundingBox();
      for (const term of ['Tree at the start', 'Tree at the end']) {
        const box = await fact(term).boundingBox();
        expect(box!.x + box!.width).toBeLessThanOrEqual(card!.x + card!.width);
      }
    });
  }
});
