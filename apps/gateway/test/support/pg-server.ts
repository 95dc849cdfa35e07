// The PostgreSQL server of the medium, e2e and fault tiers, without Jest: its URL, a database name in
// it, and a proxy that takes it away as a restart would. Usable from tests and from bench/ scripts.
import { connect, createServer, type Socket } from 'node:net';

export const DEFAULT_TEST_PG_URL = 'postgres://postgres@/postgres?host=/var/run/postgresql';
/** The server the medium tests use: `LEMNISCATE_TEST_PG_URL`, else the local socket. */
export function testPostgresUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env['LEMNISCATE_TEST_PG_URL']?.trim() || DEFAULT_TEST_PG_URL;
}

/** Replaces the database name in a PostgreSQL URL, keeping credentials and query (socket host). */
export function withDatabaseName(url: string, name: string): string {
  const match = /^(postgres(?:ql)?:\/\/[^/?]*)(?:\/([^?]*))?(\?.*)?$/.exec(url);
  if (!match) throw new Error(`Not a PostgreSQL URL: ${url}`);
  return `${match[1]}/${encodeURIComponent(name)}${match[3] ?? ''}`;
}

/**
 * A TCP proxy between the gateway and PostgreSQL that can take the database away the way a restart
 * does, without restarting the server other tests share: `cut(ms)` resets every open connection and
 * refuses new ones for `ms`; `loseNextCommitReply()` lets the next COMMIT reach the server, waits for
 * the server's answer, and breaks the connection instead of passing it on (the commit landed; the
 * client cannot know).
 */
export interface PgProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url: string;
  port: number;
  /** Connections accepted so far, and those reset by cuts. */
  readonly stats: { accepted: number; reset: number; commitRepliesLost: number };
  cut(ms: number): Promise<void>;
  /** Takes the database away until `restore()`. */
  down(): Promise<void>;
  restore(): Promise<void>;
  loseNextCommitReply(): void;
  /** The same for the next statement whose text matches `pattern` (an autocommit INSERT). */
  loseNextReplyTo(pattern: RegExp): void;
  close(): Promise<void>;
}

export async function startPgProxy(url: string, port = 0): Promise<PgProxy> {
  const target = new URL(url);
  const targetHost = target.hostname || '127.0.0.1';
  const targetPort = Number(target.port || 5432);
  const pairs = new Set<{ client: Socket; server: Socket }>();
  const stats = { accepted: 0, reset: 0, commitRepliesLost: 0 };
  let lose: RegExp | null = null;
  const COMMIT = /\bcommit\0/i;

  const server = createServer((client) => {
    stats.accepted++;
    const upstream = connect(targetPort, targetHost);
    const pair = { client, server: upstream };
    pairs.add(pair);
    let swallowing = false;
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (lose && lose.test(chunk.toString('latin1'))) {
        lose = null;
        swallowing = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (swallowing) {
        // The server has answered the COMMIT: it is durable. The client never hears of it.
        stats.commitRepliesLost++;
        client.resetAndDestroy();
        drop();
        return;
      }
      client.write(chunk);
    });
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
  });
  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  const actualPort = await listen(port);
  let listening = true;
  const down = async () => {
    if (listening) {
      listening = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const pair of [...pairs]) {
        stats.reset++;
        pair.client.resetAndDestroy();
        pair.server.destroy();
        pairs.delete(pair);
      }
      await closed;
    }
  };
  const restore = async () => {
    if (!listening) {
      await listen(actualPort);
      listening = true;
    }
  };
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(actualPort);
  proxied.searchParams.delete('host');
  return {
    url: proxied.toString(),
    port: actualPort,
    stats,
    down,
    restore,
    async cut(ms) {
      await down();
      await new Promise((r) => setTimeout(r, ms));
      await restore();
    },
    loseNextCommitReply() {
      lose = COMMIT;
    },
    loseNextReplyTo(pattern) {
      lose = pattern;
    },
    async close() {
      await down();
    },
  };
}
