import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

const gateway = process.env.LEMNISCATE_GATEWAY_URL ?? 'http://127.0.0.1:8080';
// The browser tests serve a production build of the app and of the view harness: far fewer
// requests per page than the dev server, and the code that ships is the code tested.
const forTests = process.env.LEMNISCATE_CONSOLE_TEST_BUILD === '1';
export const testBuildDir = here('../../node_modules/.cache/lemniscate-console-test');

export default defineConfig({
  root: here('.'),
  resolve: {
    // The policy library's browser entry (its schema and validator, no Node module): the editor
    // checks a draft with the very function `lemni policy check` and the gateway's publish use.
    alias: [
      { find: '@lemniscate/contracts', replacement: here('../../libs/contracts/src/index.ts') },
      { find: /^@lemniscate\/policy\/check$/, replacement: here('../../libs/policy/src/check.ts') },
      { find: /^@lemniscate\/policy$/, replacement: here('../../libs/policy/src/index.ts') },
    ],
  },
  // Both pages are crawled for dependencies before the first request: a dependency found later
  // makes the dev server reload the page, which a browser test would see as a navigation.
  optimizeDeps: { entries: ['index.html', 'harness/index.html'] },
  server: {
    proxy: {
      '/api': { target: gateway, changeOrigin: false, ws: true },
    },
  },
  build: {
    outDir: forTests ? testBuildDir : here('dist'),
    emptyOutDir: true,
    sourcemap: true,
    // The policy editor chunk (CodeMirror, YAML, the policy validator) is loaded only by administrators.
    chunkSizeWarningLimit: 700,
    rolldownOptions: {
      input: forTests ? { main: here('index.html'), harness: here('harness/index.html') } : { main: here('index.html') },
      output: {
        // zod-config.ts must run before any schema is built (zod decides at construction whether it
        // may compile with eval). In one chunk with zod it does, however the rest of the app is split.
        codeSplitting: { groups: [{ name: 'zod', test: /[\\/](node_modules[\\/]zod[\\/]|src[\\/]zod-config\.ts$)/ }] },
      },
      onwarn(warning, handle) {
        // React Server Components markers in client libraries; meaningless in a browser bundle.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        handle(warning);
      },
    },
  },
});
