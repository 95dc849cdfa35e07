import type { ProjectView, SessionEventOf } from '@lemniscate/contracts';
import pc from 'picocolors';
import { EXIT_FAILURE, EXIT_OK } from '../errors';
import { applyPatch, inspectCheckout, isCheckoutOf } from '../git/git';
import { colourDiff, describeEvent } from '../output/render';
import { buildStartRequest } from '../session/headless';
import { ResultCollector } from '../session/result';
import type { DeveloperContext } from '../session/developer-context';
import type { SessionRunApi } from '../session/session-api';
import { isTerminal } from '../gateway/event-stream';
import type { ApprovalAnswer, ApprovalQuestion, Prompter, QuestionAnswer, Spinner } from './prompter';

interface InteractiveOptions {
  project: ProjectView;
  agent?: string | undefined;
  model?: string | undefined;
  includeUncommitted: boolean;
  apply?: boolean | undefined;
  cwd: string;
  developer?: DeveloperContext;
}

interface InteractiveIo {
  stdout(text: string): void;
  stderr(text: string): void;
  onInterrupt(handler: () => void): () => void;
  spinner: Spinner;
}

/** `@explore find the parsers` → a background session with that agent. */
export function parseMention(text: string): { agent: string; instruction: string } | null {
  const m = /^@([A-Za-z0-9][A-Za-z0-9._-]{0,63})\s+([\s\S]+)$/.exec(text.trim());
  if (!m || !m[1] || !m[2] || m[2].trim() === '') return null;
  return { agent: m[1], instruction: m[2].trim() };
}

/** A rejection with the words the person gave for the agent (possibly none). */
type Rejection = { reject: string };
type DeskAnswer = Exclude<ApprovalAnswer, 'reject'> | Rejection | QuestionAnswer | 'grant' | 'decline' | null;

interface PendingApproval {
  question: ApprovalQuestion;
  abort: AbortController;
  resolve: (answer: DeskAnswer) => void;
}

/**
 * One approval point for every session this terminal follows (foreground and background): questions
 * are asked one at a time, and a question answered elsewhere (the console) is withdrawn.
 */
export class ApprovalDesk {
  private readonly queue: PendingApproval[] = [];
  private current: PendingApproval | null = null;
  private readonly waiters: (() => void)[] = [];
  private readonly listeners = new Set<() => void>();

  constructor(private readonly prompter: Prompter) {}

  get busy(): boolean {
    return this.current !== null || this.queue.length > 0;
  }

  /** Resolves when the desk has nothing to ask (used to re-open the instruction prompt). */
  idle(): Promise<void> {
    return this.busy ? new Promise((resolve) => this.waiters.push(resolve)) : Promise.resolve();
  }

