// A real rsyslog (Debian's rsyslogd) receiving RFC 5424 messages over TCP or TLS on a loopback port,
// writing each message's text to a file: the receiving end of the audit sink tests.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../../../../test/support/git-servers';

export const RSYSLOGD = '/usr/sbin/rsyslogd';

export interface RsyslogTls {
  ca: string;
  cert: string;
  key: string;
}

export interface Rsyslog {
  port: number;
  /** The file each received message's MSG part is written to, one per line. */
  received: string;
  /** What it received so far: the MSG parts, in order. */
  lines(): string[];
  /** Whole lines as rsyslog wrote them with their header fields: `<pri> <msgid> <structured data> <msg>`. */
  raw(): string[];
  stop(): Promise<void>;
  /** Starts it again on the same port, keeping what it received. */
  start(): Promise<void>;
  remove(): Promise<void>;
}

export function rsyslogAvailable(): boolean {
  return fs.existsSync(RSYSLOGD);
}

function config(dir: string, port: number, tls: RsyslogTls | undefined): string {
  const q = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  return [
    `global(workDirectory="${q(dir)}" maxMessageSize="256k"${tls ? ` defaultNetstreamDriverCAFile="${q(tls.ca)}" defaultNetstreamDriverCertFile="${q(tls.cert)}" defaultNetstreamDriverKeyFile="${q(tls.key)}"` : ''})`,
    `module(load="imtcp"${tls ? ' streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon"' : ''})`,
    'template(name="msgonly" type="string" string="%msg%\\n")',
    'template(name="fields" type="string" string="%pri% %msgid% %structured-data% %app-name% %msg%\\n")',
    'ruleset(name="audit") {',
    `  action(type="omfile" file="${q(path.join(dir, 'received.log'))}" template="msgonly")`,
    `  action(type="omfile" file="${q(path.join(dir, 'raw.log'))}" template="fields")`,
    '}',
    `input(type="imtcp" port="${port}" address="127.0.0.1" ruleset="audit")`,
    '',
  ].join('\n');
}

async function listening(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`rsyslogd exited (${child.exitCode}) before listening: ${log()}`);
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`rsyslogd did not listen on ${port} within 15 s: ${log()}`);
}

/** Starts rsyslogd in the foreground with a configuration of its own (no /dev/log, no system files). */
export async function startRsyslog(tls?: RsyslogTls): Promise<Rsyslog> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-rsyslog-'));
  const port = await freePort();
  const conf = path.join(dir, 'rsyslog.conf');
  fs.writeFileSync(conf, config(dir, port, tls));
  const received = path.join(dir, 'received.log');
  let child: ChildProcess | undefined;
  let output = '';
  const start = async () => {
    output = '';
    const c = spawn(RSYSLOGD, ['-n', '-f', conf, '-i', path.join(dir, 'rsyslogd.pid')], { stdio: ['ignore', 'pipe', 'pipe'] });
    c.stdout?.on('data', (b: Buffer) => (output += b.toString()));
    c.stderr?.on('data', (b: Buffer) => (output += b.toString()));
    child = c;
    await listening(port, c, () => output);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGTERM');
      setTimeout(() => c.kill('SIGKILL'), 5_000).unref();
    });
  };
  const read = (file: string) =>
    fs.existsSync(file)
      ? fs
          .readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
      : [];
  await start();
  return {
    port,
    received,
    lines: () => read(received).map((l) => l.replace(/^\uFEFF/, '').trimStart()),
    raw: () => read(path.join(dir, 'raw.log')),
    stop,
    start,
    remove: async () => {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
