import { SessionEvent } from '@lemniscate/contracts';
import { freshDatabase, withTestDatabases } from '../support/db';
import { EventsRepository } from '../../src/db/repositories/events.repository';
import { EVENT_FAN_OUT } from '../../src/events/event-bus';
import { EventsService } from '../../src/events/events.service';
import type { PgNotifyFanOut } from '../../src/events/pg-notify.fan-out';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { SessionRunRegistry } from '../../src/sessions/session-run.registry';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, login, startGateway, tokenFor, type Gateway } from '../support/harness';
import { EventsClient, eventOf } from '../support/ws-client';

jest.setTimeout(60_000);

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let project: string;
  let dev: { token: string; userId: string };
  let other: { token: string; userId: string };
  let sessionId: string;
  const clients: EventsClient[] = [];
  const connect = async (options: Parameters<typeof EventsClient.connect>[1]) => {
    const c = await EventsClient.connect(gw.baseUrl, options);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'events');
    dev = await createUser(gw, admin, 'dev@example.test', 'developer', [project]);
    other = await createUser(gw, admin, 'other@example.test', 'developer', [project]);
    sessionId = (await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'watch me' })).body.id;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await gw?.close();
  });

  const ask = (command: string) => gw.app.get(ApprovalsService).request({ sessionId, kind: 'command', payload: { command }, agent: 'general' });

  it('closes a connection without credentials with a sentence', async () => {
    const c = await connect({});
    expect(await c.next()).toMatchObject({ type: 'error', code: 'unauthenticated' });
    expect((await c.closed).code).toBe(4401);
  });

  it('streams a session with increasing sequence numbers, then replays what a reconnecting client missed', async () => {
    const c = await connect({ token: dev.token });
    c.send({ type: 'subscribe', sessionId });
    expect(await c.next()).toEqual({ type: 'subscribed', sessionId, projectId: null, replayed: 0 });
    const a = await ask('npm ci');
    const requested = eventOf(await c.next());
    expect(requested).toMatchObject({ type: 'approval_requested', sessionId, projectId: project, approvalId: a.id, kind: 'command', subject: 'npm ci', thirdParty: false });
    const lastSeq = requested.seq as number;
    await c.close();

    await gw.http().post(`/api/v1/approvals/${a.id}/reject`).set(bearer(dev.token)).send({});
    await ask('npm test');
    const again = await connect({ token: dev.token });
    again.send({ type: 'subscribe', sessionId, sinceSeq: lastSeq });
    const replay = await again.until((m) => m.type === 'subscribed');
    const events = replay.filter((m) => m.type === 'event').map(eventOf);
    expect(events.map((e) => e.type)).toEqual(['approval_answered', 'approval_requested']);
    expect(events[0]).toMatchObject({ approvalId: a.id, answer: 'rejected', by: { kind: 'user', userId: dev.userId } });
    const seqs = events.map((e) => e.seq as number);
    expect(seqs[0]).toBeGreaterThan(lastSeq);
    expect(seqs[1]).toBeGreaterThan(seqs[0] as number);
    expect(replay.at(-1)).toMatchObject({ type: 'subscribed', replayed: 2 });
    // Session events have the shapes the CLI and the console validate against.
    for (const e of [requested, ...events]) expect(SessionEvent.safeParse(e).error).toBeUndefined();

    // Live again after the replay, without duplicates.
    await ask('npm run build');
    expect(eventOf(await again.next())).toMatchObject({ type: 'approval_requested', subject: 'npm run build' });
  });

  it("refuses a subscription to someone else's session, and a malformed message, with sentences", async () => {
    const c = await connect({ token: other.token });
    c.send({ type: 'subscribe', sessionId });
    expect(await c.next()).toMatchObject({ type: 'error', code: 'forbidden' });
    c.send({ type: 'subscribe' });
    expect(await c.next()).toMatchObject({ type: 'error', code: 'validation_failed', message: expect.stringContaining('give exactly one of "sessionId" or "projectId"') });
    c.socket.send('not json');
    expect(await c.next()).toEqual({ type: 'error', code: 'validation_failed', message: 'Each message must be one JSON object.' });
    c.socket.send('x'.repeat(100 * 1024));
    expect((await c.closed).code).toBe(1009);
  });

  it("a project stream shows a developer the project's events but not other people's sessions", async () => {
    const c = await connect({ token: other.token });
    c.send({ type: 'subscribe', projectId: project });
    expect(await c.next()).toMatchObject({ type: 'subscribed', projectId: project });
    await ask('hidden from other');
    await gw
      .http()
      .post(`/api/v1/projects/${project}/policy`)
      .set(bearer(admin))
      .send({ document: { version: 1 } });
    // Delivery is in seq order, so the policy event arriving first proves the approval event was withheld.
    expect(eventOf(await c.next())).toMatchObject({ type: 'policy_published', sessionId: null, projectId: project });
  });

  it('accepts the console cookie only from its own origin', async () => {
    const s = await login(gw, 'dev@example.test', 'a long enough password');
    const foreign = await connect({ headers: { cookie: s.cookie, origin: 'https://evil.example' } });
    expect(await foreign.next()).toMatchObject({ type: 'error', code: 'unauthenticated' });
    expect((await foreign.closed).code).toBe(4401);
    const host = new URL(gw.baseUrl).host;
    const own = await connect({ headers: { cookie: s.cookie, origin: `http://${host}` } });
    own.send({ type: 'subscribe', sessionId });
    expect(await own.next()).toMatchObject({ type: 'subscribed', sessionId });
  });

  it('closes the stream of a user who is revoked', async () => {
    const leaver = await createUser(gw, admin, 'leaver@example.test', 'developer', [project]);
    const c = await connect({ token: leaver.token });
    c.send({ type: 'subscribe', projectId: project });
    expect(await c.next()).toMatchObject({ type: 'subscribed' });
    await gw.http().post(`/api/v1/users/${leaver.userId}/revoke`).set(bearer(admin)).send({});
    expect((await c.closed).code).toBe(4403);
  });
});

