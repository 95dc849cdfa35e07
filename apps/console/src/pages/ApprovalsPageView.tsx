import { useEffect, useId, useRef, useState, type KeyboardEvent as ReactKeyboardEvent, type RefObject } from 'react';
import type { ApprovalView } from '@lemniscate/contracts';
import type { AnswerOptions, ApprovalAnswer } from '../api/queries/approvals';
import { CommandView } from '../components/CommandView';
import type { LoadContext } from '../components/diff/context';
import { commentsAsReason, DiffViewer, type LineComment } from '../components/diff/DiffViewer';
import { LiveStatus } from '../components/PageHeader';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError } from '../components/States';

interface ApprovalsPageViewProps {
  approvals: QueryState<ApprovalView[]>;
  selectedId: string | null;
  onSelect: (id: string) => void;
  /** `opts.response` answers a question (with 'approve'); rejecting a question declines it. */
  onAnswer: (id: string, answer: ApprovalAnswer, opts: AnswerOptions) => void;
  /** The approval whose answer is on its way to the gateway. */
  busyId: string | null;
  answerError: unknown;
  /** The request the error answers: it is shown with that request only. */
  answerErrorId?: string | null;
  live: boolean;
  /** Reads unchanged lines around a change's hunks from the session's sandbox (expanding context). */
  loadContext?: (approvalId: string, path: string, from: number, to: number) => Promise<{ lines: string[]; totalLines: number }>;
}

const KIND_LABEL: Record<ApprovalView['kind'], string> = {
  command: 'Command',
  write: 'File change',
  changes: 'Changes left by a command',
  third_party: 'Third-party files',
  extension: 'Budget extension',
  question: 'Question',
};

/** P3: the gateway offers "approve, and identical commands without asking" on this request. */
function offersIdentical(a: ApprovalView): boolean {
  return a.kind === 'command' && a.flags.reapprovalExempt === true;
}

function isThirdParty(a: ApprovalView): boolean {
  return a.kind === 'third_party' || a.flags.thirdParty.length > 0;
}

function summary(a: ApprovalView): string {
  const p = a.payload;
  if ('command' in p) return p.command;
  if ('diff' in p) return (p.files ?? []).join(', ') || 'a change';
  if ('question' in p) return p.question;
  return `+${p.amount} ${p.extension}`;
}

type QuestionPayload = { question: string; options: string[] };

function questionOf(a: ApprovalView): QuestionPayload | null {
  return 'question' in a.payload ? a.payload : null;
}

/** The gateway trims an answer and refuses one longer than this. */
const MAX_ANSWER = 4000;

/**
 * A reply to a question being written: one of the suggested options, or the person's own words.
 * Kept per request so moving through the inbox does not throw away what was typed.
 */
interface Draft {
  /** Index of the picked option; null when the answer is the text. */
  option: number | null;
  text: string;
}
const EMPTY_DRAFT: Draft = { option: null, text: '' };

/** What "Answer" would send, or null while there is nothing to send. */
function responseOf(q: QuestionPayload, d: Draft): string | null {
  if (d.option !== null) return q.options[d.option] ?? null;
  const t = d.text.trim();
  return t === '' ? null : t.slice(0, MAX_ANSWER);
}

function typingIn(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}

export function ApprovalsPageView(props: ApprovalsPageViewProps) {
  const { approvals, live } = props;
  return (
    <div className="page full-width">
      <div className="page-header">
        <h1>Approvals</h1>
        <LiveStatus live={live} on="Live: new requests appear here" off="Not live: reload to see new requests" />
      </div>
      <p className="muted small shortcuts" id="shortcuts">
        Keyboard: <kbd>j</kbd> / <kbd>k</kbd> next and previous, <kbd>a</kbd> approve, <kbd>r</kbd> reject, <kbd>i</kbd> approve a command and its identical repeats (when the policy offers it). For a
        question, <kbd>a</kbd> moves to the answer (it never sends one) and <kbd>Esc</kbd> or <kbd>r</kbd> declines; <kbd>Esc</kbd> in an answer you have started only leaves it.
      </p>
      <Query state={approvals} what="the approvals">
        {(list) => <Inbox {...props} list={list} />}
      </Query>
    </div>
  );
}

