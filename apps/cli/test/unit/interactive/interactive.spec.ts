import { CreateSessionRequest, type GatewayEvent, type ProjectView, type SessionView } from '@lemniscate/contracts';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bashCall, completed, result, started, stopped } from '../../support/events';
import { sessionView } from '../../support/fake-gateway';
import type { SessionRunApi } from '../../../src/session/session-api';
import type { StartSessionRequest } from '../../../src/gateway/gateway-client';
import { ApprovalDesk, parseMention, runInteractive } from '../../../src/interactive/interactive';
import type { AgentQuestion, ApprovalAnswer, ApprovalQuestion, Prompter, QuestionAnswer } from '../../../src/interactive/prompter';

const project: ProjectView = { id: 'p1', name: 'demo', repositorySource: '/nowhere/demo.git', defaultRef: 'main', createdAt: new Date().toISOString() };

/** An in-memory gateway: a test pushes events, and answers/stops turn into the events the gateway would send. */
class MemoryApi implements SessionRunApi {
  started: StartSessionRequest[] = [];
  answers: { id: string; answer: string; body: unknown }[] = [];
  stops: string[] = [];
  subagents: { parent: string; agent: string; instruction: string }[] = [];
  private streams = new Map<string, { queue: GatewayEvent[]; wake: (() => void) | null; seq: number }>();
  private n = 0;
  /** What happens after a person answers: the events the session produces next. */
  afterAnswer: (approvalId: string, answer: string) => Record<string, unknown>[] = () => [];
  onStart: (id: string) => void = () => undefined;

  async startSession(request: StartSessionRequest): Promise<SessionView> {
    // As the gateway does: the request must match the shared contract.
    CreateSessionRequest.parse(request);
    this.started.push(request);
    const id = `s${++this.n}`;
    this.streams.set(id, { queue: [], wake: null, seq: 0 });
    queueMicrotask(() => this.onStart(id));
    return sessionView(id, { agent: request.agent ?? 'general', mode: 'interactive', headless: false });
  }

  push(id: string, partial: Record<string, unknown>): void {
    const s = this.streams.get(id)!;
    s.queue.push({ seq: ++s.seq, sessionId: id, projectId: 'p1', at: new Date().toISOString(), ...partial } as GatewayEvent);
    s.wake?.();
  }

  followed: string[] = [];

  async *follow(id: string): AsyncIterable<GatewayEvent> {
    this.followed.push(id);
    const s = this.streams.get(id)!;
    for (;;) {
      while (s.queue.length === 0) await new Promise<void>((r) => (s.wake = r));
      const e = s.queue.shift()!;
      yield e;
      if (['session_completed', 'session_stopped', 'session_failed'].includes(e.type)) return;
    }
  }

  async getSession(id: string): Promise<SessionView> {
    return sessionView(id, { status: 'completed', summary: null });
  }

  async stopSession(id: string): Promise<unknown> {
    this.stops.push(id);
    this.push(id, stopped('stopped'));
    return {};
  }

  async answerApproval(id: string, answer: 'approve' | 'reject', body: unknown): Promise<unknown> {
    this.answers.push({ id, answer, body });
    const session = [...this.streams.keys()].at(-1)!;
    this.push(session, { type: 'approval_answered', approvalId: id, answer: answer === 'approve' ? 'approved' : 'rejected', by: { kind: 'user', userId: 'u1' } });
    for (const e of this.afterAnswer(id, answer)) this.push(session, e);
    return {};
  }

  async startSubagent(parent: string, agent: string, instruction: string): Promise<SessionView> {
    this.subagents.push({ parent, agent, instruction });
    // As the gateway does: a mention starts a child of the running session, never a session of its own.
    const id = `s${++this.n}`;
    this.streams.set(id, { queue: [], wake: null, seq: 0 });
    queueMicrotask(() => this.onStart(id));
    return sessionView(id, { agent, parentSessionId: parent, depth: 1, mode: 'interactive', headless: false });
  }
}

class ScriptedPrompter implements Prompter {
  questions: ApprovalQuestion[] = [];
  asked: AgentQuestion[] = [];
  replies: QuestionAnswer[] = [];
  mention?: Prompter['mention'];
  watchKeys?: Prompter['watchKeys'];
  constructor(
    private readonly instructions: (string | null)[],
    private readonly answers: ApprovalAnswer[],
  ) {}
  async instruction(): Promise<string | null> {
    return this.instructions.shift() ?? null;
  }
  async approval(q: ApprovalQuestion): Promise<ApprovalAnswer | null> {
    this.questions.push(q);
    return this.answers.shift() ?? 'reject';
  }
  async extension(): Promise<'grant' | 'decline' | null> {
    return 'grant';
  }
  async question(q: AgentQuestion): Promise<QuestionAnswer | null> {
    this.asked.push(q);
    return this.replies.shift() ?? 'decline';
  }
  /** What the person types at each text prompt (a reject reason), in order; '' once used up. */
  texts: string[] = [];
  prompts: string[] = [];
  async text(message: string): Promise<string> {
    this.prompts.push(message);
    return this.texts.shift() ?? '';
  }
  async confirm(): Promise<boolean> {
    return false;
  }
}

