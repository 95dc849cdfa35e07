import type { EnvironmentLog } from '@lemniscate/contracts';
import { ExecHostCallError, type ExecHostPort } from '../../../src/exec-host/exec-host.port';
import { LOG_TAIL_BYTES, LogTail, pageOfTail } from '../../../src/environments/log-tail';

/** An exec-host whose log routes serve `log` in pages of `page` bytes (cut on character boundaries). */
function serving(log: string, page: number, complete = true): ExecHostPort & { reads: number } {
  const bytes = Buffer.from(log, 'utf8');
  const host = {
    reads: 0,
    async environmentLog(jobId: string, offset: number): Promise<EnvironmentLog> {
      host.reads++;
      if (jobId === 'gone') throw new ExecHostCallError('job_not_found', 'There is no such job.', 404);
      let to = Math.min(bytes.length, offset + page);
      while (to < bytes.length && ((bytes[to] as number) & 0xc0) === 0x80) to--;
      return { jobId, text: bytes.subarray(offset, to).toString('utf8'), offset, nextOffset: to, complete: complete && to === bytes.length };
    },
  };
  return host as unknown as ExecHostPort & { reads: number };
}

describe('LogTail', () => {
  it('keeps the whole of a short log, read page by page', async () => {
    const tail = new LogTail();
    await expect(tail.readOn(serving('line 1\nline 2\n', 4), 'j')).resolves.toEqual({ complete: true });
    expect({ text: tail.text, start: tail.start, offset: tail.offset }).toEqual({ text: 'line 1\nline 2\n', start: 0, offset: 14 });
  });

  it('keeps only the last 64 KiB of a long log, beginning on a character boundary, with where it begins', async () => {
    const log = 'é'.repeat(50_000) + 'the end\n'; // 100,008 bytes of two-byte characters, then ASCII
    const tail = new LogTail();
    await tail.readOn(serving(log, 16 * 1024), 'j');
    const bytes = Buffer.byteLength(log);
    expect(tail.offset).toBe(bytes);
    expect(Buffer.byteLength(tail.text)).toBeLessThanOrEqual(LOG_TAIL_BYTES);
    expect(Buffer.byteLength(tail.text)).toBeGreaterThanOrEqual(LOG_TAIL_BYTES - 1);
    expect(tail.text.startsWith('é')).toBe(true);
    expect(Buffer.from(log).subarray(tail.start).toString('utf8')).toBe(tail.text);
  });

  it('continues from where it stopped, and says when the exec-host no longer knows the job', async () => {
    const tail = new LogTail();
    const host = serving('abcdef', 2, false);
    await expect(tail.readOn(host, 'j')).resolves.toEqual({ complete: false });
    const reads = host.reads;
    await expect(tail.readOn(host, 'j')).resolves.toEqual({ complete: false });
    expect(host.reads).toBe(reads + 1);
    await expect(new LogTail().readOn(host, 'gone')).resolves.toBe('gone');
  });

  it('serves a page of a kept tail as the exec-host would, never before where it begins', () => {
    expect(pageOfTail('j', 'world\n', 100, 0)).toEqual({ jobId: 'j', text: 'world\n', offset: 100, nextOffset: 106, complete: true });
    expect(pageOfTail('j', 'world\n', 100, 103)).toEqual({ jobId: 'j', text: 'ld\n', offset: 103, nextOffset: 106, complete: true });
    expect(pageOfTail('j', 'world\n', 100, 500)).toEqual({ jobId: 'j', text: '', offset: 106, nextOffset: 106, complete: true });
  });
});