function Inbox({ list, selectedId, onSelect, onAnswer, busyId, answerError: error, answerErrorId, loadContext }: ApprovalsPageViewProps & { list: ApprovalView[] }) {
  const pending = list.filter((a) => a.state === 'pending');
  const selected = pending.find((a) => a.id === selectedId) ?? pending[0] ?? null;
  const answerError = answerErrorId === undefined || answerErrorId === selected?.id ? error : null;
  const [drafts, setDrafts] = useState<Record<string, Draft>>({});
  /** The reason typed for rejecting each request, kept per request while the person moves around. */
  const [reasons, setReasons] = useState<Record<string, string>>({});
  /** Line comments on a diff, per request: they travel back to the agent as (part of) the reject reason. */
  const [comments, setComments] = useState<Record<string, LineComment[]>>({});
  const reasonOf = (id: string) => reasons[id] ?? '';
  /** What a rejection sends: the typed reason, then each line comment as `path:line: text`. */
  const rejectReason = (id: string) => [reasonOf(id).trim(), commentsAsReason(comments[id] ?? [])].filter(Boolean).join('\n');
  const answerForm = useRef<HTMLFormElement>(null);
  const question = selected ? questionOf(selected) : null;
  // Where the list and the detail are stacked (a phone), picking a request brings its detail into view.
  const detail = useRef<HTMLElement>(null);
  const picked = useRef(false);
  const pick = (id: string) => {
    picked.current = true;
    onSelect(id);
  };
  useEffect(() => {
    if (!picked.current) return;
    picked.current = false;
    if (typeof window.matchMedia === 'function' && window.matchMedia('(max-width: 1000px)').matches) detail.current?.scrollIntoView?.({ block: 'start' });
  }, [selected?.id]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      // Inside a field the keys are the person's text; a key the answer form already handled is done.
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || typingIn(e.target) || !selected) return;
      const i = pending.findIndex((a) => a.id === selected.id);
      if (e.key === 'j' && i < pending.length - 1) onSelect(pending[i + 1]!.id);
      else if (e.key === 'k' && i > 0) onSelect(pending[i - 1]!.id);
      // A question is answered in words: `a` cannot know which, so it only takes the person there.
      else if (e.key === 'a' && question) focusAnswer(answerForm.current);
      else if (e.key === 'a' && busyId === null) onAnswer(selected.id, 'approve', { rememberCommand: false });
      else if (e.key === 'i' && offersIdentical(selected) && busyId === null) onAnswer(selected.id, 'approve', { rememberCommand: true });
      else if ((e.key === 'r' || (e.key === 'Escape' && question)) && busyId === null) onAnswer(selected.id, 'reject', { rememberCommand: false, reason: rejectReason(selected.id) });
      else return;
      e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [pending, selected, question, onSelect, onAnswer, busyId, reasons]);

  if (pending.length === 0) return <Empty>No request is waiting for you. New ones appear here as sessions ask.</Empty>;

  return (
    <div className="inbox">
      <ul className="inbox-list" aria-label="Pending approvals" aria-describedby="shortcuts">
        {pending.map((a) => (
          <li key={a.id}>
            <button
              type="button"
              className={`inbox-item${a.id === selected?.id ? ' selected' : ''}${isThirdParty(a) ? ' third-party' : ''}`}
              aria-current={a.id === selected?.id ? 'true' : undefined}
              onClick={() => pick(a.id)}
            >
              <span className="inbox-kind">
                {KIND_LABEL[a.kind]}
                {isThirdParty(a) && <span className="badge danger">third-party</span>}
              </span>
              {a.kind === 'question' ? <span className="inbox-summary question">{summary(a)}</span> : <code className="inbox-summary">{summary(a)}</code>}
              <span className="muted small">
                {a.agent} · session {a.sessionId} · {new Date(a.createdAt).toLocaleTimeString()}
              </span>
            </button>
          </li>
        ))}
      </ul>
      {selected && (
        <section className="card approval-detail" aria-labelledby="approval-title" ref={detail}>
          <header className="approval-header">
            <h2 id="approval-title">{KIND_LABEL[selected.kind]}</h2>
            <span className="muted small">
              {question ? 'asked' : 'proposed'} by <strong>{selected.agent}</strong> in session <code>{selected.sessionId}</code>
            </span>
          </header>
          <RequestContext approval={selected} />
          {isThirdParty(selected) && (
            <div className="third-party-banner" role="note">
              <strong>Third-party files.</strong> CI configuration, build scripts, hooks, manifests and lock files are run or trusted by other tools and people. This is a separate approval: read every
              line.
              <ul>
                {selected.flags.thirdParty.map((t) => (
                  <li key={t.path}>
                    <code>{t.path}</code> <span className="muted">({t.class})</span>
                  </li>
                ))}
              </ul>
            </div>
          )}
          {question ? (
            <QuestionForm
              key={selected.id}
              formRef={answerForm}
              approval={selected}
              question={question}
              draft={drafts[selected.id] ?? EMPTY_DRAFT}
              onDraft={(d) => setDrafts((all) => ({ ...all, [selected.id]: d }))}
              busy={busyId !== null}
              sending={busyId === selected.id}
              answerError={answerError}
              onAnswer={(response) => onAnswer(selected.id, 'approve', { rememberCommand: false, response })}
              onDecline={() => onAnswer(selected.id, 'reject', { rememberCommand: false })}
            />
          ) : (
            <>
              <ApprovalSubject
                approval={selected}
                comments={comments[selected.id] ?? []}
                onComments={(list) => setComments((all) => ({ ...all, [selected.id]: list }))}
                loadContext={loadContext && ((path, from, to) => loadContext(selected.id, path, from, to))}
              />
              {(comments[selected.id]?.length ?? 0) > 0 && (
                <p className="muted small" role="status">
                  {comments[selected.id]!.length === 1 ? 'One line comment goes' : `${comments[selected.id]!.length} line comments go`} to the agent with a rejection.
                  {rejectReason(selected.id).length > 1000 && <strong> Together with the reason they pass 1,000 characters: shorten them to reject.</strong>}
                </p>
              )}
              {selected.kind === 'command' && (
                <p className="muted small" id={`${selected.id}-identical`}>
                  {offersIdentical(selected)
                    ? 'The project policy lets you approve this command with its identical repeats: the same text, in the same directory, in this session only, then runs without asking. Any other command asks again.'
                    : 'The project policy asks again for every run of this command.'}
                </p>
              )}
              <InlineError error={answerError} />
              <div className="field reject-reason">
                <label htmlFor={`${selected.id}-reason`}>Reason, if you reject (told to the agent, kept in the audit log)</label>
                <input
                  id={`${selected.id}-reason`}
                  value={reasonOf(selected.id)}
                  maxLength={1000}
                  placeholder="e.g. no changes to the CI configuration"
                  onChange={(e) => setReasons((all) => ({ ...all, [selected.id]: e.target.value }))}
                />
              </div>
              <div className="actions">
                <button
                  type="button"
                  className="danger"
                  disabled={busyId !== null || rejectReason(selected.id).length > 1000}
                  onClick={() => onAnswer(selected.id, 'reject', { rememberCommand: false, reason: rejectReason(selected.id) })}
                >
                  Reject <kbd aria-hidden="true">r</kbd>
                </button>
                {offersIdentical(selected) && (
                  <button type="button" disabled={busyId !== null} aria-describedby={`${selected.id}-identical`} onClick={() => onAnswer(selected.id, 'approve', { rememberCommand: true })}>
                    Approve, and identical commands too <kbd aria-hidden="true">i</kbd>
                  </button>
                )}
                <button type="button" className="primary" disabled={busyId !== null} onClick={() => onAnswer(selected.id, 'approve', { rememberCommand: false })}>
                  {busyId === selected.id ? 'Sending…' : 'Approve'} <kbd aria-hidden="true">a</kbd>
                </button>
              </div>
            </>
          )}
        </section>
      )}
    </div>
  );
}

