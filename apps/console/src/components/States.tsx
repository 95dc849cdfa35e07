import type { ReactNode } from 'react';
import { isApiError } from '../api/client';

export function Loading({ what }: { what: string }) {
  return (
    <div className="state loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      Loading {what}…
    </div>
  );
}

/** Shows the server's own sentence and the request id an administrator can look up in the logs. */
export function ErrorPanel({ error, title = 'Something went wrong', onRetry }: { error: unknown; title?: string; onRetry?: () => void }) {
  const message = isApiError(error) ? error.message : error instanceof Error ? error.message : 'An unexpected error occurred.';
  return (
    <div className="state error" role="alert">
      <h2>{title}</h2>
      <p>{message}</p>
      {isApiError(error) && (
        <p className="muted small">
          Code <code>{error.code}</code>
          {error.requestId && (
            <>
              {' '}
              · Request id <code>{error.requestId}</code>
            </>
          )}
        </p>
      )}
      {onRetry && (
        <button type="button" onClick={() => onRetry()}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state empty">{children}</div>;
}

/** What an action just did, read out once by screen readers; nothing when there is no news. */
export function Notice({ text }: { text: string | null | undefined }) {
  if (!text) return null;
  return (
    <p className="notice" role="status">
      {text}
    </p>
  );
}

export function InlineError({ error }: { error: unknown }) {
  if (!error) return null;
  const message = isApiError(error) ? error.message : error instanceof Error ? error.message : String(error);
  return (
    <p className="inline-error" role="alert">
      {message}
      {isApiError(error) && (
        <span className="muted small">
          {' '}
          (code {error.code}
          {error.requestId ? `, request ${error.requestId}` : ''})
        </span>
      )}
    </p>
  );
}
