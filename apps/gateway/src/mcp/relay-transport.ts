import type { McpExit, McpMessage, McpOpenRequest } from '@lemniscate/contracts';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ExecHostPort } from '../exec-host/exec-host.port';

/**
 * The SDK's transport to a local MCP server that runs inside a session's sandbox: every message goes
 * through the exec-host's relay (McpRelay), never a socket into the sandbox. A request's `send` lasts
 * until the server answers it, asks something of the client first, or ends; what arrives meanwhile is
 * handed to the client in order. The server's end is the transport's close, so a call in flight fails
 * as the SDK fails a closed connection, with how the server ended kept in `exit`.
 */
export class RelayTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** How the server ended, once it has. */
  exit: McpExit | null = null;
  private processId: string | null = null;
  private readonly answered = new Set<string | number>();
  private closed = false;

  constructor(
    private readonly execHost: ExecHostPort,
    private readonly sandboxId: string,
    private readonly open: McpOpenRequest,
    private readonly signal?: AbortSignal,
  ) {}

  async start(): Promise<void> {
    this.processId = (await this.execHost.mcpOpen(this.sandboxId, this.open, this.signal)).processId;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const processId = this.processId;
    if (processId === null || this.closed) throw new Error(`The MCP server "${this.open.server}" is not running.`);
    const waitFor = 'method' in message && 'id' in message ? message.id : undefined;
    let res = await this.execHost.mcpMessage(this.sandboxId, processId, { message: message as McpMessage, ...(waitFor !== undefined ? { waitFor } : {}) }, this.signal);
    this.deliver(res.messages, res.exited);
    while (waitFor !== undefined && !this.answered.has(waitFor) && !this.exit && !this.closed) {
      res = await this.execHost.mcpMessage(this.sandboxId, processId, { waitFor }, this.signal);
      this.deliver(res.messages, res.exited);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.processId !== null && !this.exit) {
      this.exit = await this.execHost.mcpClose(this.sandboxId, this.processId).catch(() => null);
    }
    this.onclose?.();
  }

  private deliver(messages: McpMessage[], exited: McpExit | null): void {
    for (const m of messages) {
      if (m.id !== undefined && m.method === undefined) this.answered.add(m.id as string | number);
      this.onmessage?.(m as unknown as JSONRPCMessage);
    }
    if (exited && !this.exit) {
      this.exit = exited;
      if (!this.closed) {
        this.closed = true;
        this.onclose?.();
      }
    }
  }
}
