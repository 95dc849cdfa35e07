import { StringDecoder } from 'node:string_decoder';

export type Stream = 'stdout' | 'stderr';

export function truncationMarker(capBytes: number): string {
  return `\n[lemniscate: output truncated at the cap of ${capBytes} bytes]\n`;
}

/**
 * Caps a command's combined output at `capBytes`. Bytes past the cap are counted and dropped; the
 * stream that crosses the cap gets one marker line. Multi-byte characters are never split, because
 * each stream is decoded with its own decoder.
 */
export class OutputCapper {
  private used = 0;
  private dropped = 0;
  private marked = false;
  private readonly decoders: Record<Stream, StringDecoder> = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };

  constructor(
    private readonly capBytes: number,
    private readonly emit: (stream: Stream, text: string) => void,
  ) {}

  get truncated(): boolean {
    return this.dropped > 0;
  }

  get droppedBytes(): number {
    return this.dropped;
  }

  push(stream: Stream, chunk: Buffer): void {
    if (chunk.length === 0) return;
    const room = this.capBytes - this.used;
    if (room <= 0) {
      this.dropped += chunk.length;
      this.mark(stream);
      return;
    }
    const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.used += kept.length;
    const text = this.decoders[stream].write(kept);
    if (text) this.emit(stream, text);
    if (kept.length < chunk.length) {
      this.dropped += chunk.length - kept.length;
      this.mark(stream);
    }
  }

  /** Flushes partial characters and marks truncation once. */
  end(): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = this.decoders[stream].end();
      if (rest && !this.truncated) this.emit(stream, rest);
    }
  }

  private mark(stream: Stream): void {
    if (this.marked) return;
    this.marked = true;
    // A character cut at the cap is dropped rather than emitted as a replacement character.
    this.decoders[stream] = new StringDecoder('utf8');
    this.emit(stream, truncationMarker(this.capBytes));
  }
}
