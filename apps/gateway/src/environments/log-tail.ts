import type { EnvironmentLog } from '@lemniscate/contracts';
import { ExecHostCallError, type ExecHostPort } from '../exec-host/exec-host.port';

/** How much of a preparation's log the gateway keeps once the job is over (its last bytes). */
export const LOG_TAIL_BYTES = 64 * 1024;
/** Pages read in one go before giving up on reaching the end (a log that grows faster than it is read). */
const MAX_PAGES = 4096;

/**
 * The end of a preparation's log as it is read page by page from the exec-host: at most
 * LOG_TAIL_BYTES, cut on a character boundary, with the byte offset in the whole log where it begins.
 */
export class LogTail {
  /** The offset of the next byte to read. */
  offset = 0;
  private bytes = Buffer.alloc(0);

  /** Where the kept bytes begin in the whole log. */
  get start(): number {
    return this.offset - this.bytes.length;
  }

  get text(): string {
    return this.bytes.toString('utf8');
  }

  clone(): LogTail {
    const copy = new LogTail();
    copy.offset = this.offset;
    copy.bytes = Buffer.from(this.bytes);
    return copy;
  }

  add(page: EnvironmentLog): void {
    // A page that does not continue what was read (the exec-host dropped the head of a long log): start over from it.
    if (page.offset !== this.offset) this.bytes = Buffer.alloc(0);
    let bytes = Buffer.concat([this.bytes, Buffer.from(page.text, 'utf8')]);
    if (bytes.length > LOG_TAIL_BYTES) {
      let cut = bytes.length - LOG_TAIL_BYTES;
      // Never begin inside a character: skip UTF-8 continuation bytes (10xxxxxx).
      while (cut < bytes.length && ((bytes[cut] as number) & 0xc0) === 0x80) cut++;
      bytes = bytes.subarray(cut);
    }
    this.bytes = Buffer.from(bytes);
    this.offset = Math.max(page.nextOffset, page.offset + Buffer.byteLength(page.text, 'utf8'));
  }

  /**
   * Reads what the log holds beyond `offset`, page after page, until a page brings nothing new.
   * 'gone' when the exec-host no longer knows the job (its cache was cleaned, or it lost the job).
   */
  async readOn(execHost: ExecHostPort, jobId: string, signal?: AbortSignal): Promise<{ complete: boolean } | 'gone'> {
    for (let i = 0; i < MAX_PAGES; i++) {
      let page: EnvironmentLog;
      try {
        page = await execHost.environmentLog(jobId, this.offset, signal);
      } catch (err) {
        if (err instanceof ExecHostCallError && err.code === 'job_not_found') return 'gone';
        throw err;
      }
      const before = this.offset;
      this.add(page);
      if (page.text === '' || this.offset <= before) return { complete: page.complete };
    }
    return { complete: false };
  }
}

/** A page of a kept tail, as the exec-host would have answered it: from `offset`, never before the tail's start. */
export function pageOfTail(jobId: string, tail: string, tailOffset: number, offset: number): EnvironmentLog {
  const bytes = Buffer.from(tail, 'utf8');
  const end = tailOffset + bytes.length;
  const from = Math.min(end, Math.max(tailOffset, offset));
  return { jobId, text: bytes.subarray(from - tailOffset).toString('utf8'), offset: from, nextOffset: end, complete: true };
}
