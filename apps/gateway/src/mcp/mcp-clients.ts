import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { McpExit } from '@lemniscate/contracts';
import type { McpServer } from '@lemniscate/policy';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import type { ExecHostPort } from '../exec-host/exec-host.port';
import { RelayTransport } from './relay-transport';

const CLIENT_INFO = { name: 'lemniscate-gateway', version: '0.1.0' };

/** A tool as a server lists it, with the pin of its description as it reads now. */
export interface McpListedTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  pin: string;
}

/** What one call gave: the text for the model (the server's words: untrusted), and whether it is an error. */
export interface McpCallResult {
  text: string;
  isError: boolean;
}

/** A server that could not be reached, started or that ended before answering: a tool error, never a session crash. */
export class McpServerError extends Error {
  constructor(
    message: string,
    /** What the server wrote on stderr before it ended (a local one), to be shown as data. */
    readonly stderr = '',
  ) {
    super(message);
    this.name = 'McpServerError';
  }
}

/** Keys sorted at every level: the same tool reads the same, whatever order a server sends. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.keys(value as object)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  return value;
}

/** The pin of a tool: what the model would be told of it (name, description, input schema), hashed. */
export function toolPin(tool: { name: string; description?: string; inputSchema?: unknown }): string {
  const text = JSON.stringify(canonical({ name: tool.name, description: tool.description ?? '', inputSchema: tool.inputSchema ?? {} }));
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

const CredentialsFile = z.record(
  z.string(),
  z.union([
    z.string().min(1),
    z.strictObject({
      header: z
        .string()
        .regex(/^[A-Za-z0-9-]{1,64}$/)
        .default('Authorization'),
      value: z.string().min(1),
    }),
  ]),
);

/**
 * The credentials remote servers are reached with, by the name the policy gives (AG7): a JSON file
 * the operator provides (`LEMNISCATE_MCP_CREDENTIALS_FILE`), read when a session needs one so a
 * rotation applies at the next connection. A value is a header's value (`Authorization` unless the
 * entry names another header). Nothing of it reaches a model, a sandbox, an event or the audit log.
 */
export class McpCredentials {
  constructor(private readonly file: string | undefined) {}

  /** Whether the gateway holds a credential of this name (never its value). */
  async has(name: string): Promise<boolean> {
    return (await this.read())[name] !== undefined;
  }

  async header(name: string): Promise<{ header: string; value: string }> {
    const entry = (await this.read())[name];
    if (entry === undefined) {
      throw new McpServerError(
        this.file
          ? `The gateway holds no MCP credential named "${name}" (in LEMNISCATE_MCP_CREDENTIALS_FILE); an operator adds it there.`
          : `The gateway holds no MCP credentials at all (LEMNISCATE_MCP_CREDENTIALS_FILE is not set), so "${name}" cannot be sent.`,
      );
    }
    return typeof entry === 'string' ? { header: 'Authorization', value: entry } : entry;
  }

  private async read(): Promise<z.output<typeof CredentialsFile>> {
    if (!this.file) return {};
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      throw new McpServerError(`The MCP credentials file cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); an operator fixes LEMNISCATE_MCP_CREDENTIALS_FILE.`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new McpServerError('The MCP credentials file is not JSON; an operator fixes LEMNISCATE_MCP_CREDENTIALS_FILE.');
    }
    const result = CredentialsFile.safeParse(parsed);
    // The file's values are never quoted back: only where it is wrong.
    if (!result.success)
      throw new McpServerError(
        `The MCP credentials file is malformed at ${result.error.issues.map((i) => i.path.join('.') || '(top)').join(', ')}; each entry is a header value, or {"header", "value"}.`,
      );
    return result.data;
  }
}

/** The text of a tool result for the model: text parts as they are, anything else described, never decoded. */
function resultText(result: { content?: unknown; structuredContent?: unknown }): string {
  const parts: string[] = [];
  for (const part of Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : []) {
    if (part.type === 'text' && typeof part.text === 'string') parts.push(part.text);
    else if (part.type === 'resource' && part.resource && typeof (part.resource as { text?: unknown }).text === 'string') parts.push((part.resource as { text: string }).text);
    else parts.push(`[${String(part.type)}${typeof part.mimeType === 'string' ? ` ${part.mimeType}` : ''} not shown]`);
  }
  if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  return parts.join('\n');
}

function ended(server: string, exit: McpExit): McpServerError {
  const how =
    exit.class === 'timeout'
      ? 'was stopped at its time limit'
      : exit.class === 'oom'
        ? 'ran out of memory'
        : exit.class === 'output_truncated'
          ? "wrote more than the sandbox's output cap and was ended"
          : exit.exitCode !== null
            ? `ended with exit status ${exit.exitCode}`
            : 'ended';
  return new McpServerError(`The MCP server "${server}" ${how} before it answered.${exit.message ? ` ${exit.message}` : ''}`, exit.stderr);
}

/**
 * The MCP clients of one session tree (AG7), with the official SDK. A local server runs inside the
 * session's sandbox through the exec-host's relay, started for one listing or one call and ended
 * with it (nothing of it runs between the agent's actions). A remote server is reached by the
 * gateway only, at the URL the policy lists, with the named credential added here; it is never
 * followed to another address (redirects are refused), and its connection is kept for the tree.
 */
export class McpClients {
  private readonly remotes = new Map<string, Promise<Client>>();

  constructor(
    private readonly deps: {
      execHost: ExecHostPort;
      /** The sandbox the tree's commands run in (null before it exists). */
      sandboxId: () => string | null;
      credentials: McpCredentials;
      signal: AbortSignal;
    },
  ) {}

  async list(server: string, declared: McpServer): Promise<McpListedTool[]> {
    return this.with(server, declared, async (client, timeout) => {
      const tools: McpListedTool[] = [];
      let cursor: string | undefined;
      // A server pages its list; a bounded number of pages, so a server cannot keep the session listing.
      for (let page = 0; page < 20; page++) {
        const res = await client.listTools(cursor ? { cursor } : undefined, { timeout, signal: this.deps.signal });
        for (const t of res.tools) {
          tools.push({ name: t.name, description: t.description ?? '', inputSchema: t.inputSchema as Record<string, unknown>, pin: toolPin(t) });
        }
        cursor = res.nextCursor;
        if (!cursor) break;
      }
      return tools;
    });
  }

  async call(server: string, declared: McpServer, tool: string, args: Record<string, unknown>): Promise<McpCallResult> {
    return this.with(server, declared, async (client, timeout) => {
      const res = await client.callTool({ name: tool, arguments: args }, undefined, { timeout, signal: this.deps.signal });
      return { text: resultText(res as { content?: unknown; structuredContent?: unknown }), isError: res.isError === true };
    });
  }

  async close(): Promise<void> {
    const clients = [...this.remotes.values()];
    this.remotes.clear();
    await Promise.all(clients.map((c) => c.then((client) => client.close()).catch(() => undefined)));
  }

  private async with<T>(server: string, declared: McpServer, fn: (client: Client, timeoutMs: number) => Promise<T>): Promise<T> {
    if (declared.local) {
      const sandboxId = this.deps.sandboxId();
      if (!sandboxId) throw new McpServerError(`The MCP server "${server}" runs in the session's sandbox, which does not exist yet.`);
      const timeoutMs = declared.local.timeoutSeconds * 1000;
      const transport = new RelayTransport(this.deps.execHost, sandboxId, { server, command: declared.local.command, memoryMb: declared.local.memoryMb, timeoutMs }, this.deps.signal);
      const client = new Client(CLIENT_INFO, { capabilities: {} });
      try {
        await client.connect(transport, { timeout: timeoutMs, signal: this.deps.signal });
        return await fn(client, timeoutMs);
      } catch (err) {
        if (this.deps.signal.aborted) throw err;
        if (transport.exit) throw ended(server, transport.exit);
        throw asServerError(server, err);
      } finally {
        await client.close().catch(() => undefined);
      }
    }
    const remote = declared.remote!;
    const timeoutMs = remote.timeoutSeconds * 1000;
    const key = `${server}\0${remote.url}\0${remote.credential ?? ''}`;
    let connecting = this.remotes.get(key);
    if (!connecting) {
      connecting = this.connectRemote(server, remote, timeoutMs);
      this.remotes.set(key, connecting);
      // A connection that failed is tried afresh next time.
      connecting.catch(() => this.remotes.delete(key));
    }
    try {
      return await fn(await connecting, timeoutMs);
    } catch (err) {
      if (this.deps.signal.aborted) throw err;
      throw asServerError(server, err);
    }
  }

  private async connectRemote(server: string, remote: NonNullable<McpServer['remote']>, timeoutMs: number): Promise<Client> {
    const headers: Record<string, string> = {};
    if (remote.credential) {
      const { header, value } = await this.deps.credentials.header(remote.credential);
      headers[header] = value;
    }
    const transport = new StreamableHTTPClientTransport(new URL(remote.url), {
      requestInit: { headers },
      // Only the URL the administrator listed: a redirect elsewhere would carry the credential along.
      fetch: (url, init) => fetch(url, { ...init, redirect: 'error' }),
    });
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    try {
      await client.connect(transport, { timeout: timeoutMs, signal: this.deps.signal });
    } catch (err) {
      throw new McpServerError(`The MCP server "${server}" at ${remote.url} could not be reached: ${errorText(err)}`);
    }
    return client;
  }
}

function errorText(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  return [e.message, e.cause?.code ?? e.cause?.message].filter(Boolean).join(' — ');
}

function asServerError(server: string, err: unknown): McpServerError {
  if (err instanceof McpServerError) return err;
  const text = errorText(err);
  if (/timed out/i.test(text)) return new McpServerError(`The MCP server "${server}" did not answer within its time limit (${text}).`);
  return new McpServerError(`The MCP server "${server}" failed: ${text}`);
}