/** The picked option when there is one, else the first option, else the text field. */
function focusAnswer(form: HTMLFormElement | null) {
  form?.querySelector<HTMLElement>('input[type="radio"]:checked, input[type="radio"], textarea')?.focus();
}

interface QuestionFormProps {
  formRef: RefObject<HTMLFormElement | null>;
  approval: ApprovalView;
  question: QuestionPayload;
  draft: Draft;
  onDraft: (d: Draft) => void;
  busy: boolean;
  sending: boolean;
  answerError: unknown;
  onAnswer: (response: string) => void;
  onDecline: () => void;
}

/**
 * The agent's question (AG5): pick one of its suggested answers or write your own, or decline and
 * let the agent state its assumption and continue.
 */
function QuestionForm({ formRef, approval, question, draft, onDraft, busy, sending, answerError, onAnswer, onDecline }: QuestionFormProps) {
  const ids = useId();
  const response = responseOf(question, draft);
  const started = draft.option !== null || draft.text.trim() !== '';
  const send = () => {
    if (response !== null && !busy) onAnswer(response);
  };
  const onKeyDown = (e: ReactKeyboardEvent<HTMLFormElement>) => {
    if (e.nativeEvent.isComposing) return;
    if (e.key === 'Escape') {
      e.preventDefault();
      // Escape declines, as the product promises, but never throws away an answer being written:
      // with something picked or typed it only leaves the field, and a second Escape declines.
      if (started) (e.target as HTMLElement).blur();
      else if (!busy) onDecline();
    } else if (e.key === 'Enter' && (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey)) {
      // Enter on an option, or Ctrl/⌘+Enter in the text, sends; plain Enter in the text is a new line.
      e.preventDefault();
      send();
    }
  };
  return (
    <form
      ref={formRef}
      className="question-form"
      aria-labelledby={`${ids}-q`}
      onKeyDown={onKeyDown}
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      <p className="question-text" id={`${ids}-q`}>
        {question.question}
      </p>
      {question.options.length > 0 && (
        <fieldset className="question-options">
          <legend>Suggested by {approval.agent}</legend>
          {question.options.map((o, i) => (
            <label key={i} className={`question-option${draft.option === i ? ' picked' : ''}`}>
              <input type="radio" name={`${ids}-option`} value={i} checked={draft.option === i} disabled={busy} onChange={() => onDraft({ ...draft, option: i })} />
              <span>{o}</span>
            </label>
          ))}
        </fieldset>
      )}
      <div className="field">
        <label htmlFor={`${ids}-text`}>Your answer</label>
        <textarea
          id={`${ids}-text`}
          rows={3}
          maxLength={MAX_ANSWER}
          value={draft.text}
          disabled={busy}
          aria-describedby={`${ids}-text-help`}
          onChange={(e) => onDraft({ option: null, text: e.target.value })}
          // Going back to words already written makes them the answer again, instead of the option.
          onFocus={() => draft.option !== null && draft.text.trim() !== '' && onDraft({ ...draft, option: null })}
        />
        <p className="help" id={`${ids}-text-help`}>
          {question.options.length > 0 ? 'Or answer in your own words; typing here replaces the option picked above. ' : ''}
          <kbd>Ctrl</kbd>+<kbd>Enter</kbd> sends.
        </p>
      </div>
      <InlineError error={answerError} />
      <div className="actions">
        <p className="help decline-help" id={`${ids}-decline`}>
          Declining tells {approval.agent} you will not answer: it states its assumption and continues.
        </p>
        <button type="button" disabled={busy} aria-describedby={`${ids}-decline`} onClick={onDecline}>
          Decline <kbd aria-hidden="true">Esc</kbd>
        </button>
        <button type="submit" className="primary" disabled={busy || response === null}>
          {sending ? 'Sending…' : 'Answer'}
        </button>
      </div>
      <p className="muted small will-send">
        {response === null ? 'Pick an option or write an answer to send one.' : <>Will send: “{response.length > 200 ? `${response.slice(0, 200)}…` : response}”</>}
      </p>
    </form>
  );
}

