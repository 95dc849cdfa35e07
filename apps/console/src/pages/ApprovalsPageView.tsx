import { useEffect, useState } from 'react';
import type { ApprovalView } from '@lemniscate/contracts';
import type { ApprovalAnswer } from '../api/queries/approvals';
import { CommandView } from '../components/CommandView';
import { DiffViewer } from '../components/diff/DiffViewer';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError } from '../components/States';

export interface ApprovalsPageViewProps {
  approvals: QueryState<ApprovalView[]>;
  selectedId: string | null;
  onSelect: (id: string) => void;
  onAnswer: (id: string, answer: ApprovalAnswer, opts: { rememberCommand: boolean }) => void;
  /** The approval whose answer is on its way to the gateway. */
  busyId: string | null;
  answerError: unknown;
  live: boolean;
}

const KIND_LABEL: Record<ApprovalView['kind'], string> = {
  command: 'Command',
  write: 'File change',
  changes: 'Changes left by a command',
  third_party: 'Third-party files',
  extension: 'Budget extension',
  question: 'Question',
};

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

function typingIn(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}

export function ApprovalsPageView(props: ApprovalsPageViewProps) {
  const { approvals, live } = props;
  return (
    <div className="page">
      <div className="page-header">
        <h1>Approvals</h1>
        <p className="muted small stream-status">
          <span className={`live-dot${live ? ' on' : ''}`} aria-hidden="true" /> {live ? 'Live: new requests appear here' : 'Not live: reload to see new requests'}
        </p>
      </div>
      <p className="muted small shortcuts" id="shortcuts">
        Keyboard: <kbd>j</kbd> / <kbd>k</kbd> next and previous, <kbd>a</kbd> approve, <kbd>r</kbd> reject.
      </p>
      <Query state={approvals} what="the approvals">
        {(list) => <Inbox {...props} list={list} />}
      </Query>
    </div>
  );
}

function Inbox({ list, selectedId, onSelect, onAnswer, busyId, answerError }: ApprovalsPageViewProps & { list: ApprovalView[] }) {
  const pending = list.filter((a) => a.state === 'pending');
  const selected = pending.find((a) => a.id === selectedId) ?? pending[0] ?? null;
  const [remember, setRemember] = useState(false);

  useEffect(() => setRemember(false), [selected?.id]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.altKey || e.ctrlKey || e.metaKey || typingIn(e.target) || !selected) return;
      const i = pending.findIndex((a) => a.id === selected.id);
      if (e.key === 'j' && i < pending.length - 1) onSelect(pending[i + 1]!.id);
      else if (e.key === 'k' && i > 0) onSelect(pending[i - 1]!.id);
      else if (e.key === 'a' && busyId === null) onAnswer(selected.id, 'approve', { rememberCommand: remember });
      else if (e.key === 'r' && busyId === null) onAnswer(selected.id, 'reject', { rememberCommand: false });
      else return;
      e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [pending, selected, onSelect, onAnswer, busyId, remember]);

  if (pending.length === 0) return <Empty>No request is waiting for you. New ones appear here as sessions ask.</Empty>;

  return (
    <div className="inbox">
      <ul className="inbox-list" aria-label="Pending approvals" aria-describedby="shortcuts">
        {pending.map((a) => (
          <li key={a.id}>
            <button type="button" className={`inbox-item${a.id === selected?.id ? ' selected' : ''}${isThirdParty(a) ? ' third-party' : ''}`} aria-current={a.id === selected?.id ? 'true' : undefined} onClick={() => onSelect(a.id)}>
              <span className="inbox-kind">
                {KIND_LABEL[a.kind]}
                {isThirdParty(a) && <span className="badge danger">third-party</span>}
              </span>
              <code className="inbox-summary">{summary(a)}</code>
              <span className="muted small">
                {a.agent} · session {a.sessionId} · {new Date(a.createdAt).toLocaleTimeString()}
              </span>
            </button>
          </li>
        ))}
      </ul>
      {selected && (
        <section className="card approval-detail" aria-labelledby="approval-title">
          <header className="approval-header">
            <h2 id="approval-title">{KIND_LABEL[selected.kind]}</h2>
            <span className="muted small">
              proposed by <strong>{selected.agent}</strong> in session <code>{selected.sessionId}</code>
            </span>
          </header>
          {isThirdParty(selected) && (
            <div className="third-party-banner" role="note">
              <strong>Third-party files.</strong> CI configuration, build scripts, hooks, manifests and lock files are run or trusted by other tools and
              people. This is a separate approval: read every line.
              <ul>
                {selected.flags.thirdParty.map((t) => (
                  <li key={t.path}>
                    <code>{t.path}</code> <span className="muted">({t.class})</span>
                  </li>
                ))}
              </ul>
            </div>
          )}
          <ApprovalSubject approval={selected} />
          <InlineError error={answerError} />
          <div className="actions">
            {'command' in selected.payload && (
              <label className="checkbox">
                <input type="checkbox" checked={remember} onChange={(e) => setRemember(e.target.checked)} />
                Do not ask again for this exact command in this session (if the policy allows it)
              </label>
            )}
            <button type="button" className="danger" disabled={busyId !== null} onClick={() => onAnswer(selected.id, 'reject', { rememberCommand: false })}>
              Reject <kbd aria-hidden="true">r</kbd>
            </button>
            <button type="button" className="primary" disabled={busyId !== null} onClick={() => onAnswer(selected.id, 'approve', { rememberCommand: remember })}>
              {busyId === selected.id ? 'Sending…' : 'Approve'} <kbd aria-hidden="true">a</kbd>
            </button>
          </div>
        </section>
      )}
    </div>
  );
}

function ApprovalSubject({ approval }: { approval: ApprovalView }) {
  const p = approval.payload;
  if ('command' in p) return <CommandView command={p.command} label="The exact command" />;
  if ('diff' in p) return <DiffViewer patch={p.diff} thirdParty={approval.flags.thirdParty} />;
  if ('question' in p) return <p>{p.question}</p>;
  return (
    <p>
      The session reached a limit and asks for <strong>{p.amount} more {p.extension}</strong>.
    </p>
  );
}
