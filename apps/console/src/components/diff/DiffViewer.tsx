import { useMemo, useRef, useState } from 'react';
import { parseUnifiedDiff, toSplitRows, type DiffFile, type DiffLine } from './diff-model';

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
}

const CHANGE_LABEL: Record<DiffFile['change'], string> = { added: 'added', deleted: 'deleted', modified: 'modified', renamed: 'renamed' };

export function DiffViewer({ patch, thirdParty = [], initialMode = 'unified', label = 'Proposed changes', language, oneDocument = false }: DiffViewerProps) {
  const parsed = useMemo(() => {
    try {
      return { files: parseUnifiedDiff(patch, { language, oneDocument }), error: null };
    } catch (e) {
      return { files: [], error: e instanceof Error ? e.message : String(e) };
    }
  }, [patch, language, oneDocument]);
  const files = parsed.files;
  const [mode, setMode] = useState(initialMode);
  const [current, setCurrent] = useState(0);
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
        <div className="segmented" role="group" aria-label="Diff layout">
          <button type="button" aria-pressed={mode === 'unified'} onClick={() => setMode('unified')}>
            Unified
          </button>
          <button type="button" aria-pressed={mode === 'split'} onClick={() => setMode('split')}>
            Side by side
          </button>
        </div>
        <span className="muted diff-summary">
          {files.length} {files.length === 1 ? 'file' : 'files'}, <span className="add-count">+{files.reduce((s, f) => s + f.additions, 0)}</span>{' '}
          <span className="del-count">−{files.reduce((s, f) => s + f.deletions, 0)}</span>
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
                  <h3 id={`diff-file-${i}`}>{f.change === 'renamed' ? `${f.oldPath} → ${f.newPath}` : f.path}</h3>
                  <span className={`badge ${f.change}`}>{CHANGE_LABEL[f.change]}</span>
                  <span className="add-count">+{f.additions}</span>
                  <span className="del-count">−{f.deletions}</span>
                </header>
                {flag && (
                  <p className="third-party-note" role="note">
                    <strong>Third-party file ({flag.class}).</strong> Tools and people other than the agent run or trust this file. Approving it is a separate decision.
                  </p>
                )}
                {f.binary ? (
                  <p className="muted pad">Binary file: its content cannot be shown as text.</p>
                ) : (
                  f.hunks.map((h, hi) => (
                    <table key={hi} className={`diff-table ${mode}`}>
                      <caption className="visually-hidden">
                        {f.path}, lines {h.header}
                      </caption>
                      {mode === 'unified' ? (
                        <colgroup>
                          <col className="col-ln" />
                          <col className="col-ln" />
                          <col className="col-sign" />
                          <col />
                        </colgroup>
                      ) : (
                        <colgroup>
                          <col className="col-ln" />
                          <col />
                          <col className="col-ln" />
                          <col />
                        </colgroup>
                      )}
                      <thead className="visually-hidden">
                        <tr>
                          {mode === 'unified' ? (
                            <>
                              <th scope="col">Old line</th>
                              <th scope="col">New line</th>
                              <th scope="col">Change</th>
                              <th scope="col">Code</th>
                            </>
                          ) : (
                            <>
                              <th scope="col">Old line</th>
                              <th scope="col">Old code</th>
                              <th scope="col">New line</th>
                              <th scope="col">New code</th>
                            </>
                          )}
                        </tr>
                      </thead>
                      <tbody>
                        <tr className="hunk-header">
                          <td colSpan={4}>{h.header}</td>
                        </tr>
                        {mode === 'unified'
                          ? h.lines.map((l, li) => <UnifiedRow key={li} line={l} />)
                          : toSplitRows(h.lines).map((r, ri) => (
                              <tr key={ri}>
                                <SplitCell line={r.left} side="old" />
                                <SplitCell line={r.right} side="new" />
                              </tr>
                            ))}
                      </tbody>
                    </table>
                  ))
                )}
              </article>
            );
          })}
        </div>
      </div>
    </section>
  );
}

const SIGN: Record<DiffLine['kind'], string> = { add: '+', del: '−', context: ' ' };
const SR: Record<DiffLine['kind'], string> = { add: 'added', del: 'removed', context: 'unchanged' };

function UnifiedRow({ line }: { line: DiffLine }) {
  return (
    <tr className={`line ${line.kind}`}>
      <td className="ln">{line.oldNo ?? ''}</td>
      <td className="ln">{line.newNo ?? ''}</td>
      <td className="sign">
        <span aria-hidden="true">{SIGN[line.kind]}</span>
        <span className="visually-hidden">{SR[line.kind]}</span>
      </td>
      {/* highlight.js escapes the code it is given; the markup is only its colour spans. */}
      <td className="code" dangerouslySetInnerHTML={{ __html: line.html || ' ' }} />
    </tr>
  );
}

function SplitCell({ line, side }: { line: DiffLine | null; side: 'old' | 'new' }) {
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
      <td className={`ln ${line.kind}`}>{no ?? ''}</td>
      <td className={`code ${line.kind}`}>
        <span className="visually-hidden">{SR[line.kind]} </span>
        <span dangerouslySetInnerHTML={{ __html: line.html || ' ' }} />
      </td>
    </>
  );
}