/** What the request is for and why it asks: the session's instruction, the policy's sentence, what was already taken out. */
function RequestContext({ approval }: { approval: ApprovalView }) {
  const { policy, reverted } = approval.flags;
  return (
    <>
      <dl className="facts request-context">
        {approval.instruction && (
          <>
            <dt>The session's instruction</dt>
            <dd className="instruction">{approval.instruction}</dd>
          </>
        )}
        {policy && (
          <>
            <dt>Why it asks</dt>
            <dd>
              {policy.reason}
              {/* The rule once: most sentences already end with it. */}
              {!policy.reason.includes(`(${policy.rule})`) && (
                <>
                  {' '}
                  <span className="muted small">
                    (rule <code>{policy.rule}</code>)
                  </span>
                </>
              )}
            </dd>
          </>
        )}
      </dl>
      {reverted && reverted.length > 0 && (
        <div className="reverted-banner" role="note">
          <strong>
            {reverted.length === 1 ? 'One more changed file was' : `${reverted.length} more changed files were`} not offered: the policy forbids {reverted.length === 1 ? 'it' : 'them'}, and{' '}
            {reverted.length === 1 ? 'it was' : 'they were'} reverted in the sandbox.
          </strong>
          <ul>
            {reverted.map((r) => (
              <li key={r.path}>
                <code>{r.path}</code> — {r.reason}
              </li>
            ))}
          </ul>
        </div>
      )}
    </>
  );
}

interface ApprovalSubjectProps {
  approval: ApprovalView;
  comments: readonly LineComment[];
  onComments: (list: LineComment[]) => void;
  loadContext?: LoadContext;
}

function ApprovalSubject({ approval, comments, onComments, loadContext }: ApprovalSubjectProps) {
  const p = approval.payload;
  if ('question' in p) return <p className="question-text">{p.question}</p>;
  if ('command' in p) return <CommandView command={p.command} label="The exact command" />;
  if ('diff' in p) return <DiffViewer key={approval.id} patch={p.diff} thirdParty={approval.flags.thirdParty} comments={comments} onComments={onComments} loadContext={loadContext} />;
  return (
    <p>
      The session reached a limit and asks for{' '}
      <strong>
        {p.amount} more {p.extension}
      </strong>
      .
    </p>
  );
}
