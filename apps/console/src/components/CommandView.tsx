import { useMemo } from 'react';
import { highlightLines } from './diff/highlight';

/** The exact command the agent proposed (A1): shown verbatim, never reformatted or shortened. */
export function CommandView({ command, label = 'Command' }: { command: string; label?: string }) {
  const lines = useMemo(() => highlightLines(command, 'bash'), [command]);
  return (
    <figure className="command-view">
      <figcaption className="visually-hidden">{label}</figcaption>
      <pre>
        <code>
          {lines.map((html, i) => (
            <span key={i} className="command-line">
              <span className="prompt" aria-hidden="true">
                {i === 0 ? '$' : '>'}
              </span>
              {/* highlight.js escapes the text; only its colour spans are markup. */}
              <span dangerouslySetInnerHTML={{ __html: html || ' ' }} />
              {'\n'}
            </span>
          ))}
        </code>
      </pre>
    </figure>
  );
}
