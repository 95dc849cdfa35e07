import { Command, Option } from 'commander';
import { createWriteStream, existsSync, readFileSync, writeFileSync, type WriteStream } from 'node:fs';
import { checkArchiveManifest } from '../audit/verify-archive';
import { verifyExportFile } from '../audit/verify-export';
import { connect, globalFlags, type CliContext } from '../context';
import { CliError, EXIT_FAILURE, EXIT_OK } from '../errors';
import { count } from '../output/table';

type Done = (code: Promise<number>) => void;

interface ExportFlags {
  format: 'jsonl' | 'csv';
  project?: string;
  user?: string;
  session?: string;
  kind?: string;
  from?: string;
  to?: string;
  afterSeq?: string;
  output?: string;
}

/** A `--from`/`--to` value as the gateway's filter takes it: an ISO-8601 timestamp (a date alone is its midnight UTC). */
function checkTime(value: string | undefined, flag: string): string | undefined {
  if (value === undefined) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) throw new CliError(`${flag} must be a date or time such as 2026-11-29 or 2026-11-29T10:00:00Z, not "${value}".`, 'usage');
  return new Date(at).toISOString();
}

/** `SEQ:HASH` as printed after a verify. */
function parseAnchor(value: string, where: string): { seq: number; hash: string } {
  const m = /^(\d+):([0-9a-f]{64})$/.exec(value);
  if (!m) throw new CliError(`${where} must be an entry number and its SHA-256 hash as printed by \`lemni audit verify\`, such as 4182:${'0'.repeat(64)}, not "${value.slice(0, 80)}".`, 'usage');
  return { seq: Number(m[1]), hash: m[2]! };
}

/** Counts the entries of an export as it streams and keeps the last entry number (JSONL `{"seq":N`, CSV `N,`). */
class ExportCursor {
  entries = 0;
  last: number | undefined;
  private partial = '';
  private header: boolean;

  constructor(format: 'jsonl' | 'csv') {
    this.header = format === 'csv';
  }

