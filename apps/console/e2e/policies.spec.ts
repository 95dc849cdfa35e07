import { expect, test } from '@playwright/test';
import { calls, expectAccessible, openView } from './helpers';

test.describe('policy editor', () => {
  test('a valid document can be published with a comment, after a confirmation that shows it changes nothing', async ({ page }) => {
    await openView(page, { view: 'policies' });
    await expect(page.getByText('The document is valid.')).toBeVisible();
    await page.getByLabel('What changed, and why').fill('Allow the linter');
    await page.getByRole('button', { name: 'Publish…' }).click();
    const confirm = page.getByRole('region', { name: /Publish version 4, replacing version 3 in force/ });
    await expect(confirm).toContainText('The draft is the same as version 3 in force');
    await expect(confirm).toContainText('Allow the linter');
    expect(await calls(page, 'publish')).toEqual([]);
    await expectAccessible(page);
    await confirm.getByRole('button', { name: 'Publish version 4' }).click();
    expect((await calls(page, 'publish'))[0]!.args).toEqual(['Allow the linter']);
  });

  test('the confirmation shows the draft against the version in force; keeping on editing sends nothing', async ({ page }) => {
    await openView(page, { view: 'policies' });
    const free = page.getByLabel('Free commands (one per line)');
    await free.fill(`${await free.inputValue()}\nmake check`);
    await free.blur();
    await page.getByRole('button', { name: 'Publish…' }).click();
    const changes = page.getByRole('region', { name: 'Changes against version 3' });
    await expect(changes).toContainText('make check');
    await expect(changes.locator('.add-count').first()).toHaveText('+1');
    await page.getByRole('button', { name: 'Keep editing' }).click();
    await expect(changes).toHaveCount(0);
    expect(await calls(page, 'publish')).toEqual([]);
  });

  test('the history says who published each version', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'history' });
    await expect(page.getByRole('columnheader', { name: 'Published by' })).toBeVisible();
    await expect(page.getByRole('row', { name: /Make tests and lint free/ })).toContainText('ada@example.com');
  });

  test('schema errors are listed with line and path, underlined in the editor, and block publishing', async ({ page }) => {
    await openView(page, { view: 'policies', variant: 'invalid' });
    const problems = page.locator('#yaml-problems');
    await expect(problems.getByRole('listitem')).toHaveText([
      'Line 4, commands.default: must be one of allow, ask, deny',
      'Line 8, commands.reaproval: unknown key (check its spelling against the policy reference)',
    ]);
    await expect(page.locator('.cm-lintRange-error')).toHaveCount(2);
    await expect(page.getByRole('button', { name: 'Publish' })).toBeDisabled();
    // The form shows the wrong value as it is, not the first allowed one.
    await expect(page.getByLabel('Commands no rule names')).toHaveValue('maybe');
    await expectAccessible(page);
  });

  test('a command both free and forbidden is refused with the sentence `lemni policy check` prints, and blocks publishing', async ({ page }) => {
    await openView(page, { view: 'policies', variant: 'overlap' });
    await expect(page.locator('#yaml-problems').getByRole('listitem')).toHaveText(['Line 8, commands.free[2]: `curl` is also forbidden by commands.forbidden[0]; a command cannot be both']);
    await expect(page.locator('.cm-lintRange-error')).toHaveCount(1);
    await expect(page.getByRole('button', { name: 'Publish' })).toBeDisabled();
  });

  test('typing in the YAML editor revalidates as you go', async ({ page }) => {
    await openView(page, { view: 'policies' });
    const editor = page.locator('.cm-content');
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('sandbox:\n  runtime: docker\n');
    await expect(page.locator('#yaml-problems')).toContainText('sandbox.runtime: must be one of runc, runsc');
    await expect(page.getByRole('button', { name: 'Publish' })).toBeDisabled();
    await expect(editor).toHaveAttribute('aria-labelledby', 'yaml-title');
  });

  test('the form edits the YAML and keeps its comments', async ({ page }) => {
    await openView(page, { view: 'policies' });
    await page.getByLabel('Commands no rule names').selectOption('deny');
    await page.getByRole('group', { name: 'Disabled tools' }).getByLabel('Bash').check();
    const free = page.getByLabel('Free commands (one per line)');
    await free.fill('npm test\nnpm run lint\nnpm run build');
    await free.blur();
    const last = (await calls(page, 'draft')).at(-1)!.args[0] as string;
    expect(last).toContain('# demo project policy — reviewed with security, 2026-11');
    expect(last).toContain('default: deny');
    expect(last).toMatch(/disabled:\n\s+- Task\n\s+- Bash/);
    expect(last).toContain('- npm run build');
    await expect(page.locator('.cm-content')).toContainText('default: deny');
  });

  test('history compares any two versions side by side and rolls back', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'history' });
    await expect(page.getByRole('row', { name: /v3.*in force/ })).toBeVisible();
    await expect(page.getByRole('region', { name: 'Policy v2 to v3' })).toBeVisible();
    await expect(page.getByRole('button', { name: 'Side by side' })).toHaveAttribute('aria-pressed', 'true');
    await page.getByLabel('From').selectOption('1');
    await page.getByRole('button', { name: 'Roll back to v1' }).click();
    await page.getByRole('row', { name: /v2/ }).getByRole('button', { name: 'Open in editor' }).click();
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['compare', 1, 3],
      ['rollback', 1],
      ['load', 2],
    ]);
    await expectAccessible(page);
  });

  test('the tabs follow the ARIA pattern: arrows move between them', async ({ page }) => {
    await openView(page, { view: 'policies' });
    await page.getByRole('tab', { name: 'Edit and publish' }).focus();
    await page.keyboard.press('ArrowRight');
    await expect(page.getByRole('tab', { name: 'History' })).toBeFocused();
    await expect(page.getByRole('tab', { name: 'History' })).toHaveAttribute('aria-selected', 'true');
    await expect(page.getByRole('tabpanel')).toContainText('Compare versions');
  });

  test('dry run replays the last sessions and lists the decisions that would change', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'dry-run' });
    await page.getByLabel('Sessions to replay').fill('25');
    await page.getByRole('button', { name: 'Run' }).click();
    await expect(page.getByText('184 tool calls from 10 sessions replayed')).toBeVisible();
    await expect(page.getByRole('table', { name: 'Decisions that would change' }).getByRole('row')).toHaveCount(3);
    expect((await calls(page, 'dryRun'))[0]!.args).toEqual([25]);
    await expectAccessible(page);
  });
});