let cwd: string;
beforeEach(() => (cwd = mkdtempSync(path.join(os.tmpdir(), 'lemni-int-'))));
afterEach(() => rmSync(cwd, { recursive: true, force: true }));

function io(interrupts: (() => void)[] = []) {
  const out: string[] = [];
  return {
    out,
    io: {
      stdout: (s: string) => out.push(s),
      stderr: (s: string) => out.push(s),
      onInterrupt: (h: () => void) => {
        interrupts.push(h);
        return () => interrupts.splice(interrupts.indexOf(h), 1);
      },
      spinner: { start: () => undefined, stop: () => undefined },
    },
  };
}

const diff = 'diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-old\n+new\n';

describe('interactive sessions', () => {
  it('asks for approval with the exact command, sends the answer, and shows the run to its end', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      for (const e of [
        started(),
        ...bashCall('c1', 'npm install', 'ask'),
        { type: 'approval_requested', approvalId: 'a1', callId: 'c1', agent: 'general', kind: 'command', thirdParty: false, subject: 'npm install', reapprovalExempt: true },
      ])
        api.push(id, e);
    };
    api.afterAnswer = () => [result('c1', 'added 3 packages'), completed('Installed.')];
    const prompter = new ScriptedPrompter(['install the deps', null], ['approve_identical']);
    const t = io();
    const code = await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, t.io);
    expect(code).toBe(0);
    expect(api.started[0]).toMatchObject({ projectId: 'p1', instruction: 'install the deps', mode: 'interactive' });
    expect(prompter.questions[0]).toMatchObject({ approvalId: 'a1', kind: 'command', offerIdentical: true });
    expect(prompter.questions[0]!.shown).toContain('npm install');
    expect(api.answers).toEqual([{ id: 'a1', answer: 'approve', body: { rememberCommand: true } }]);
    expect(t.out.join('')).toContain('Installed.');
  });

  it('shows a diff with third-party files flagged, and a rejection is sent as such', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      api.push(id, started());
      api.push(id, {
        type: 'approval_requested',
        approvalId: 'a2',
        callId: null,
        agent: 'general',
        kind: 'diff',
        thirdParty: true,
        subject: diff,
        thirdPartyFiles: [{ path: '.github/workflows/ci.yml', class: 'ci' }],
      });
    };
    api.afterAnswer = () => [completed('Left CI alone.')];
    const prompter = new ScriptedPrompter(['touch ci', null], ['reject']);
    await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
    const q = prompter.questions[0]!;
    expect(q.offerIdentical).toBe(false);
    expect(q.thirdParty).toEqual(['.github/workflows/ci.yml']);
    expect(q.shown).toContain('+new');
    expect(q.shown).toContain('THIRD-PARTY FILE');
    expect(q.shown).toContain('.github/workflows/ci.yml (ci)');
    expect(api.answers).toEqual([{ id: 'a2', answer: 'reject', body: { rememberCommand: false } }]);
    expect(prompter.prompts).toEqual(['Reason for the agent (Enter for none)']);
  });

  it('a rejection at the terminal asks what to tell the agent and sends it as the reason', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      api.push(id, started());
      api.push(id, { type: 'approval_requested', approvalId: 'a3', callId: 'c3', agent: 'general', kind: 'command', thirdParty: false, subject: 'npm publish' });
    };
    api.afterAnswer = () => [completed('Did not publish.')];
    const prompter = new ScriptedPrompter(['publish it', null], ['reject']);
    prompter.texts = ['  never publish from a session  '];
    await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
    expect(prompter.prompts).toEqual(['Reason for the agent (Enter for none)']);
    expect(api.answers).toEqual([{ id: 'a3', answer: 'reject', body: { rememberCommand: false, reason: 'never publish from a session' } }]);
  });

  it('approving asks nothing more', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      api.push(id, started());
      api.push(id, { type: 'approval_requested', approvalId: 'a4', callId: 'c4', agent: 'general', kind: 'command', thirdParty: false, subject: 'npm test' });
    };
    api.afterAnswer = () => [completed('Tested.')];
    const prompter = new ScriptedPrompter(['test it', null], ['approve']);
    await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
    expect(prompter.prompts).toEqual([]);
    expect(api.answers).toEqual([{ id: 'a4', answer: 'approve', body: { rememberCommand: false } }]);
  });

  it('Ctrl-C during a session stops it (A3) and goes back to the prompt', async () => {
    const api = new MemoryApi();
    const interrupts: (() => void)[] = [];
    api.onStart = (id) => {
      api.push(id, started());
      for (const e of bashCall('c1', 'sleep 600')) api.push(id, e);
      // The person presses Ctrl-C while the command runs.
      setImmediate(() => interrupts.at(-1)?.());
    };
    const prompter = new ScriptedPrompter(['wait a long time', null], []);
    const t = io(interrupts);
    const code = await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, t.io);
    expect(api.stops).toEqual(['s1']);
    expect(code).toBe(3);
    expect(t.out.join('')).toContain('Stopping the session');
    expect(interrupts).toEqual([]);
  });

  it('"Stop the session" in an approval prompt stops it instead of answering', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      api.push(id, started());
      api.push(id, { type: 'approval_requested', approvalId: 'a3', callId: null, agent: 'general', kind: 'command', thirdParty: false, subject: 'rm -rf build' });
    };
    await runInteractive(api, new ScriptedPrompter(['clean', null], ['stop']), { project, includeUncommitted: false, cwd }, io().io);
    expect(api.stops).toEqual(['s1']);
    expect(api.answers).toEqual([]);
  });

  describe("the agent's question (AG5)", () => {
    const asking = (api: MemoryApi) => (id: string) => {
      api.push(id, started());
      api.push(id, {
        type: 'approval_requested',
        approvalId: 'q1',
        callId: 'c9',
        agent: 'general',
        kind: 'question',
        thirdParty: false,
        subject: 'Keep the old API or break it?',
        options: ['keep it', 'break it'],
      });
    };

    it('is asked with its options and answered in words through the approval', async () => {
      const api = new MemoryApi();
      api.onStart = asking(api);
      api.afterAnswer = () => [{ type: 'question', questionId: 'q1', question: 'Keep the old API or break it?', options: ['keep it', 'break it'], answer: 'keep it' }, completed('Kept it.')];
      const prompter = new ScriptedPrompter(['refactor the API', null], []);
      prompter.replies = [{ answer: 'keep it' }];
      const t = io();
      await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, t.io);
      expect(prompter.asked).toEqual([{ approvalId: 'q1', agent: 'general', question: 'Keep the old API or break it?', options: ['keep it', 'break it'] }]);
      expect(prompter.questions).toEqual([]);
      expect(api.answers).toEqual([{ id: 'q1', answer: 'approve', body: { response: 'keep it' } }]);
      expect(t.out.join('')).toContain('Answered: Keep the old API or break it? → keep it');
    });

    it('declined (Escape), it is rejected so the agent states its assumption', async () => {
      const api = new MemoryApi();
      api.onStart = asking(api);
      api.afterAnswer = () => [completed('Assumed.')];
      const prompter = new ScriptedPrompter(['refactor the API', null], []);
      prompter.replies = ['decline'];
      await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
      expect(api.answers).toEqual([{ id: 'q1', answer: 'reject', body: { rememberCommand: false } }]);
    });

    it('"Stop the session" from the question stops it', async () => {
      const api = new MemoryApi();
      api.onStart = asking(api);
      const prompter = new ScriptedPrompter(['refactor the API', null], []);
      prompter.replies = ['stop'];
      await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
      expect(api.stops).toEqual(['s1']);
      expect(api.answers).toEqual([]);
    });
  });

  it('at a limit, the extension prompt grants through the approval', async () => {
    const api = new MemoryApi();
    api.onStart = (id) => {
      api.push(id, started());
      api.push(id, { type: 'limit_reached', class: 'limit_actions', actionsUsed: 150, minutesUsed: 3 });
      api.push(id, { type: 'approval_requested', approvalId: 'e1', callId: null, agent: 'general', kind: 'extension', thirdParty: false, subject: '+50 actions' });
    };
    api.afterAnswer = () => [{ type: 'extension_granted', kind: 'actions', amount: 50, extensionsUsed: 1, by: { kind: 'user', userId: 'u1' } }, completed('Finished after the extension.')];
    const t = io();
    await runInteractive(api, new ScriptedPrompter(['long job', null], []), { project, includeUncommitted: false, cwd }, t.io);
    expect(api.answers).toEqual([{ id: 'e1', answer: 'approve', body: { rememberCommand: false } }]);
    expect(t.out.join('')).toContain('Limit reached: 150 actions.');
    expect(t.out.join('')).toContain('Extension granted: +50 actions (1 used).');
  });

  it('a mention at the idle prompt explains that it needs a running session', async () => {
    const api = new MemoryApi();
    const t = io();
    await runInteractive(api, new ScriptedPrompter(['@explore where is the parser?', null], []), { project, includeUncommitted: false, cwd }, t.io);
    expect(api.started).toEqual([]);
    expect(t.out.join('')).toContain('A mention starts a subagent of a running session');
  });

  it('@ while a session runs starts a background subagent of it, labelled with its name', async () => {
    const api = new MemoryApi();
    const prompter = new ScriptedPrompter(['long job', null], []);
    let keys: { onMention: () => void; onInterrupt: () => void } | null = null;
    prompter.watchKeys = (h) => {
      keys = h;
      return () => (keys = null);
    };
    let typed!: () => void;
    const mentionAnswered = new Promise<void>((r) => (typed = r));
    prompter.mention = async () => {
      typed();
      return 'explore where is the parser?';
    };
    api.onStart = (id) => {
      if (id === 's1') {
        api.push(id, started());
        setImmediate(() => keys?.onMention());
        void mentionAnswered.then(() => setImmediate(() => api.push('s1', completed('Parent done.'))));
      }
    };
    // The gateway publishes a mentioned child's events on its root session's stream (AG5).
    api.startSubagent = async (parent, agent, instruction) => {
      api.subagents.push({ parent, agent, instruction });
      api.push(parent, { type: 'subagent_started', childSessionId: 's2', agent, depth: 1, background: true });
      api.push(parent, { type: 'model_text', text: 'Found it in src/parser.ts.', subSessionId: 's2' });
      api.push(parent, { type: 'subagent_finished', childSessionId: 's2', agent, report: 'finished', stopReason: null });
      return sessionView('s2', { agent, mode: 'interactive', headless: false });
    };
    const t = io();
    await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, t.io);
    expect(api.subagents).toEqual([{ parent: 's1', agent: 'explore', instruction: 'where is the parser?' }]);
    const text = t.out.join('');
    expect(text).toContain('Background explore session s2 started; its work is shown here marked [explore].');
    expect(text).toContain('[explore] Found it in src/parser.ts.');
    expect(text).toContain('Subagent explore finished (s2).');
    // Nothing follows the child's own stream: the root's stream carries its work.
    expect(api.followed).toEqual(['s1']);
    expect(keys).toBeNull();
  });

  it('Ctrl-C read as a key (raw terminal) stops the session too', async () => {
    const api = new MemoryApi();
    const prompter = new ScriptedPrompter(['wait', null], []);
    prompter.watchKeys = (h) => {
      setImmediate(() => h.onInterrupt());
      return () => undefined;
    };
    api.onStart = (id) => api.push(id, started());
    await runInteractive(api, prompter, { project, includeUncommitted: false, cwd }, io().io);
    expect(api.stops).toEqual(['s1']);
  });

  it('a session the gateway refuses to start is reported and the prompt comes back', async () => {
    const api = new MemoryApi();
    api.startSession = async () => {
      throw new Error('Agent "explore" is reserved for delegation (mode: subagent); it cannot drive a session itself.');
    };
    const t = io();
    const code = await runInteractive(api, new ScriptedPrompter(['go', null], []), { project, includeUncommitted: false, cwd }, t.io);
    expect(code).toBe(0);
    expect(t.out.join('')).toContain('reserved for delegation');
  });
});

