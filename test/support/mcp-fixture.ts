import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The fixture server's source (test/fixtures/mcp/files-server.ts). */
export const MCP_FIXTURE_SOURCE = join(__dirname, '..', 'fixtures', 'mcp', 'files-server.ts');

/**
 * Bundles the fixture MCP server with the SDK into one CommonJS file for the sandbox image's Node
 * (18): the server then runs inside a sandbox from the working copy, with nothing to install there.
 */
export function bundleMcpServer(outFile: string): string {
  mkdirSync(dirname(outFile), { recursive: true });
  execFileSync(process.execPath, [join(__dirname, 'bundle-mcp-server.mjs'), outFile, MCP_FIXTURE_SOURCE], { stdio: ['ignore', 'ignore', 'inherit'] });
  return outFile;
}
