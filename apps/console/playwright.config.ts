import { fileURLToPath } from 'node:url';
import { defineConfig } from '@playwright/test';

const here = fileURLToPath(new URL('.', import.meta.url));

// Browser tests use Debian's Chromium; Playwright never downloads a browser here.
const chromium = {
  executablePath: process.env.LEMNISCATE_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
};
const port = Number(process.env.LEMNISCATE_HARNESS_PORT ?? 5199);
const stackUrl = process.env.LEMNISCATE_STACK_URL;

export default defineConfig({
  testDir: './e2e',
  outputDir: '../../artifacts/console/test-results',
  fullyParallel: true,
  forbidOnly: !!process.env.CI,
  retries: 0,
  workers: process.env.CI ? 2 : undefined,
  reporter: [['list']],
  // A 2-core machine running two browsers, the preview server and tracing stalls for seconds at a time;
  // a page that never shows what is expected still fails, only later.
  timeout: 60_000,
  expect: { timeout: 15_000 },
  use: {
    browserName: 'chromium',
    launchOptions: chromium,
    viewport: { width: 1360, height: 900 },
    trace: 'retain-on-failure',
  },
  projects: [
    // Pure views against sample data: no gateway needed.
    { name: 'views', testIgnore: /stack\//, use: { baseURL: `http://127.0.0.1:${port}` } },
    // The whole stack (npm start); its tests skip themselves unless LEMNISCATE_STACK_URL is set.
    { name: 'stack', testMatch: /stack\/.*\.spec\.ts/, use: { baseURL: stackUrl ?? 'http://127.0.0.1:9' }, fullyParallel: false },
  ],
  webServer: {
    // A production build of the app and the harness, served by `vite preview` (see vite.config.ts).
    command: `npx vite build --config vite.config.ts --logLevel warn && npx vite preview --config vite.config.ts --port ${port} --strictPort --host 127.0.0.1`,
    env: { LEMNISCATE_CONSOLE_TEST_BUILD: '1' },
    cwd: here,
    url: `http://127.0.0.1:${port}/harness/index.html`,
    reuseExistingServer: !process.env.CI,
    timeout: 120_000,
  },
});
