import { Fragment, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { EXPAND_MAX, EXPAND_STEP, NO_CONTEXT, viewOfGap, withLines, type FileContext, type LoadContext } from './context';
import { chunksOf, gapsOf, parseUnifiedDiff, toSplitRows, type DiffFile, type DiffLine, type Gap } from './diff-model';

interface ThirdPartyFlag {
  path: string;
  class: string;
}

interface DiffViewerProps {
  patch: string;
  /** Files the policy classes as executed by third parties (P5): shown apart and flagged. */
  thirdParty?: ThirdPartyFlag[];
  initialMode?: 'unified' | 'split';
  /** Forces the highlighting language (a policy diff names its sides `policy v2`, not a file). */
  language?: string;
  /** Two versions of one document: different names on each side are not a rename. */
  oneDocument?: boolean;
  /** Labels the region for screen readers when several viewers share a page. */
  label?: string;
  /**
   * Line comments, as a review's: with `onComments` a line's number is a button that opens a comment
   * on it (in either layout; a removed line is commented by its old number). The approvals inbox
   * sends them back to the agent as the reject reason.
   */
  comments?: readonly LineComment[];
  onComments?: (comments: LineComment[]) => void;
  /**
   * Reads unchanged lines around the hunks of a modified file (an approval's sandbox): with it, the
   * gaps between hunks can be expanded, 20 lines at a time or all at once, as in a pull request.
   */
  loadContext?: LoadContext;
}

export interface LineComment {
  path: string;
  /** The line's number in the new file, or in the old one for a removed line (`side`). */
  line: number;
  side: 'old' | 'new';
  text: string;
}

/** The comments as one reason: `path:line: text`, one per line, in the order they were written. */
export function commentsAsReason(comments: readonly LineComment[]): string {
  return comments.map((c) => `${c.path}:${c.side === 'old' ? `${c.line} (old)` : c.line}: ${c.text}`).join('\n');
}

const CHANGE_LABEL: Record<DiffFile['change'], string> = { added: 'added', deleted: 'deleted', modified: 'modified', renamed: 'renamed' };

/** The layout a person last chose, on this browser, for every diff. */
const LAYOUT_KEY = 'lemniscate.diff.layout';
/** Lines of one file drawn at first; the rest on request, so a huge diff does not stall the page. */
export const FIRST_LINES = 400;
/** Narrower than this, side by side is unreadable: the layout is unified. */
const NARROW = '(max-width: 700px)';

function storedLayout(): 'unified' | 'split' | null {
  try {
    const v = window.localStorage.getItem(LAYOUT_KEY);
    return v === 'unified' || v === 'split' ? v : null;
  } catch {
    return null;
  }
}

function useNarrow(): boolean {
  const query = typeof window !== 'undefined' && typeof window.matchMedia === 'function' ? window.matchMedia(NARROW) : null;
  const [narrow, setNarrow] = useState(query?.matches ?? false);
  useEffect(() => {
    if (!query) return;
    const on = () => setNarrow(query.matches);
    query.addEventListener('change', on);
    return () => query.removeEventListener('change', on);
  }, [query]);
  return narrow;
}

export function DiffViewer({ patch, thirdParty = [], initialMode = 'unified', label = 'Proposed changes', language, oneDocument = false, comments = [], onComments, loadContext }: DiffViewerProps) {
  const [drafting, setDrafting] = useState<{ path: string; line: number; side: 'old' | 'new' } | null>(null);
  // Lines read around the hunks, per file; forgotten when another change is shown.
  const [contexts, setContexts] = useState<Readonly<Record<string, FileContext>>>({});
  useEffect(() => setContexts({}), [patch]);
  const expand = (f: DiffFile, gap: number, from: number, to: number) => {
    if (!loadContext) return;
    const update = (change: (c: FileContext) => FileContext) => setContexts((all) => ({ ...all, [f.path]: change(all[f.path] ?? NO_CONTEXT) }));
    update((c) => ({ ...c, busyGap: gap, error: null }));
    loadContext(f.path, from, to).then(
      (r) => update((c) => withLines(c, from, r.lines, r.totalLines, f.language)),
      (e: unknown) => update((c) => ({ ...c, busyGap: null, error: { gap, message: e instanceof Error ? e.message : String(e) } })),
    );
  };
  const parsed = useMemo(() => {
    try {
      return { files: parseUnifiedDiff(patch, { language, oneDocument }), error: null };
    } catch (e) {
      return { files: [], error: e instanceof Error ? e.message : String(e) };
    }
  }, [patch, language, oneDocument]);
  const files = parsed.files;
  const [chosen, setChosen] = useState<'unified' | 'split'>(() => storedLayout() ?? initialMode);
  const narrow = useNarrow();
  const mode = narrow ? 'unified' : chosen;
  const setMode = (m: 'unified' | 'split') => {
    setChosen(m);
    try {
      window.localStorage.setItem(LAYOUT_KEY, m);
    } catch {
      // A browser that keeps nothing still switches; it only forgets the choice.
    }
  };
  const [current, setCurrent] = useState(0);
  // Per file: folded away, and marked viewed (which folds it), as in a pull request's review.
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [viewed, setViewed] = useState<ReadonlySet<string>>(new Set());
  const [shownAll, setShownAll] = useState<ReadonlySet<string>>(new Set());
  const toggle = (set: ReadonlySet<string>, key: string, on: boolean) => {
    const next = new Set(set);
    if (on) next.add(key);
    else next.delete(key);
    return next;
  };
  const fileRefs = useRef<(HTMLElement | null)[]>([]);
  const flagFor = (path: string) => thirdParty.find((t) => t.path === path);

  const goTo = (index: number) => {
    const target = Math.max(0, Math.min(files.length - 1, index));
    setCurrent(target);
    const el = fileRefs.current[target];
    el?.scrollIntoView?.({ block: 'start', behavior: 'smooth' });
    el?.focus({ preventScroll: true });
  };

  if (parsed.error !== null) {
    // Never hide a change because it cannot be pretty-printed: show it verbatim instead.
    return (
      <section className="diff" aria-label={label}>
        <p className="inline-error">This diff cannot be displayed file by file ({parsed.error}). Here it is exactly as received:</p>
        <pre className="raw-diff">{patch}</pre>
      </section>
    );
  }
  if (files.length === 0) return <p className="muted">This change has no file differences to show.</p>;

  return (
    <section className="diff" aria-label={label}>
      <div className="diff-toolbar">
        {narrow ? (
          <span className="muted small">Unified layout on a narrow screen.</span>
        ) : (
          <div className="segmented" role="group" aria-label="Diff layout">
            <button type="button" aria-pressed={mode === 'unified'} onClick={() => setMode('unified')}>
              Unified
            </button>
            <button type="button" aria-pressed={mode === 'split'} onClick={() => setMode('split')}>
              Side by side
            </button>
          </div>
        )}
        <span className="muted diff-summary">
          {files.length} {files.length === 1 ? 'file' : 'files'}, <span className="add-count">+{files.reduce((s, f) => s + f.additions, 0)}</span>{' '}
          <span className="del-count">−{files.reduce((s, f) => s + f.deletions, 0)}</span>
          {files.length > 1 && `, ${files.filter((f) => viewed.has(f.path)).length} of ${files.length} viewed`}
        </span>
        {files.length > 1 && (
          <div className="diff-filenav">
            <button type="button" onClick={() => goTo(current - 1)} disabled={current === 0}>
              Previous file
            </button>
            <button type="button" onClick={() => goTo(current + 1)} disabled={current === files.length - 1}>
              Next file
            </button>
          </div>
        )}
      </div>

      <div className="diff-body">
        {files.length > 1 && (
          <nav className="diff-files" aria-label="Files in this change">
            <ul>
              {files.map((f, i) => {
                const flag = flagFor(f.path);
                return (
                  <li key={f.path}>
                    <button type="button" className={i === current ? 'current' : undefined} aria-current={i === current ? 'true' : undefined} onClick={() => goTo(i)}>
                      <span className={`change-dot ${f.change}`} aria-hidden="true" />
                      <span className="path">{f.path}</span>
                      {flag && <span className="badge danger">third-party</span>}
                      {viewed.has(f.path) && <span className="badge good">viewed</span>}
                    </button>
                  </li>
                );
              })}
            </ul>
          </nav>
        )}
        <div className="diff-files-content">
          {files.map((f, i) => {
            const flag = flagFor(f.path);
            const folded = collapsed.has(f.path) || viewed.has(f.path);
            const bodyId = `diff-file-${i}-body`;
            // The hunks drawn: all of them, or the first FIRST_LINES lines until the person asks for the rest.
            const total = f.hunks.reduce((s, h) => s + h.lines.length, 0);
            let budget = shownAll.has(f.path) ? Infinity : FIRST_LINES;
            const hunks = f.hunks
              .map((h) => {
                const lines = h.lines.slice(0, Math.max(0, budget));
                budget -= lines.length;
                return { ...h, lines };
              })
              .filter((h) => h.lines.length > 0);
            const hidden = total - hunks.reduce((s, h) => s + h.lines.length, 0);
            const ctx = contexts[f.path] ?? NO_CONTEXT;
            // Gaps around the hunks drawn (the one after the last only when every hunk is drawn).
            const gaps = loadContext && f.change === 'modified' && !f.binary ? gapsOf(f.hunks, ctx.total).filter((g) => g.before < hunks.length || (hidden === 0 && g.before === f.hunks.length)) : [];
            const rows = (lines: readonly DiffLine[]): ReactNode =>
              mode === 'unified'
                ? lines.map((l) => {
                    const side = l.kind === 'del' ? 'old' : 'new';
                    const no = side === 'old' ? l.oldNo : l.newNo;
                    const here = (c: { path: string; line: number; side: string }) => c.path === f.path && c.line === no && c.side === side;
                    return (
                      <UnifiedRow
                        key={`${l.kind}${l.oldNo ?? ''}:${l.newNo ?? ''}`}
                        line={l}
                        path={f.path}
                        onComment={onComments && typeof no === 'number' ? () => setDrafting({ path: f.path, line: no, side }) : undefined}
                        comments={comments.filter(here)}
                        drafting={drafting !== null && here(drafting)}
                        onSave={(text) => {
                          if (onComments && typeof no === 'number' && text.trim()) onComments([...comments, { path: f.path, line: no, side, text: text.trim() }]);
                          setDrafting(null);
                        }}
                        onCancel={() => setDrafting(null)}
                        onDelete={(c) => onComments?.(comments.filter((x) => x !== c))}
                      />
                    );
                  })
                : toSplitRows([...lines]).map((r, ri) => {
                    // A removed line is commented on the left (old numbers); every other line on the right.
                    const targets = [r.left?.kind === 'del' ? { line: r.left, side: 'old' as const } : null, r.right ? { line: r.right, side: 'new' as const } : null].flatMap((t) =>
                      t && typeof (t.side === 'old' ? t.line.oldNo : t.line.newNo) === 'number' ? [{ side: t.side, no: (t.side === 'old' ? t.line.oldNo : t.line.newNo) as number }] : [],
                    );
                    const at = (t: { side: 'old' | 'new'; no: number }) => (c: { path: string; line: number; side: string }) => c.path === f.path && c.line === t.no && c.side === t.side;
                    const open = (side: 'old' | 'new') => {
                      const t = targets.find((x) => x.side === side);
                      return onComments && t ? () => setDrafting({ path: f.path, line: t.no, side }) : undefined;
                    };
                    return (
                      <Fragment key={ri}>
                        <tr>
                          <SplitCell line={r.left} side="old" path={f.path} onComment={r.left?.kind === 'del' ? open('old') : undefined} />
                          <SplitCell line={r.right} side="new" path={f.path} onComment={open('new')} />
                        </tr>
                        {targets.map((t) => (
                          <CommentRows
                            key={t.side}
                            no={t.no}
                            path={f.path}
                            comments={comments.filter(at(t))}
                            drafting={drafting !== null && at(t)(drafting)}
                            onSave={(text) => {
                              if (onComments && text.trim()) onComments([...comments, { path: f.path, line: t.no, side: t.side, text: text.trim() }]);
                              setDrafting(null);
                            }}
                            onCancel={() => setDrafting(null)}
                            onDelete={(c) => onComments?.(comments.filter((x) => x !== c))}
                          />
                        ))}
                      </Fragment>
                    );
                  });
            const gapTable = (g: Gap) => (
              <ContextGap key={`gap-${g.before}`} gap={g} file={f} ctx={ctx} mode={mode} rows={rows} onExpand={(from, to) => expand(f, g.before, from, to)} hunkCount={f.hunks.length} />
            );
            return (
              <article
                key={f.path}
                className={`diff-file${flag ? ' third-party' : ''}`}
                ref={(el) => {
                  fileRefs.current[i] = el;
                }}
                tabIndex={-1}
                aria-labelledby={`diff-file-${i}`}
              >
                <header className="diff-file-header">
                  <button
                    type="button"
                    className="ghost small fold"
                    aria-expanded={!folded}
                    aria-controls={bodyId}
                    onClick={() => {
                      if (folded) {
                        setCollapsed(toggle(collapsed, f.path, false));
                        setViewed(toggle(viewed, f.path, false));
                      } else setCollapsed(toggle(collapsed, f.path, true));
                    }}
                  >
                    <span aria-hidden="true">{folded ? '▸' : '▾'}</span>
                    <span className="visually-hidden">
                      {folded ? 'Show' : 'Hide'} {f.path}
                    </span>
                  </button>
                  <h3 id={`diff-file-${i}`}>{f.change === 'renamed' ? `${f.oldPath} → ${f.newPath}` : f.path}</h3>
                  <span className={`badge ${f.change}`}>{CHANGE_LABEL[f.change]}</span>
                  <span className="add-count">+{f.additions}</span>
                  <span className="del-count">−{f.deletions}</span>
                  <label className="checkbox viewed">
                    <input type="checkbox" checked={viewed.has(f.path)} onChange={(e) => setViewed(toggle(viewed, f.path, e.target.checked))} />
                    Viewed<span className="visually-hidden"> {f.path}</span>
                  </label>
                </header>
                {flag && (
                  <p className="third-party-note" role="note">
                    <strong>Third-party file ({flag.class}).</strong> Tools and people other than the agent run or trust this file. Approving it is a separate decision.
                  </p>
                )}
                <div id={bodyId} hidden={folded}>
                  {f.binary ? (
                    <p className="muted pad">Binary file: its content cannot be shown as text.</p>
                  ) : (
                    <>
                      {hunks.map((h, hi) => (
                        <div key={hi} className="diff-hunk">
                          {gaps.filter((g) => g.before === hi).map(gapTable)}
                          {chunksOf(h.lines).map((part, ci, parts) => (
                            <table
                              key={ci}
                              className={`diff-table ${mode}${parts.length > 1 ? ' diff-chunk' : ''}`}
                              // Until the browser lays a chunk out, it counts as this tall (one line each).
                              style={parts.length > 1 ? { containIntrinsicSize: `auto ${(part.length * LINE_REM).toFixed(1)}rem` } : undefined}
                            >
                              <caption className="visually-hidden">
                                {f.path}, lines {h.header}
                                {parts.length > 1 && `, part ${ci + 1} of ${parts.length}`}
                              </caption>
                              <DiffColumns mode={mode} />
                              <tbody>
                                {ci === 0 && (
                                  <tr className="hunk-header">
                                    <td colSpan={4}>{h.header}</td>
                                  </tr>
                                )}
                                {rows(part)}
                              </tbody>
                            </table>
                          ))}
                        </div>
                      ))}
                      {gaps.filter((g) => g.before === f.hunks.length).map(gapTable)}
                    </>
                  )}
                  {hidden > 0 && (
                    <p className="pad diff-more">
                      <button type="button" onClick={() => setShownAll(toggle(shownAll, f.path, true))}>
                        Show the other {hidden.toLocaleString('en')} lines of {f.path}
                      </button>
                    </p>
                  )}
                </div>
              </article>
            );
          })}
        </div>
      </div>
    </section>
  );
}

interface ContextGapProps {
  gap: Gap;
  file: DiffFile;
  ctx: FileContext;
  mode: 'unified' | 'split';
  rows: (lines: readonly DiffLine[]) => ReactNode;
  onExpand: (from: number, to: number) => void;
  hunkCount: number;
}

/** Unchanged lines between hunks: what was read of them, and the buttons that read more. */
function ContextGap({ gap, file, ctx, mode, rows, onExpand, hunkCount }: ContextGapProps) {
  const view = viewOfGap(gap, ctx);
  const hidden = view.hidden;
  const count = hidden && hidden.to !== null ? hidden.to - hidden.from + 1 : null;
  const range = (from: number, to: number) => `lines ${from} to ${to} of ${file.path}`;
  // The visible words stay short; the hidden part names the lines, so each button's name says what it reads.
  const button = (key: string, from: number, to: number, words: ReactNode) => (
    <button key={key} type="button" className="ghost small" disabled={ctx.busyGap !== null} onClick={() => onExpand(from, to)}>
      {words}
      <span className="visually-hidden"> ({range(from, to)})</span>
    </button>
  );
  const buttons: ReactNode[] = [];
  if (hidden) {
    const below = gap.before > 0; // a hunk above: lines can be read downwards from it
    const above = gap.before < hunkCount; // a hunk below: upwards from it
    if (count !== null && count <= EXPAND_STEP) {
      buttons.push(button('all', hidden.from, hidden.to!, `Show ${count} unchanged ${count === 1 ? 'line' : 'lines'}`));
    } else {
      const more = (arrow: string) => (
        <>
          <span aria-hidden="true">{arrow} </span>
          {EXPAND_STEP} more lines
        </>
      );
      if (below || hidden.to === null) buttons.push(button('down', hidden.from, hidden.from + EXPAND_STEP - 1, more('↓')));
      if (above && hidden.to !== null) buttons.push(button('up', hidden.to - EXPAND_STEP + 1, hidden.to, more('↑')));
      if (count !== null && count <= EXPAND_MAX) buttons.push(button('every', hidden.from, hidden.to!, `Show all ${count} lines`));
    }
  }
  return (
    <table className={`diff-table ${mode} diff-context`}>
      <caption className="visually-hidden">
        {file.path}, unchanged lines {gap.from}
        {gap.to !== null ? ` to ${gap.to}` : ' onwards'}
      </caption>
      <DiffColumns mode={mode} />
      <tbody>
        {rows(view.top)}
        {hidden && (
          <tr className="expander">
            <td colSpan={4}>
              <span className="muted small">
                {count === null ? `Unchanged from line ${hidden.from}` : count === 1 ? `Line ${hidden.from} unchanged` : `Lines ${hidden.from}–${hidden.to} unchanged`}
              </span>
              {buttons}
              {ctx.busyGap === gap.before && <span className="muted small">Reading…</span>}
              {ctx.error?.gap === gap.before && (
                <span className="inline-error small" role="alert">
                  {ctx.error.message}
                </span>
              )}
            </td>
          </tr>
        )}
        {rows(view.bottom)}
      </tbody>
    </table>
  );
}

/** A diff table's columns, and their names for screen readers. */
function DiffColumns({ mode }: { mode: 'unified' | 'split' }) {
  return mode === 'unified' ? (
    <>
      <colgroup>
        <col className="col-ln" />
        <col className="col-ln" />
        <col className="col-sign" />
        <col />
      </colgroup>
      <thead className="visually-hidden">
        <tr>
          <th scope="col">Old line</th>
          <th scope="col">New line</th>
          <th scope="col">Change</th>
          <th scope="col">Code</th>
        </tr>
      </thead>
    </>
  ) : (
    <>
      <colgroup>
        <col className="col-ln" />
        <col />
        <col className="col-ln" />
        <col />
      </colgroup>
      <thead className="visually-hidden">
        <tr>
          <th scope="col">Old line</th>
          <th scope="col">Old code</th>
          <th scope="col">New line</th>
          <th scope="col">New code</th>
        </tr>
      </thead>
    </>
  );
}

const LINE_REM = 0.8 * 1.55;

const SIGN: Record<DiffLine['kind'], string> = { add: '+', del: '−', context: ' ' };
const SR: Record<DiffLine['kind'], string> = { add: 'added', del: 'removed', context: 'unchanged' };

interface UnifiedRowProps {
  line: DiffLine;
  path: string;
  onComment?: () => void;
  comments: readonly LineComment[];
  drafting: boolean;
  onSave: (text: string) => void;
  onCancel: () => void;
  onDelete: (c: LineComment) => void;
}

function UnifiedRow({ line, path, onComment, comments, drafting, onSave, onCancel, onDelete }: UnifiedRowProps) {
  const no = line.kind === 'del' ? line.oldNo : line.newNo;
  const number = (value: number | null | undefined, mine: boolean) =>
    mine && onComment ? (
      <button type="button" className="ln-button" onClick={onComment} aria-label={`Comment on line ${value} of ${path}`}>
        {value}
      </button>
    ) : (
      (value ?? '')
    );
  return (
    <>
      <tr className={`line ${line.kind}`}>
        <td className="ln">{number(line.oldNo, line.kind === 'del')}</td>
        <td className="ln">{number(line.newNo, line.kind !== 'del')}</td>
        <td className="sign">
          <span aria-hidden="true">{SIGN[line.kind]}</span>
          <span className="visually-hidden">{SR[line.kind]}</span>
        </td>
        {/* highlight.js escapes the code it is given; the markup is only its colour spans. */}
        <td className="code" dangerouslySetInnerHTML={{ __html: line.html || ' ' }} />
      </tr>
      <CommentRows no={no} path={path} comments={comments} drafting={drafting} onSave={onSave} onCancel={onCancel} onDelete={onDelete} />
    </>
  );
}

/** A line's comments under it, and the form of the one being written. */
function CommentRows({ no, path, comments, drafting, onSave, onCancel, onDelete }: Omit<UnifiedRowProps, 'line' | 'onComment'> & { no: number | null }) {
  return (
    <>
      {comments.map((c, i) => (
        <tr key={`c${i}`} className="line-comment">
          <td colSpan={4}>
            <span className="comment-text">
              <strong>
                Your comment on line {no}
                {c.side === 'old' ? ' (old)' : ''}:
              </strong>{' '}
              {c.text}
            </span>
            <button type="button" className="ghost small" onClick={() => onDelete(c)}>
              Delete<span className="visually-hidden"> the comment on line {no}</span>
            </button>
          </td>
        </tr>
      ))}
      {drafting && (
        <tr className="line-comment">
          <td colSpan={4}>
            <CommentForm line={no ?? 0} path={path} onSave={onSave} onCancel={onCancel} />
          </td>
        </tr>
      )}
    </>
  );
}

function CommentForm({ line, path, onSave, onCancel }: { line: number; path: string; onSave: (text: string) => void; onCancel: () => void }) {
  const [text, setText] = useState('');
  const id = `comment-${path}-${line}`.replace(/[^A-Za-z0-9_-]/g, '-');
  return (
    <form
      className="comment-form"
      onSubmit={(e) => {
        e.preventDefault();
        onSave(text);
      }}
    >
      <label htmlFor={id}>
        Comment on line {line} of {path} (sent to the agent if you reject)
      </label>
      <textarea id={id} rows={2} maxLength={500} value={text} autoFocus onChange={(e) => setText(e.target.value)} />
      <div className="actions">
        <button type="button" className="ghost" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={!text.trim()}>
          Add comment
        </button>
      </div>
    </form>
  );
}

function SplitCell({ line, side, path, onComment }: { line: DiffLine | null; side: 'old' | 'new'; path?: string; onComment?: () => void }) {
  if (!line) {
    return (
      <>
        <td className="ln empty" />
        <td className="code empty" />
      </>
    );
  }
  const no = side === 'old' ? line.oldNo : line.newNo;
  return (
    <>
      <td className={`ln ${line.kind}`}>
        {onComment && no !== null ? (
          <button type="button" className="ln-button" onClick={onComment} aria-label={`Comment on line ${no}${side === 'old' ? ' (old)' : ''} of ${path}`}>
            {no}
          </button>
        ) : (
          (no ?? '')
        )}
      </td>
      <td className={`code ${line.kind}`}>
        <span className="visually-hidden">{SR[line.kind]} </span>
        <span dangerouslySetInnerHTML={{ __html: line.html || ' ' }} />
      </td>
    </>
  );
}
