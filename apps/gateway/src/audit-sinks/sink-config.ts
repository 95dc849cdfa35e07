// Where the audit log is streamed as it is written (T2): the deployment's sinks, read once at start
// from the JSON file LEMNISCATE_AUDIT_SINKS_FILE names. A file that cannot be used stops the start
// with a sentence naming the file and the field, never a silent default.
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';

const Name = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1–63 lower-case letters, digits, "-" or "_", starting with a letter or digit');
const AbsolutePath = z.string().refine((p) => isAbsolute(p) && !p.includes('\0'), 'must be an absolute path');
const Format = z.enum(['json', 'ocsf']).default('json');
const From = z.enum(['start', 'now']).default('start');

const SyslogSink = z.strictObject({
  name: Name,
  type: z.literal('syslog'),
  /** `tcp://host:port` (RFC 6587 octet counting) or `tls://host:port` (RFC 5425). */
  url: z.string().refine((u) => /^(tcp|tls):\/\/[^/\s]+:\d+\/?$/.test(u) && URL.canParse(u), 'must be tcp://host:port or tls://host:port'),
  /** tls:// only: the CA that signed the receiver's certificate (PEM); the system's CAs without it. */
  caFile: AbsolutePath.optional(),
  /** tls:// only: the name the receiver's certificate must carry, when it is not the URL's host. */
  serverName: z.string().min(1).optional(),
  format: Format,
  /** RFC 5424 facility; 13 is "log audit". */
  facility: z.number().int().min(0).max(23).default(13),
  appName: z
    .string()
    .regex(/^[!-~]{1,48}$/, 'must be 1–48 printable ASCII characters without spaces')
    .default('lemniscate'),
  /** A record longer than this has its payload replaced by its size (the entry's hash still names it). */
  maxMessageBytes: z
    .number()
    .int()
    .min(2048)
    .max(16 * 1024 * 1024)
    .default(64 * 1024),
  from: From,
});

const WebhookSink = z.strictObject({
  name: Name,
  type: z.literal('webhook'),
  url: z.string().refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an https:// URL'),
  /** A file holding the HMAC-SHA256 key the receiver checks `X-Lemniscate-Signature` with (at least 32 bytes). */
  secretFile: AbsolutePath,
  /** The CA of the receiver's certificate (PEM), when it is not among the system's. */
  caFile: AbsolutePath.optional(),
  format: Format,
  /** Entries per request. */
  batch: z.number().int().min(1).max(1000).default(100),
  timeoutSeconds: z.number().int().min(1).max(120).default(10),
  from: From,
});

const FileSink = z.strictObject({
  name: Name,
  type: z.literal('file'),
  /** JSON lines, appended; the directory must exist. Created with mode 0600. */
  path: AbsolutePath,
  format: Format,
  from: From,
});

const SinkEntry = z.discriminatedUnion('type', [SyslogSink, WebhookSink, FileSink], {
  error: (issue) => (issue.code === 'invalid_union' ? 'type must be "syslog", "webhook" or "file"' : undefined),
});

export const AuditSinksFile = z.strictObject({
  /**
   * `continue` (the default): the platform goes on when no sink can record, and says so (metrics,
   * the console's audit page). `refuse`: every action that would be audited is refused while no
   * sink can record, as Vault does with its audit devices.
   */
  onUnrecorded: z.enum(['continue', 'refuse']).default('continue'),
  sinks: z.array(SinkEntry).min(1, 'must name at least one sink').max(16, 'holds at most 16 sinks'),
});

export type SyslogSinkConfig = z.infer<typeof SyslogSink>;
export type WebhookSinkConfig = z.infer<typeof WebhookSink> & { secret: Buffer; ca: string | undefined };
export type FileSinkConfig = z.infer<typeof FileSink>;
export type SinkConfig = (SyslogSinkConfig & { ca: string | undefined }) | WebhookSinkConfig | FileSinkConfig;

export interface AuditSinksConfig {
  onUnrecorded: 'continue' | 'refuse';
  sinks: SinkConfig[];
}

export class AuditSinksConfigError extends Error {}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** Reads and checks the sinks file; every problem is named with the file and the field. */
export function loadAuditSinks(file: string): AuditSinksConfig {
  const fail = (what: string) => new AuditSinksConfigError(`The gateway cannot start: the audit sinks file ${file} ${what}.`);
  if (!isAbsolute(file)) throw new AuditSinksConfigError(`The gateway cannot start: LEMNISCATE_AUDIT_SINKS_FILE must be an absolute path, not "${file}".`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw fail(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw fail(`is not JSON (${(e as Error).message})`);
  }
  const parsed = AuditSinksFile.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'the document'}: ${i.message}`);
    throw fail(`is not usable: ${issues.join('; ')}`);
  }
  const names = new Set<string>();
  const sinks: SinkConfig[] = parsed.data.sinks.map((sink, i) => {
    if (names.has(sink.name)) throw fail(`is not usable: sinks.${i}.name: "${sink.name}" names two sinks`);
    names.add(sink.name);
    if (sink.type === 'file') return sink;
    if (sink.type === 'syslog') {
      if (sink.url.startsWith('tcp:') && (sink.caFile || sink.serverName)) throw fail(`is not usable: sinks.${i}: caFile and serverName apply to tls:// only`);
      return { ...sink, ca: sink.caFile ? readPemFile(sink.caFile, `sinks.${i}.caFile`, fail) : undefined };
    }
    const url = new URL(sink.url);
    // A signed body still tells a listener on the path everything the audit log holds.
    if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) throw fail(`is not usable: sinks.${i}.url: plain http:// is accepted for a receiver on this machine only (localhost); use https://`);
    let secret: Buffer;
    try {
      secret = Buffer.from(readFileSync(sink.secretFile, 'utf8').trim(), 'utf8');
    } catch (e) {
      throw fail(`is not usable: sinks.${i}.secretFile (${sink.secretFile}) cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    if (secret.length < 32) throw fail(`is not usable: sinks.${i}.secretFile (${sink.secretFile}) holds ${secret.length} bytes; an HMAC key needs at least 32`);
    return { ...sink, secret, ca: sink.caFile ? readPemFile(sink.caFile, `sinks.${i}.caFile`, fail) : undefined };
  });
  return { onUnrecorded: parsed.data.onUnrecorded, sinks };
}

function readPemFile(path: string, field: string, fail: (what: string) => Error): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw fail(`is not usable: ${field} (${path}) cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw fail(`is not usable: ${field} (${path}) holds no PEM certificate`);
  return text;
}

/** Where a sink sends, for people: its URL or path, never its secret. */
export function sinkTarget(sink: SinkConfig): string {
  return sink.type === 'file' ? sink.path : sink.url;
}