  push(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      if (this.header) {
        this.header = false;
        continue;
      }
      // An entry starts with its number then its time; a CSV field's own line breaks never do.
      const seq = /^(?:\{"seq":(\d+),"at":"|(\d+),\d{4}-\d\d-\d\dT)/.exec(line);
      if (!seq) continue;
      this.entries += 1;
      this.last = Number(seq[1] ?? seq[2]);
    }
  }
}

interface FileOptions {
  anchor: { seq: number; hash: string } | undefined;
  filtered: boolean;
  json: boolean;
  after: { seq: number; hash: string } | undefined;
  signature: string | undefined;
  publicKey: string | undefined;
}

/**
 * `audit verify --file`: an export or an archive checked offline; the anchor file, if any, is only
 * read. An archive's signed manifest (`<file>.sig.json`, or --signature) is checked first and says
 * where the chain continues from.
 */
async function verifyFile(ctx: CliContext, file: string, o: FileOptions): Promise<number> {
  if (!existsSync(file)) throw new CliError(`There is no file ${file} to verify.`, 'usage');
  const manifestFile = o.signature ?? (existsSync(`${file}.sig.json`) ? `${file}.sig.json` : undefined);
  if (o.signature !== undefined && !existsSync(o.signature)) throw new CliError(`There is no signature file ${o.signature}.`, 'usage');
  if (o.publicKey !== undefined && manifestFile === undefined)
    throw new CliError(`--public-key checks an archive's signature, and ${file} has none beside it (${file}.sig.json); pass --signature FILE.`, 'usage');
  let trusted: string | undefined;
  if (o.publicKey !== undefined) {
    if (!existsSync(o.publicKey)) throw new CliError(`There is no public key file ${o.publicKey}.`, 'usage');
    trusted = readFileSync(o.publicKey, 'utf8');
  }
  let after = o.after;
  let signed: Awaited<ReturnType<typeof checkArchiveManifest>> | undefined;
  if (manifestFile !== undefined) {
    signed = await checkArchiveManifest(file, manifestFile, trusted);
    if (!signed.ok) {
      if (o.json) ctx.stdout(`${JSON.stringify({ ok: false, problem: signed.problem, archive: signed.manifest })}\n`);
      else ctx.stdout(`The archive ${file} does not verify: ${signed.problem}\n`);
      return EXIT_FAILURE;
    }
    const m = signed.manifest!;
    if (after && (after.seq !== m.firstSeq - 1 || after.hash !== m.firstPrevHash)) {
      const problem = `The archive starts after entry ${m.firstSeq - 1} (hash ${m.firstPrevHash.slice(0, 16)}…), not after the entry given with --after (${after.seq}).`;
      if (o.json) ctx.stdout(`${JSON.stringify({ ok: false, problem, archive: m })}\n`);
      else ctx.stdout(`The archive ${file} does not verify: ${problem}\n`);
      return EXIT_FAILURE;
    }
    if (m.firstSeq > 1) after = { seq: m.firstSeq - 1, hash: m.firstPrevHash };
  }
  const r = await verifyExportFile(file, { anchor: o.anchor, filtered: o.filtered, after });
  if (r.ok && signed?.manifest) {
    const m = signed.manifest;
    if (r.firstSeq !== m.firstSeq || r.lastSeq !== m.lastSeq || r.lastHash !== m.lastHash || r.entries !== m.entries) {
      Object.assign(r, { ok: false, problem: `The archive holds entries ${r.firstSeq} to ${r.lastSeq}, not the ${m.firstSeq} to ${m.lastSeq} its manifest signs.` });
    }
  }
  const kind = signed ? 'archive' : 'export';
  if (o.json) ctx.stdout(`${JSON.stringify(signed ? { ...r, archive: signed.manifest, keyTrusted: signed.keyTrusted } : r)}\n`);
  else if (!r.ok) ctx.stdout(`The ${kind} ${file} does not verify: ${r.problem}\n`);
  else {
    const gaps = r.gaps === 0 ? 'every link between them followed' : `links followed except across ${count(r.gaps, 'gap')} where the export was filtered`;
    const what = r.entries === 1 ? `1 entry (entry ${r.firstSeq}), its hash recomputed` : `${r.entries} entries (entries ${r.firstSeq} to ${r.lastSeq}), each hash recomputed, ${gaps}`;
    const anchored = r.anchorChecked ? `, and entry ${o.anchor?.seq} is the anchor's` : '';
    const continued = after ? `, continuing the chain after entry ${after.seq}` : '';
    ctx.stdout(`The ${kind} ${file} is intact: ${what}${continued}${anchored}.\n`);
    if (signed?.manifest) {
      const m = signed.manifest;
      ctx.stdout(
        `Signed by key ${m.keyId.slice(0, 16)}…${signed.keyTrusted ? ' (the key you gave)' : ''} when the chain's head was entry ${m.headSeq}; the next archive or export goes on with --after ${m.lastSeq}:${m.lastHash}\n`,
      );
      if (signed.keyTrusted === null)
        ctx.stderr("The signature was checked with the key the manifest carries: pass --public-key with the deployment's archive key (archive-signing-key.pub.pem) to know who signed it.\n");
    } else if (!o.anchor)
      ctx.stderr(
        `Without an anchor this proves the file is self-consistent, not that it is the platform's log: pass --anchor SEQ:HASH from a \`lemni audit verify\` run. Head of this file: ${r.lastSeq}:${r.lastHash}\n`,
      );
  }
  return r.ok ? EXIT_OK : EXIT_FAILURE;
}

export function registerAudit(program: Command, ctx: CliContext, done: Done): void {
  const audit = program.command('audit').description('the tamper-evident audit log (security officers and administrators)');
  audit
    .command('verify')
    .description('walk the hash chain; exit 0 when intact, 1 naming the first altered, removed or reordered entry')
    .option('--anchor <seq:hash>', 'the head printed by an earlier verify, kept outside the database: also catches a log rewritten end to end')
    .option('--anchor-file <file>', 'read the anchor from this file when it exists, and write the new head to it after an intact verification')
    .option('--file <export.jsonl>', 'verify a JSON-lines export offline instead of asking the gateway: every hash recomputed, every link followed')
    .option('--filtered', 'with --file: the export was filtered, so entries missing between two are expected (their links cannot be checked)')
    .option('--after <seq:hash>', 'with --file: the file continues the chain after this entry (the last of the archive before it)')
    .option('--signature <file>', "with --file: the archive's signed manifest (default: FILE.sig.json when it exists)")
    .option('--public-key <pem>', "with --file: the deployment's archive key (archive-signing-key.pub.pem): the archive must be signed by it")
    .option('--json', 'print the verification result as JSON')
    .addHelpText(
      'after',
      [
        '',
        'Why an anchor: someone holding the database could rewrite the log and re-hash every entry after',
        'the change, and the chain would hold again. The head (entry number and hash) printed after each',
        'verify, kept where that person cannot reach it, makes such a rewrite fail the next verify.',
        '',
        'Examples:',
        '  $ lemni --profile security audit verify',
        '  $ lemni audit verify --anchor 4182:9f2c…',
        '  $ lemni audit verify --anchor-file /secure/lemniscate-audit.anchor',
        '  $ lemni audit verify --file november.jsonl --anchor 4182:9f2c…',
        '  $ lemni audit verify --file lemniscate-audit-000000000001-000000100000.jsonl --public-key archive-signing-key.pub.pem',
        '',
        'Archives (retention): entries the gateway archived and removed are proven by their archive files;',
        'an archive is checked with its signed manifest beside it, and says where the next one goes on.',
      ].join('\n'),
    )
    .action((opts: { json?: boolean; anchor?: string; anchorFile?: string; file?: string; filtered?: boolean; after?: string; signature?: string; publicKey?: string }, cmd: Command) =>
      done(
        (async () => {
          if (opts.anchor !== undefined && opts.anchorFile !== undefined) throw new CliError('Give --anchor or --anchor-file, not both.', 'usage');
          let anchor: { seq: number; hash: string } | undefined;
          if (opts.anchor !== undefined) anchor = parseAnchor(opts.anchor, '--anchor');
          else if (opts.anchorFile !== undefined && existsSync(opts.anchorFile)) anchor = parseAnchor(readFileSync(opts.anchorFile, 'utf8').trim(), `The anchor file ${opts.anchorFile}`);
          for (const [flag, given] of [
            ['--filtered', opts.filtered],
            ['--after', opts.after],
            ['--signature', opts.signature],
            ['--public-key', opts.publicKey],
          ] as const) {
            if (given !== undefined && opts.file === undefined) throw new CliError(`${flag} goes with --file (an export or archive verified offline).`, 'usage');
          }
          if (opts.file !== undefined) {
            const after = opts.after !== undefined ? parseAnchor(opts.after, '--after') : undefined;
            return verifyFile(ctx, opts.file, { anchor, filtered: opts.filtered === true, json: opts.json === true, after, signature: opts.signature, publicKey: opts.publicKey });
          }
          const { client } = connect(ctx, globalFlags(cmd.optsWithGlobals()));
          const r = await client.auditVerify(anchor);
          if (opts.json) ctx.stdout(`${JSON.stringify(r)}\n`);
          else if (r.ok) {
            const from = anchor ? `, and it still leads to the anchor at entry ${anchor.seq}` : '';
            ctx.stdout(`The audit chain is intact${r.checked !== undefined ? ` (${r.checked} entries checked${from})` : ''}.\n`);
            if (r.archivedThrough) {
              ctx.stdout(
                `Entries 1 to ${r.archivedThrough.seq} were archived by the retention and removed from the database; the log goes on from the last archive (${r.archivedThrough.file}), which proves them: lemni audit verify --file ${r.archivedThrough.file}\n`,
              );
              if (anchor && anchor.seq < r.archivedThrough.seq) ctx.stderr(`Your anchor (entry ${anchor.seq}) is in an archive: check it there with --file and --anchor.\n`);
            }
          } else {
            const at = r.seq !== undefined ? ` at entry ${r.seq}${r.problem ? ` (${r.problem})` : ''}` : '';
            ctx.stdout(`The audit chain is broken${at}.${r.message ? ` ${r.message}` : ''}\n`);
          }
          if (r.ok && r.lastSeq !== undefined && r.lastHash !== undefined) {
            const head = `${r.lastSeq}:${r.lastHash}`;
            if (opts.anchorFile !== undefined) {
              writeFileSync(opts.anchorFile, `${head}\n`, { mode: 0o600 });
              ctx.stderr(`Head ${head} written to ${opts.anchorFile}; the next verify with --anchor-file checks against it.\n`);
            } else if (!opts.json) {
              const why = anchor ? '' : 'Verified without an anchor, so a log rewritten and re-hashed from end to end by someone holding the database would pass. ';
              ctx.stderr(`${why}Keep this head outside the database and pass it next time: --anchor ${head}\n`);
            }
          }
          return r.ok ? EXIT_OK : EXIT_FAILURE;
        })(),
      ),
    );
  audit
    .command('export')
    .description('stream the audit log, filtered, as JSON lines or CSV')
    .addOption(new Option('--format <format>', 'jsonl or csv').choices(['jsonl', 'csv']).default('jsonl'))
    .option('--project <name>', 'only this project')
    .option('--user <id-or-email>', 'only this person (a user id or an email)')
    .option('--session <id>', 'only this session')
    .option('--kind <kind>', 'only this kind of entry')
    .option('--from <time>', 'entries at or after this time')
    .option('--to <time>', 'entries before this time')
    .option('--after-seq <n>', 'only entries after this entry number: the cursor of an incremental export (printed after each export)')
    .option('-o, --output <file>', 'write to this file instead of standard output')
    .addHelpText(
      'after',
      '\nCSV has one column per field a SIEM filters on (tool, command, path, decision, rule, reason, approval, answer, exit code) and the rest of each entry in "details"; JSON lines keep every entry exactly as hashed, for `lemni audit verify --file`.\n\nExamples:\n  $ lemni audit export --format csv --from 2026-11-01 -o november.csv\n  $ lemni audit export --after-seq 4182 -o since-4182.jsonl\n  $ lemni audit export --session 01JD3W7Q8Z',
    )
    .action((opts: ExportFlags, cmd: Command) =>
      done(
        (async () => {
          let afterSeq: number | undefined;
          if (opts.afterSeq !== undefined) {
            afterSeq = Number(opts.afterSeq);
            if (!/^\d+$/.test(opts.afterSeq) || !Number.isSafeInteger(afterSeq)) throw new CliError(`--after-seq must be an entry number such as 4182, not "${opts.afterSeq}".`, 'usage');
          }
          const from = checkTime(opts.from, '--from');
          const to = checkTime(opts.to, '--to');
          const global = cmd.optsWithGlobals();
          const { client } = connect(ctx, globalFlags({ ...global, project: undefined }));
          const projectName = opts.project ?? (typeof global.project === 'string' ? global.project : undefined);
          const projectId = projectName ? (await client.projectByName(projectName)).id : undefined;
          let file: WriteStream | undefined;
          if (opts.output) file = createWriteStream(opts.output, { mode: 0o600 });
          // Chunks can split a multi-byte character; the decoder carries it over to the next chunk.
          const decoder = new TextDecoder();
          // The last entry number written, for the next incremental export: read from each line's start.
          const cursor = new ExportCursor(opts.format);
          try {
            await client.auditExport(
              { format: opts.format, project: projectId, user: opts.user, session: opts.session === undefined ? undefined : await client.sessionId(opts.session), kind: opts.kind, from, to, afterSeq },
              (chunk) => {
                const text = decoder.decode(chunk, { stream: true });
                cursor.push(text);
                if (file) file.write(chunk);
                else ctx.stdout(text);
              },
            );
            const rest = decoder.decode();
            cursor.push(rest);
            if (!file) ctx.stdout(rest);
          } finally {
            if (file) await new Promise<void>((resolve) => file.end(resolve));
          }
          // Said when writing to a file or exporting incrementally; a plain export to stdout stays silent.
          if (opts.output || afterSeq !== undefined) {
            const next = cursor.last ?? afterSeq;
            const where = opts.output ? `Audit log written to ${opts.output}` : 'Audit log exported';
            ctx.stderr(`${where}: ${count(cursor.entries, 'entry', 'entries')}${next !== undefined ? `; the next incremental export starts with --after-seq ${next}` : ''}.\n`);
          }
          return EXIT_OK;
        })(),
      ),
    );
}