  /** Called whenever a question arrives, so an open instruction prompt can make way for it. */
  onQuestion(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  ask(question: ApprovalQuestion): Promise<DeskAnswer> {
    return new Promise((resolve) => {
      this.queue.push({ question, abort: new AbortController(), resolve });
      this.listeners.forEach((l) => l());
      void this.pump();
    });
  }

  withdraw(approvalId: string): void {
    if (this.current?.question.approvalId === approvalId) this.current.abort.abort();
    const i = this.queue.findIndex((p) => p.question.approvalId === approvalId);
    if (i >= 0) this.queue.splice(i, 1)[0]?.resolve(null);
  }

  /** A rejection asks, while the terminal is still the desk's, what to tell the agent (Enter: nothing). */
  private async rejectWithReason(answer: ApprovalAnswer | null, signal: AbortSignal): Promise<Exclude<ApprovalAnswer, 'reject'> | Rejection | null> {
    if (answer !== 'reject') return answer;
    if (signal.aborted) return null;
    const reason = await this.prompter.text('Reason for the agent (Enter for none)', { default: '' });
    return { reject: reason.trim().slice(0, 1000) };
  }

  private async pump(): Promise<void> {
    if (this.current) return;
    const next = this.queue.shift();
    if (!next) {
      this.waiters.splice(0).forEach((w) => w());
      return;
    }
    this.current = next;
    try {
      const q = next.question;
      const answer =
        q.kind === 'extension'
          ? await this.prompter.extension(q.shown, next.abort.signal)
          : q.kind === 'question'
            ? await this.prompter.question({ approvalId: q.approvalId, agent: q.agent, question: q.shown, options: q.options ?? [] }, next.abort.signal)
            : await this.rejectWithReason(await this.prompter.approval(q, next.abort.signal), next.abort.signal);
      next.resolve(next.abort.signal.aborted ? null : answer);
    } catch {
      next.resolve(null);
    } finally {
      this.current = null;
      void this.pump();
    }
  }
}

function questionFor(event: SessionEventOf<'approval_requested'>): ApprovalQuestion {
  const thirdParty = (event.thirdPartyFiles ?? []).map((f) => f.path);
  let shown: string;
  if (event.kind === 'command') shown = `${pc.bold('$')} ${event.subject}`;
  else if (event.kind === 'extension' || event.kind === 'question') shown = event.subject;
  else shown = colourDiff(event.subject, new Set(thirdParty));
  if (event.thirdParty) {
    const named = (event.thirdPartyFiles ?? []).map((f) => `${f.path} (${f.class})`).join(', ');
    shown += `\n${pc.bgRed(pc.white(' THIRD-PARTY FILES '))} ${named || 'this change touches files executed by third parties (CI, build scripts, manifests, hooks)'}`;
  }
  return {
    approvalId: event.approvalId,
    agent: event.agent,
    kind: event.kind,
    shown,
    thirdParty,
    offerIdentical: event.kind === 'command' && event.reapprovalExempt === true,
    ...(event.kind === 'question' ? { options: event.options ?? [] } : {}),
  };
}

/**
 * Follows one session, rendering its events and sending its approval questions to the desk. Returns
 * the session's exit code.
 */
async function followInteractive(api: SessionRunApi, sessionId: string, desk: ApprovalDesk, io: InteractiveIo, collector: ResultCollector): Promise<number> {
  const calls = new Map<string, string>();
  const subagents = new Map<string, string>();
  const write = (line: string) => {
    io.spinner.stop();
    io.stdout(`${line}\n`);
  };
  const answering: Promise<void>[] = [];
  for await (const raw of api.follow(sessionId, {})) {
    const event = collector.add(raw);
    if (!event) continue;
    if (event.type === 'approval_requested') {
      io.spinner.stop();
      const question = questionFor(event);
      answering.push(
        desk.ask(question).then(async (answer) => {
          if (answer === null) return;
          if (answer === 'stop') {
            write(pc.yellow('Stopping the session…'));
            await api.stopSession(sessionId, 'stopped from the terminal').catch((e: unknown) => write(pc.red(`Could not stop: ${(e as Error).message}`)));
            return;
          }
          if (typeof answer === 'object' && 'reject' in answer) {
            await api
              .answerApproval(event.approvalId, 'reject', { rememberCommand: false, ...(answer.reject ? { reason: answer.reject } : {}) })
              .catch((e: unknown) => write(pc.red(`Could not answer approval ${event.approvalId}: ${(e as Error).message}`)));
            return;
          }
          if (typeof answer === 'object') {
            await api
              .answerApproval(event.approvalId, 'approve', { response: answer.answer })
              .catch((e: unknown) => write(pc.red(`Could not answer question ${event.approvalId}: ${(e as Error).message}`)));
            return;
          }
          const approve = answer === 'approve' || answer === 'approve_identical' || answer === 'grant';
          await api
            .answerApproval(event.approvalId, approve ? 'approve' : 'reject', { rememberCommand: answer === 'approve_identical' })
            .catch((e: unknown) => write(pc.red(`Could not answer approval ${event.approvalId}: ${(e as Error).message}`)));
        }),
      );
      continue;
    }
    if (event.type === 'approval_answered') desk.withdraw(event.approvalId);
    const line = describeEvent(event, calls, subagents);
    if (line !== null) write(line);
    if (event.type === 'decision' && event.effect === 'allow') io.spinner.start(calls.get(event.callId) ?? 'running');
    if (event.type === 'approval_answered' && event.answer === 'approved') io.spinner.start('running');
    if (event.type === 'tool_result' || isTerminal(raw, sessionId)) io.spinner.stop();
  }
  io.spinner.stop();
  await Promise.all(answering);
  return collector.ending?.exit_code ?? (await api.getSession(sessionId).then((s) => (s.status === 'completed' ? 0 : s.status === 'stopped' ? 3 : 1)));
}

/** Holds output while a prompt owns the terminal, then prints it in order. */
function outputGate(write: (text: string) => void) {
  let held: string[] | null = null;
  return {
    write: (text: string) => (held ? held.push(text) : write(text)),
    hold: () => (held ??= []),
    release: () => {
      const lines = held ?? [];
      held = null;
      lines.forEach(write);
    },
  };
}

/**
 * `lemni` without `-p`: asks for an instruction, runs it as a session with approvals in the
 * terminal, and asks again. While a session runs, Ctrl-C stops it (A3) and `@` opens a mention
 * (`explore …`, `general …`) that starts a background subagent of it; at the prompt, Ctrl-C leaves.
 */
export async function runInteractive(api: SessionRunApi, prompter: Prompter, options: InteractiveOptions, io: InteractiveIo): Promise<number> {
  const desk = new ApprovalDesk(prompter);
  const checkout = await inspectCheckout(options.cwd);
  const inProjectCheckout = checkout ? await isCheckoutOf(checkout, options.project.repositorySource) : false;
  const gate = outputGate(io.stdout);
  const out: InteractiveIo = { ...io, stdout: gate.write };
  let lastExit = EXIT_OK;
  const report = (error: unknown) => io.stderr(`${pc.red(error instanceof Error ? error.message : String(error))}\n`);

  const startMention = async (parentId: string, text: string) => {
    const mention = parseMention(text.trim().startsWith('@') ? text : `@${text.trim()}`);
    if (!mention) return io.stdout(pc.yellow('A mention is an agent name and an instruction, e.g. `explore where is the parser?`.\n'));
    // The child's events and approvals arrive on this session's stream, marked with its name; its
    // report reaches the agent, and it ends with the session at the latest.
    const child = await api.startSubagent(parentId, mention.agent, mention.instruction);
    gate.write(pc.dim(`Background ${mention.agent} session ${child.id} started; its work is shown here marked [${mention.agent}].\n`));
  };

  io.stdout(
    pc.dim(`Project ${options.project.name}. Type an instruction. While it runs: @ starts a background subagent (@explore …, @general …), Ctrl-C stops the session. An empty line or Ctrl-D leaves.\n`),
  );
  for (;;) {
    await desk.idle();
    const abort = new AbortController();
    const off = desk.onQuestion(() => abort.abort());
    const instruction = await prompter.instruction(abort.signal);
    off();
    if (abort.signal.aborted) continue;
    if (instruction === null || instruction.trim() === '') break;
    if (parseMention(instruction)) {
      io.stdout(pc.yellow('A mention starts a subagent of a running session: give an instruction first, then press @ while it runs.\n'));
      continue;
    }
    let session;
    try {
      const request = await buildStartRequest({ ...options, instruction, outputFormat: 'text' }, checkout, inProjectCheckout, io, 'interactive');
      session = { request, view: await api.startSession(request) };
    } catch (error) {
      report(error);
      continue;
    }
    const { request, view } = session;
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      io.spinner.stop();
      gate.release();
      io.stdout(pc.yellow('Stopping the session (unapproved writes rejected, sandbox destroyed)…\n'));
      api.stopSession(view.id, 'Ctrl-C in the terminal').catch(report);
    };
    let mentionOpen = false;
    const openMention = async () => {
      if (mentionOpen || stopping) return;
      mentionOpen = true;
      io.spinner.stop();
      gate.hold();
      const ask = new AbortController();
      const offQuestion = desk.onQuestion(() => ask.abort());
      try {
        const text = await prompter.mention?.(ask.signal);
        gate.release();
        if (text && !ask.signal.aborted) await startMention(view.id, text);
      } catch (error) {
        report(error);
      } finally {
        offQuestion();
        gate.release();
        mentionOpen = false;
      }
    };
    const unregister = io.onInterrupt(stop);
    const unwatch = prompter.watchKeys?.({ onInterrupt: stop, onMention: () => void openMention() });
    const collector = new ResultCollector(view.id);
    try {
      lastExit = await followInteractive(api, view.id, desk, out, collector);
    } catch (error) {
      report(error);
      lastExit = EXIT_FAILURE;
    } finally {
      unwatch?.();
      unregister();
      gate.release();
    }
    const final = await api.getSession(view.id).catch(() => null);
    const result = collector.result(final, options.project.name, view.agent, request.includedUncommitted ?? false);
    if (result.summary) io.stdout(`${result.summary}\n`);
    if (result.status === 'completed' && result.patch.trim() !== '' && checkout && options.apply !== false) {
      const mine = inProjectCheckout || (await isCheckoutOf(checkout, options.project.repositorySource, result.base_commit));
      const wanted = options.apply === true || (mine && (await prompter.confirm(`Apply the approved patch to ${checkout.root}?`, true)));
      if (wanted) {
        const outcome = await applyPatch(checkout.root, result.patch);
        io.stdout(outcome.applied ? pc.green(`Applied to ${checkout.root}: ${outcome.files.join(', ')}.\n`) : pc.red(`${outcome.message}\n`));
      }
    }
  }
  return lastExit;
}
