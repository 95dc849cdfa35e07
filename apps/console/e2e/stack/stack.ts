import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, type APIRequestContext, type Page } from '@playwright/test';

export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const SHOTS = path.join(ROOT, 'artifacts/console/stack');

export type Role = 'admin' | 'developer' | 'security';
interface Credentials {
  email: string;
  password: string;
}

/**
 * The sign-ins of the stack under test: LEMNISCATE_STACK_USERS (JSON, same shape) or the file
 * `npm start` writes for its demo users.
 */
export function credentials(role: Role): Credentials {
  const raw = process.env.LEMNISCATE_STACK_USERS ?? fs.readFileSync(path.join(os.homedir(), '.lemniscate/demo.json'), 'utf8');
  const users = (JSON.parse(raw) as { users?: Record<string, Credentials> }).users ?? (JSON.parse(raw) as Record<string, Credentials>);
  const c = users[role];
  if (!c) throw new Error(`No ${role} sign-in for the stack: set LEMNISCATE_STACK_USERS or run npm start first.`);
  return c;
}

export async function signIn(page: Page, role: Role): Promise<void> {
  const c = credentials(role);
  await page.goto('/');
  await page.getByLabel('E-mail').fill(c.email);
  await page.getByLabel('Password').fill(c.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('button', { name: 'Sign out' })).toBeVisible();
}

export async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The REST API with the browser's cookie and the CSRF token of its sign-in. */
export async function apiAs(page: Page): Promise<{ request: APIRequestContext; csrf: string }> {
  const me = await page.request.get('/api/v1/auth/me');
  expect(me.ok()).toBe(true);
  const body = (await me.json()) as { csrfToken: string | null };
  return { request: page.request, csrf: body.csrfToken ?? '' };
}

export async function demoProjectId(page: Page): Promise<string> {
  const res = await page.request.get('/api/v1/projects');
  const projects = (await res.json()) as { id: string; name: string }[];
  const demo = projects.find((p) => p.name === 'demo');
  if (!demo) throw new Error('The stack has no project named "demo" (npm start creates it).');
  return demo.id;
}
