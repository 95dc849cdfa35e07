import type { ProjectMcpView } from '@lemniscate/contracts';
import { printable, renderMcp } from '../../../src/commands/mcp';

const pin = (c: string) => `sha256:${c.repeat(64)}`;

function view(description: string): ProjectMcpView {
  return {
    projectId: 'p',
    policyVersion: 2,
    servers: [
      {
        name: 'files',
        kind: 'local',
        command: ['node', 'tools/mcp.cjs'],
        credential: null,
        tools: { default: 'ask', free: ['read_file'], forbidden: [], readOnly: [] },
        pinned: { read_file: pin('a'), write_file: pin('0') },
        lastListing: {
          at: '2026-12-04T09:00:00.000Z',
          sessionId: 'ses_1',
          tools: [
            { name: 'read_file', description: 'Read a file.', pin: pin('a'), status: 'pinned' },
            { name: 'write_file', description, pin: pin('b'), status: 'changed' },
            { name: 'search', description: 'Search.', pin: pin('c'), status: 'unpinned' },
          ],
        },
        lastError: null,
      },
    ],
  };
}

describe('lemni mcp list', () => {
  it('shows each tool with its status and the pinned: lines that approve what is not pinned, keeping the pins in force', () => {
    const out = renderMcp('demo', view('Write a file.'), true);
    expect(out).toContain('files (local, in the sandbox: node tools/mcp.cjs)');
    expect(out).toMatch(/write_file\s+CHANGED since pinned\s+Write a file\./);
    expect(out).toMatch(/search\s+not pinned yet/);
    expect(out).toContain('To approve these descriptions as listed, publish the policy with, under mcp.servers.files:');
    expect(out).toContain(`      write_file: "${pin('b')}"`);
    expect(out).toContain(`      search: "${pin('c')}"`);
    expect(out).toContain(`      read_file: "${pin('a')}"`);
  });

  it("writes a server's control characters out instead of sending them to the terminal", () => {
    const hostile = 'Write a file.\u001b[2K\u001b[1A\rpinned\nsecond line\u0007';
    const out = renderMcp('demo', view(hostile), true);
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(out).toContain('Write a file.\\x1b[2K\\x1b[1A\\x0dpinned second line\\x07');
    expect(printable('a\tb')).toBe('a\tb');
  });

  it('says when the policy enables no server', () => {
    expect(renderMcp('demo', { projectId: 'p', policyVersion: null, servers: [] }, false)).toBe('The policy in force for demo enables no MCP server: a session is offered no MCP tool.\n');
  });
});
