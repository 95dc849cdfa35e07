import { SessionWrites } from '../../../src/runtime/session-writes';
import type { EventsService } from '../../../src/events/events.service';

/** An events service whose writes fail while `down` is set, recording what it stored. */
function events() {
  const stored: string[] = [];
  const state = { down: false };
  const service = {
    publishMany: async (batch: { type: string }[]) => {
      if (state.down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      stored.push(...batch.map((e) => e.type));
    },
  } as unknown as EventsService;
  return { service, stored, state };
}

const ev = (type: string) => ({ type, sessionId: 's1', projectId: 'p1', payload: {} }) as never;

describe('SessionWrites', () => {
  it('stores the events queued a few awaits apart, before the loop next waits, in one statement', async () => {
    const e = events();
    const batches = jest.spyOn(e.service, 'publishMany');
    const writes = new SessionWrites(e.service);
    writes.event(ev('tool_call_proposed'));
    for (let turn = 0; turn < 20; turn++) await Promise.resolve();
    writes.event(ev('decision'));
    writes.op(async () => undefined);
    await writes.flush();
    expect(batches.mock.calls.map(([batch]) => batch.map((b) => b.type))).toEqual([['tool_call_proposed', 'decision']]);
  });

  it('a batch that fails is kept, in order with what follows it, and written at the next flush once the database is back', async () => {
    const e = events();
    const writes = new SessionWrites(e.service);
    const order: string[] = [];
    e.state.down = true;
    writes.event(ev('tool_call_proposed'));
    writes.event(ev('decision'));
    // The failure is thrown once, at the next flush (or write), so the loop ends on it.
    await expect(writes.flush()).rejects.toThrow('ECONNREFUSED');
    expect(e.stored).toEqual([]);
    writes.op(async () => void order.push('result row'));
    await expect(writes.flush()).rejects.toThrow('ECONNREFUSED');
    expect(order).toEqual([]);
    e.state.down = false;
    writes.event(ev('session_failed'));
    await writes.flush();
    expect(e.stored).toEqual(['tool_call_proposed', 'decision', 'session_failed']);
    expect(order).toEqual(['result row']);
  });

  it('a write made while a failure is pending throws that failure, and is still written once the database is back', async () => {
    const e = events();
    const writes = new SessionWrites(e.service);
    e.state.down = true;
    writes.event(ev('decision'));
    await new Promise((r) => setTimeout(r, 10));
    expect(() => writes.event(ev('tool_call_proposed'))).toThrow('ECONNREFUSED');
    e.state.down = false;
    await writes.flush();
    expect(e.stored).toEqual(['decision', 'tool_call_proposed']);
  });

  it('an outage the retry rides out loses nothing and throws nothing', async () => {
    const e = events();
    let attempts = 0;
    const writes = new SessionWrites(e.service, async (_what, work) => {
      for (;;) {
        attempts++;
        try {
          return await work();
        } catch (error) {
          if (attempts >= 3) throw error;
          if (attempts === 2) e.state.down = false;
        }
      }
    });
    e.state.down = true;
    writes.event(ev('tool_call_proposed'));
    await writes.flush();
    expect(e.stored).toEqual(['tool_call_proposed']);
    expect(attempts).toBe(3);
  });

  it('a write that fails for a reason other than the database being away is dropped once reported; the rest go on', async () => {
    const e = events();
    const writes = new SessionWrites(e.service);
    writes.op(async () => {
      throw Object.assign(new Error('value too long for type character varying(64)'), { code: '22001', severity: 'ERROR' });
    });
    writes.event(ev('after'));
    await expect(writes.flush()).rejects.toThrow('value too long');
    expect(e.stored).toEqual(['after']);
    await writes.flush();
  });

  it('an op that fails while the database is away stays ahead of the events queued after it', async () => {
    const e = events();
    const writes = new SessionWrites(e.service);
    let fail = true;
    const done: string[] = [];
    writes.op(async () => {
      if (fail) throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' });
      done.push('op');
    });
    writes.event(ev('after'));
    await expect(writes.flush()).rejects.toThrow('administrator command');
    expect(e.stored).toEqual([]);
    fail = false;
    await writes.flush();
    expect(done).toEqual(['op']);
    expect(e.stored).toEqual(['after']);
  });
});
