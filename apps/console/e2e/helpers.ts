import { expect, type Page } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';

export type Call = { name: string; args: unknown[] };

/** Opens one view of the harness and fails on any error the page throws while it renders. */
export async function openView(page: Page, query: Record<string, string>): Promise<void> {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The harness page carries a Content-Security-Policy without 'unsafe-eval' or inline scripts.
  await page.addInitScript(() => {
    (window as unknown as { __csp: string[] }).__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => (window as unknown as { __csp: string[] }).__csp.push(`${e.violatedDirective}: ${e.blockedURI}`));
  });
  await page.goto(`/harness/index.html?${new URLSearchParams(query).toString()}`);
  await expect(page.locator('#root > *').first()).toBeVisible();
  expect(errors, 'the view threw while rendering').toEqual([]);
  expect(await page.evaluate(() => (window as unknown as { __csp: string[] }).__csp), 'Content-Security-Policy violations').toEqual([]);
}

export async function calls(page: Page, name?: string): Promise<Call[]> {
  const all = await page.evaluate(() => window.__calls);
  return name ? all.filter((c) => c.name === name) : all;
}

/**
 * Runs axe-core on the page (WCAG 2.x A and AA rules) and fails on serious or critical violations.
 * It first waits for the page's finite animations (a button's colour fading after a click) to end:
 * the contrast that counts is the one a person reads, not a frame in the middle of a fade.
 */
export async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(() =>
    Promise.all(
      document
        .getAnimations()
        .filter((a) => a.effect?.getComputedTiming().iterations !== Infinity)
        .map((a) => a.finished.catch(() => undefined)),
    ),
  );
  const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']).analyze();
  const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(
    serious.map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} — ${v.nodes
          .map((n) => n.target.join(' '))
          .slice(0, 3)
          .join(', ')}`,
    ),
    'axe-core found serious accessibility violations',
  ).toEqual([]);
}

declare global {
  interface Window {
    __calls: Call[];
  }
}
