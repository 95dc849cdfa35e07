import { useEffect, useRef } from 'react';
import type { GatewayEvent } from '@lemniscate/contracts';

type Tone = 'info' | 'good' | 'warn' | 'bad' | 'muted';

interface Described {
  title: string;
  detail?: string;
  tone: Tone;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
}

/** One readable line per event; unknown types still show, with their type name. */
export function describeEvent(e: GatewayEvent): Described {
  const f = e as Record<string, unknown>;
  switch (e.type) {
    case 'session_started':
      return { title: `Session started on ${str(f.project)}`, detail: `model ${str(f.model)}${f.headless ? ', headless' : ''}`, tone: 'info' };
    case 'instruction':
      return { title: 'Instruction', detail: str(f.text), tone: 'info' };
    case 'tool_call_proposed': {
      // An MCP tool (`mcp__server__tool`) is named as people read it, with its arguments whole.
      const mcp = /^mcp__([a-z][a-z0-9-]*)__(.+)$/.exec(str(f.name));
      if (mcp) return { title: `${str(f.agent)} proposes the MCP tool ${mcp[1]}/${mcp[2]}`, detail: str(f.arguments), tone: 'muted' };
      return { title: `${str(f.agent)} proposes ${str(f.name)}`, detail: toolSubject(f.arguments), tone: 'muted' };
    }
    case 'decision':
      return { title: `Policy: ${str(f.effect)}`, detail: `${str(f.reason)} (rule ${str(f.rule)})`, tone: f.effect === 'deny' ? 'bad' : f.effect === 'ask' ? 'warn' : 'good' };
    case 'approval_requested':
      if (f.kind === 'question') return { title: `Question asked${f.agent ? ` by ${str(f.agent)}` : ''}`, detail: withOptions(str(f.subject), f.options), tone: 'warn' };
      return { title: `Approval requested${f.thirdParty ? ' — third-party files' : ''}`, detail: str(f.subject).split('\n')[0], tone: 'warn' };
    case 'approval_answered':
      // Only a question's answer carries words; a declined question reads as a rejection here and
      // is told in words by the `question` event that follows.
      if (typeof f.response === 'string')
        return { title: `Question answered: ${oneLine(f.response)}`, detail: f.response.includes('\n') || f.response.length > 120 ? f.response : undefined, tone: 'good' };
      // Who closed it, in words: a headless run refuses what needs a person; an unanswered one expires.
      if (f.class === 'approval_refused_headless') return { title: 'Approval refused: nobody can approve in a headless run', tone: 'bad' };
      if (f.class === 'approval_expired') return { title: 'Approval expired: nobody answered in time', detail: by(f.by), tone: 'bad' };
      return { title: `Approval ${str(f.answer)}`, detail: by(f.by), tone: f.answer === 'approved' ? 'good' : 'bad' };
    case 'question':
      return describeQuestion(f);
    case 'tool_result':
      return {
        title: `Result: exit ${f.exitCode === null ? '—' : str(f.exitCode)}`,
        detail: `${f.durationMs ? `${str(f.durationMs)} ms` : ''}${f.truncated ? ', output truncated' : ''}`,
        tone: f.exitCode === 0 ? 'good' : 'bad',
      };
    case 'changes_detected':
      return { title: 'Changes detected', detail: Array.isArray(f.files) ? f.files.map((x) => str((x as { path?: unknown }).path)).join(', ') : '', tone: 'warn' };
    case 'change_reverted':
      return { title: 'Changes reverted', detail: Array.isArray(f.paths) ? f.paths.join(', ') : '', tone: 'bad' };
    case 'limit_reached':
      return { title: 'Limit reached', detail: str(f.class), tone: 'warn' };
    case 'loop_blocked':
      return { title: `Blocked for repetition: ${str(f.name)}`, tone: 'bad' };
    case 'model_text':
      return { title: 'Agent', detail: str(f.text), tone: 'muted' };
    case 'session_completed':
      return { title: 'Session completed', detail: str(f.summary), tone: 'good' };
    case 'session_stopped':
      return { title: `Session stopped: ${str(f.stopReason)}`, detail: str(f.summary), tone: 'bad' };
    case 'session_failed':
      return { title: 'Session failed', detail: str(f.message), tone: 'bad' };
    default:
      return { title: e.type.replace(/_/g, ' '), tone: 'muted' };
  }
}

/** What closed an approval, when it was not a person (a person's answer is the title). */
function by(actor: unknown): string | undefined {
  const a = actor as { kind?: string; description?: string } | null | undefined;
  if (a?.kind === 'process' && a.description) return a.description;
  if (a?.kind === 'policy') return 'by the policy';
  return undefined;
}

function oneLine(text: string, max = 120): string {
  const first = text.split('\n')[0]!.trim();
  return first.length > max || first !== text.trim() ? `${first.slice(0, max)}…` : first;
}

function withOptions(question: string, options: unknown): string {
  const list = Array.isArray(options) ? options.map(str).filter((o) => o !== '') : [];
  return list.length > 0 ? `${question}\nSuggested: ${list.join(' · ')}` : question;
}

/** The outcome of the agent's question (AG5): answered, declined, or left to the agent in a headless run. */
function describeQuestion(f: Record<string, unknown>): Described {
  const question = str(f.question);
  // Nobody is asked in a headless run or by a subagent (the gateway uses the same class for both).
  if (f.class === 'question_default_headless') return { title: 'Question not asked (headless run or subagent): the agent states its assumption and continues', detail: question, tone: 'warn' };
  if (f.class === 'question_declined') return { title: 'Question declined: the agent states its assumption and continues', detail: question, tone: 'warn' };
  if (typeof f.answer === 'string') return { title: `The agent has its answer: ${oneLine(f.answer)}`, detail: question, tone: 'good' };
  return { title: 'Question waiting for an answer', detail: withOptions(question, f.options), tone: 'warn' };
}

function toolSubject(args: unknown): string {
  if (!args || typeof args !== 'object') return '';
  const a = args as Record<string, unknown>;
  return str(a.command ?? a.path ?? a.pattern ?? a.instruction ?? '');
}

export function EventStream({ events, live }: { events: GatewayEvent[]; live: boolean }) {
  const list = useRef<HTMLOListElement>(null);
  const atBottom = useRef(true);
  // Follow new events while the reader is at the end of the list; leave the scroll alone otherwise.
  useEffect(() => {
    const el = list.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [events.length]);
  return (
    <section className="event-stream" aria-label="Session events">
      <p className="muted small stream-status">
        <span className={`live-dot${live ? ' on' : ''}`} aria-hidden="true" /> {live ? 'Live' : 'Not live: showing what was recorded'}
      </p>
      {events.length === 0 ? (
        <p className="muted">No events yet.</p>
      ) : (
        // Focusable so keyboard users can scroll a long stream.
        <ol
          ref={list}
          className="events"
          aria-live="polite"
          aria-relevant="additions"
          tabIndex={0}
          aria-label="Events, oldest first"
          onScroll={(e) => {
            const el = e.currentTarget;
            atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
          }}
        >
          {events.map((e) => {
            const d = describeEvent(e);
            return (
              <li key={e.seq} className={`event ${d.tone}`}>
                <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time>
                <div>
                  <strong>{d.title}</strong>
                  {d.detail && <p className="event-detail">{d.detail}</p>}
                </div>
              </li>
            );
          })}
        </ol>
      )}
    </section>
  );
}
