/**
 * Server-sent events as the WHATWG HTML standard defines them: lines end with CRLF, LF or CR,
 * `data:` lines of one event are joined with "\n", a blank line dispatches, `:` starts a comment.
 * Bytes arrive in arbitrary chunks, so nothing assumes a chunk holds whole lines or whole UTF-8
 * characters.
 */
export interface SseEvent {
  event: string;
  data: string;
}

export class SseDecoder {
  private readonly text = new TextDecoder('utf-8');
  private buffer = '';
  private eventName = '';
  private dataLines: string[] = [];
  private sawData = false;
  private pendingCr = false;

  /** Feeds one chunk; returns the events it completed. */
  push(chunk: Uint8Array): SseEvent[] {
    return this.consume(this.text.decode(chunk, { stream: true }));
  }

  /**
   * Flushes at end of stream. A line cut off without its line break is discarded; complete `data:`
   * lines missing only the closing blank line are still delivered, because some servers close the
   * connection right after their last line (the standard would drop them; a cut JSON payload is
   * caught by the caller's parsing anyway).
   */
  end(): SseEvent[] {
    const events = this.consume(this.text.decode());
    this.buffer = '';
    this.pendingCr = false;
    const last = this.line('');
    if (last) events.push(last);
    return events;
  }

  private consume(input: string): SseEvent[] {
    let text = input;
    // A CR ended the previous chunk; a LF at the start of the next text belongs to the same line
    // break. An empty chunk (or one holding only part of a character) decides nothing yet.
    if (this.pendingCr && text !== '') {
      if (text.startsWith('\n')) text = text.slice(1);
      this.pendingCr = false;
    }
    this.buffer += text;
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const ch = this.buffer[i];
      if (ch !== '\n' && ch !== '\r') continue;
      const line = this.buffer.slice(start, i);
      if (ch === '\r') {
        if (i + 1 < this.buffer.length) {
          if (this.buffer[i + 1] === '\n') i++;
        } else {
          this.pendingCr = true;
        }
      }
      start = i + 1;
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') {
      if (!this.sawData) {
        this.eventName = '';
        return undefined;
      }
      const event = { event: this.eventName || 'message', data: this.dataLines.join('\n') };
      this.eventName = '';
      this.dataLines = [];
      this.sawData = false;
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.dataLines.push(value);
      this.sawData = true;
    } else if (field === 'event') {
      this.eventName = value;
    }
    // `id` and `retry` concern reconnecting EventSource clients; a model turn is never resumed.
    return undefined;
  }
}
