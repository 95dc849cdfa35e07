// Bundles a fixture MCP server with the SDK into one CommonJS file for the sandbox image's Node (18).
// Run as a process (rolldown is an ES module the test runner does not load):
//   node test/support/bundle-mcp-server.mjs OUT [SOURCE]   (SOURCE: test/fixtures/mcp/files-server.ts)
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const [out, source = fileURLToPath(new URL('../fixtures/mcp/files-server.ts', import.meta.url))] = process.argv.slice(2);
await build({
  input: source,
  platform: 'node',
  logLevel: 'silent',
  output: { file: out, format: 'cjs', codeSplitting: false },
  transform: { target: 'node18' },
});
