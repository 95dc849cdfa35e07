import { DbSessionRecorder, type DbRecorderDeps } from '../../../src/runtime/db-recorder';
import type { EventsService } from '../../../src/events/events.service';

/** The recorder's choice of what reaches the root's live stream; persistence is covered end to end. */
function recorderFor(session: { id: string; rootId: string }) {
  const published: Array<{ type: string; sessionId: string; payload: Record<string, unknown> }> = [];
  const events = { publishMany: async (es: typeof published) => void published.push(...es) } as unknown as EventsService;
  const recorder = new DbSessionRecorder({ events } as DbRecorderDeps, { ...session, projectId: 'prj', agent: 'general' });
  return { recorder, published };
}

describe('DbSessionRecorder events on the root stream', () => {
  it("publishes a child's events on the root's stream with the child's id", async () => {
    const { recorder, published } = recorderFor({ id: 'child', rootId: 'root' });
    await recorder.emit({ type: 'model_text', text: 'hi' } as never);
    await recorder.flush();
    expect(published).toEqual([{ type: 'model_text', sessionId: 'root', projectId: 'prj', payload: { text: 'hi', subSessionId: 'child' } }]);
  });

  it("keeps a child's ending off the root's stream, whose readers stop at a terminal event", async () => {
    const { recorder, published } = recorderFor({ id: 'child', rootId: 'root' });
    await recorder.emit({ type: 'session_completed', status: 'completed', stopReason: null, summary: 'done', exitCode: 0 } as never);
    await recorder.emit({ type: 'session_stopped', status: 'stopped', stopReason: 'limit_actions', class: 'limit_actions', summary: null, exitCode: 3 } as never);
    await recorder.flush();
    expect(published).toEqual([]);
  });

  it("publishes the root's own ending", async () => {
    const { recorder, published } = recorderFor({ id: 'root', rootId: 'root' });
    await recorder.emit({ type: 'session_completed', status: 'completed', stopReason: null, summary: 'done', exitCode: 0 } as never);
    await recorder.flush();
    expect(published.map((e) => [e.type, e.sessionId])).toEqual([['session_completed', 'root']]);
  });
});

describe('DbSessionRecorder and the audit sinks’ refusal mode (T2)', () => {
  it('refuses to propose a tool call while no sink can record: no row, no entry', async () => {
    const created: unknown[] = [];
    const appended: unknown[] = [];
    const deps = {
      audit: { refusal: () => 'This action is refused because no audit sink can record it right now (siem: down).', record: async (e: unknown) => void appended.push(e) },
      toolCalls: { create: async (row: unknown) => (created.push(row), row) },
    } as unknown as DbRecorderDeps;
    const recorder = new DbSessionRecorder(deps, { id: 'ses', rootId: 'ses', projectId: 'prj', agent: 'general' });
    await expect(recorder.proposeToolCall({ name: 'Bash', arguments: { command: 'ls' }, agent: 'general' })).rejects.toMatchObject({
      code: 'audit_unrecorded',
      message: expect.stringContaining('no audit sink can record'),
    });
    expect(created).toEqual([]);
    expect(appended).toEqual([]);
  });
});
