import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, runnerImport, type Plugin } from 'vite';
import Ajv2020 from 'ajv/dist/2020';
import standaloneCode from 'ajv/dist/standalone';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The policy editor validates against the JSON schema libs/policy exports. Ajv normally compiles a
 * schema with `new Function`, which a strict Content-Security-Policy (no 'unsafe-eval') forbids, so
 * the validator is generated here as plain source and bundled like any other module.
 */
function policyValidator(): Plugin {
  const id = 'virtual:policy-validator';
  const resolved = `\0${id}`;
  return {
    name: 'lemniscate-policy-validator',
    resolveId: (source) => (source === id ? resolved : undefined),
    async load(source) {
      if (source !== resolved) return undefined;
      // Build-time only: the console ships a precompiled validator, never the schema compiler. The
      // schema comes from the library's source (found through the workspace package), run by
      // Vite's module runner, so no prior build of libs/policy is needed.
      const policyDir = dirname(createRequire(import.meta.url).resolve('@lemniscate/policy/package.json'));
      const { module } = await runnerImport<{ policyJsonSchema: Record<string, unknown> }>(join(policyDir, 'src/schema.ts'));
      const { policyJsonSchema } = module;
      const ajv = new Ajv2020({ allErrors: true, strict: false, code: { source: true, esm: true } });
      const validate = ajv.compile(policyJsonSchema);
      // The form reads the enums (tools, effects, modes) from the same schema the validator uses.
      return `${standaloneCode(ajv, validate)}\nexport const policySchema = ${JSON.stringify(policyJsonSchema)};\n`;
    },
  };
}

const gateway = process.env.LEMNISCATE_GATEWAY_URL ?? 'http://127.0.0.1:8080';
// The browser tests serve a production build of the app and of the view harness: far fewer
// requests per page than the dev server, and the code that ships is the code tested.
const forTests = process.env.LEMNISCATE_CONSOLE_TEST_BUILD === '1';
export const testBuildDir = here('../../node_modules/.cache/lemniscate-console-test');

export default defineConfig({
  root: here('.'),
  plugins: [policyValidator()],
  resolve: {
    alias: {
      '@lemniscate/contracts': here('../../libs/contracts/src/index.ts'),
      '@lemniscate/policy': here('../../libs/policy/src/index.ts'),
    },
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
    // The policy editor chunk (CodeMirror, YAML, the validator) is loaded only by administrators.
    chunkSizeWarningLimit: 700,
    rolldownOptions: {
      input: forTests ? { main: here('index.html'), harness: here('harness/index.html') } : { main: here('index.html') },
      onwarn(warning, handle) {
        // React Server Components markers in client libraries; meaningless in a browser bundle.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        handle(warning);
      },
    },
  },
});
