import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LoginResponse } from '@lemniscate/contracts';
import type { CliContext } from '../context';
import { CliError } from '../errors';
import { GatewayClient } from '../gateway/gateway-client';

/** How long `lemni login --sso` waits for the browser to come back. */
export const SSO_WAIT_MS = 5 * 60 * 1000;

type Answer = { code: string } | { error: string };

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, text: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body style="font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;line-height:1.5"><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>`;
}

/**
 * The CLI's loopback address (RFC 8252): 127.0.0.1 on a port the system picks, answering one
 * `GET /callback?code=…` (or `?error=…`) from the browser the gateway sent there; nothing else.
 */
async function listenForAnswer(waitMs: number): Promise<{ port: number; answer: Promise<Answer>; close: () => void }> {
  let settle!: (a: Answer) => void;
  const answer = new Promise<Answer>((resolve) => (settle = resolve));
  let done = false;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== '/callback' || done) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found.');
      return;
    }
    const code = url.searchParams.get('code');
    const error = url.searchParams.get('error');
    if (!code && !error) {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('This address takes the answer of a Lemniscate sign-in only.');
      return;
    }
    done = true;
    const headers = {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    };
    if (code) res.writeHead(200, headers).end(page('Signed in', 'Lemniscate received your sign-in. You can close this tab and return to the terminal.'));
    else res.writeHead(200, headers).end(page('Sign-in refused', error!));
    settle(code ? { code } : { error: error! });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const timer = setTimeout(() => settle({ error: `no sign-in came back within ${Math.round(waitMs / 60_000)} minutes` }), waitMs);
  return {
    port: (server.address() as AddressInfo).port,
    answer,
    close: () => {
      clearTimeout(timer);
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Opens the system's browser on the address, if there is one; the address is printed either way. */
function openBrowser(url: string): void {
  const [command, args] = process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', url]] : ['xdg-open', [url]];
  try {
    const child = spawn(command as string, args as string[], { stdio: 'ignore', detached: true });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // No browser here: the person opens the printed address.
  }
}

/**
 * `lemni login --sso`: a sign-in with the deployment's identity provider in the browser, its answer
 * brought to this CLI's loopback address as a one-time code, redeemed at the gateway with the verifier
 * whose SHA-256 went with the start (only this process knows it). Answers a session, as a password
 * sign-in does, from which the caller makes its API token.
 */
export async function ssoSession(ctx: CliContext, gateway: string, options: { openBrowser: boolean; waitMs?: number }): Promise<{ cookie: string; csrfToken: string; response: LoginResponse }> {
  const client = new GatewayClient(gateway, undefined, ctx.fetch);
  const info = await client.oidcInfo();
  if (!info.enabled) throw new CliError(`The gateway at ${gateway} does not offer single sign-on: sign in with --email (a password) or --token.`, 'usage');
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const waitMs = options.waitMs ?? SSO_WAIT_MS;
  const loopback = await listenForAnswer(waitMs);
  try {
    const url = `${gateway}/api/v1/auth/oidc/start?cliPort=${loopback.port}&cliChallenge=${challenge}`;
    const how = options.openBrowser
      ? 'Sign in with your identity provider in the browser that opens (or open this address in a browser on this machine)'
      : 'Open this address in a browser on this machine to sign in with your identity provider';
    ctx.stderr(`${how}:\n  ${url}\nWaiting up to ${Math.round(waitMs / 60_000)} minutes for the sign-in to come back to 127.0.0.1:${loopback.port}…\n`);
    if (options.openBrowser) openBrowser(url);
    const answer = await loopback.answer;
    if ('error' in answer) throw new CliError(`The sign-in did not complete: ${answer.error.replace(/[\r\n]+/g, ' ').slice(0, 500)}`, 'unauthenticated');
    return await client.oidcCli(answer.code, verifier);
  } finally {
    loopback.close();
  }
}