describe('parseMention', () => {
  it('recognises @agent followed by an instruction only', () => {
    expect(parseMention('@general refactor the parser')).toEqual({ agent: 'general', instruction: 'refactor the parser' });
    expect(parseMention('  @explore  find x\nand y ')).toEqual({ agent: 'explore', instruction: 'find x\nand y' });
    expect(parseMention('@general')).toBeNull();
    expect(parseMention('email me@example.org')).toBeNull();
  });
});

describe('ApprovalDesk', () => {
  it('asks one question at a time and withdraws one answered elsewhere', async () => {
    const seen: string[] = [];
    let releaseFirst!: (a: ApprovalAnswer | null) => void;
    const prompter: Prompter = Object.assign(new ScriptedPrompter([], []), {
      approval: (q: ApprovalQuestion, signal: AbortSignal): Promise<ApprovalAnswer | null> => {
        seen.push(q.approvalId);
        if (q.approvalId === 'x1') {
          return new Promise((resolve) => {
            releaseFirst = resolve;
            signal.addEventListener('abort', () => resolve(null));
          });
        }
        return Promise.resolve('approve');
      },
    });
    const desk = new ApprovalDesk(prompter);
    const q = (id: string): ApprovalQuestion => ({ approvalId: id, agent: 'general', kind: 'command', shown: id, thirdParty: [], offerIdentical: false });
    const first = desk.ask(q('x1'));
    const second = desk.ask(q('x2'));
    const third = desk.ask(q('x3'));
    desk.withdraw('x3');
    expect(await third).toBeNull();
    expect(seen).toEqual(['x1']);
    desk.withdraw('x1');
    expect(await first).toBeNull();
    expect(await second).toBe('approve');
    expect(seen).toEqual(['x1', 'x2']);
    expect(releaseFirst).toBeDefined();
    await desk.idle();
    expect(desk.busy).toBe(false);
  });
});