describe('two gateway replicas on one PostgreSQL database', () => {
  it('deliver the same events in the same order; the replica that published them never reads them back, the other reads each', async () => {
    const database = await freshDatabase('postgres');
    const a = await startGateway(database);
    const b = await startGateway(database);
    try {
      const seenBy = (gw: Gateway) => {
        const seen: { seq: number; type: string; payload: Record<string, unknown> }[] = [];
        gw.app.get(EventsService).subscribe((e) => void seen.push({ seq: e.seq, type: e.type, payload: e.payload }));
        return seen;
      };
      const [onA, onB] = [seenBy(a), seenBy(b)];
      const readBackA = jest.spyOn(a.app.get(EventsRepository), 'findBySeq');
      const readBackB = jest.spyOn(b.app.get(EventsRepository), 'findBySeq');
      const events = a.app.get(EventsService);
      const published = [await events.publish({ type: 'one', payload: { n: 1 } }), ...(await events.publishMany([2, 3, 4].map((n) => ({ type: 'many', payload: { n } }))))];
      await until(async () => {
        await Promise.all([events.drained(), b.app.get(EventsService).drained()]);
        return onA.length >= 4 && onB.length >= 4;
      });
      const expected = published.map((e) => ({ seq: e.seq, type: e.type, payload: e.payload }));
      expect(onA).toEqual(expected);
      expect(onB).toEqual(expected);
      expect(readBackA).not.toHaveBeenCalled();
      expect(readBackB.mock.calls.map(([seq]) => seq)).toEqual(published.map((e) => e.seq));
    } finally {
      await a.close();
      await b.close();
      await database.close();
    }
  });

  it("delivers its own events from their copies, in order, when a notification comes in before its insert's answer", async () => {
    const database = await freshDatabase('postgres');
    const a = await startGateway(database);
    try {
      const repository = a.app.get(EventsRepository);
      const readBack = jest.spyOn(repository, 'findBySeq');
      const seen: number[] = [];
      a.app.get(EventsService).subscribe((e) => void seen.push(e.seq));
      const fanOut = a.app.get(EVENT_FAN_OUT) as PgNotifyFanOut;
      let inserted!: () => void;
      const committed = new Promise<void>((resolve) => (inserted = resolve));
      // The first insert commits (and notifies) at once, but its answer reaches the fan-out only
      // 300 ms later; a second event is published meanwhile and answered at once.
      const slow = fanOut.publish(async (channel) => {
        const rows = await repository.appendMany([{ sessionId: null, projectId: null, type: 'slow', payload: {} }], channel);
        inserted();
        await new Promise((r) => setTimeout(r, 300));
        return rows.map((r) => ({ seq: r.seq, type: r.type, sessionId: null, projectId: null, at: r.at.toISOString(), payload: {} }));
      });
      await committed;
      const fast = await a.app.get(EventsService).publish({ type: 'fast', payload: {} });
      const [first] = await slow;
      await until(async () => {
        await a.app.get(EventsService).drained();
        return seen.length >= 2;
      });
      expect(seen).toEqual([first!.seq, fast.seq]);
      expect(readBack).not.toHaveBeenCalled();
    } finally {
      await a.close();
      await database.close();
    }
  });

  it('fan events out with LISTEN/NOTIFY, and a stop taken by one cancels the loop running on the other', async () => {
    const database = await freshDatabase('postgres');
    const a = await startGateway(database);
    const b = await startGateway(database);
    const clients: EventsClient[] = [];
    try {
      const admin = (await tokenFor(a, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
      const project = await createProject(a, admin, 'replicas');
      const sessionId = (await a.http().post('/api/v1/sessions').set(bearer(admin)).send({ projectId: project, instruction: 'x' })).body.id as string;
      const run = b.app.get(SessionRunRegistry).register(sessionId);
      const aborted = new Promise((resolve) => run.signal.addEventListener('abort', () => resolve(run.signal.reason)));

      const watcher = await EventsClient.connect(b.baseUrl, { token: admin });
      clients.push(watcher);
      watcher.send({ type: 'subscribe', sessionId });
      expect(await watcher.next()).toMatchObject({ type: 'subscribed' });
      await a.app.get(ApprovalsService).request({ sessionId, kind: 'command', payload: { command: 'make' }, agent: 'general' });
      // The instruction event may still be in flight from replica A when the subscription starts.
      const seen = await watcher.until((m) => eventOf(m)?.type === 'approval_requested');
      expect(eventOf(seen.at(-1) ?? {})).toMatchObject({ type: 'approval_requested', subject: 'make' });

      const stop = await a.http().post(`/api/v1/sessions/${sessionId}/stop`).set(bearer(admin)).send({});
      expect(stop.status).toBe(200);
      await expect(aborted).resolves.toBe('stopped');
      const rest = await watcher.until((m) => eventOf(m)?.type === 'session_stopped');
      expect(rest.map((m) => eventOf(m).type)).toEqual(['approval_answered', 'session_stopped']);
      for (const m of [...seen, ...rest]) expect(SessionEvent.safeParse(eventOf(m)).error).toBeUndefined();
      const lastSeq = eventOf(rest.at(-1) ?? {}).seq as number;

      // B's listening connection drops: its clients are told to resume, and replay what they missed.
      await (b.app.get(EVENT_FAN_OUT) as PgNotifyFanOut).dropListener();
      const closed = await watcher.closed;
      expect(closed.code).toBe(1012);
      const session2 = (await a.http().post('/api/v1/sessions').set(bearer(admin)).send({ projectId: project, instruction: 'y' })).body.id as string;
      const resumed = await EventsClient.connect(b.baseUrl, { token: admin });
      clients.push(resumed);
      resumed.send({ type: 'subscribe', projectId: project, sinceSeq: lastSeq });
      const caughtUp = await resumed.until((m) => m.type === 'subscribed');
      expect(caughtUp.filter((m) => m.type === 'event').map((m) => [eventOf(m).type, eventOf(m).sessionId])).toEqual([['instruction', session2]]);
      await a.app.get(ApprovalsService).request({ sessionId: session2, kind: 'command', payload: { command: 'make again' }, agent: 'general' });
      expect(eventOf(await resumed.next())).toMatchObject({ type: 'approval_requested', subject: 'make again' });
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await a.close();
      await b.close();
      await database.close();
    }
  });
});
