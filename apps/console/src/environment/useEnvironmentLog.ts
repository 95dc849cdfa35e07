import { useEffect, useState } from 'react';
import { isApiError } from '../api/client';
import { environmentLogFrom, LOG_POLL_MS } from '../api/queries/environment';
import { appendLog, emptyLog, nextLogRead, type LogState } from './view-model';

export interface FollowedLog extends LogState {
  /** The last read that failed; the log keeps what it had. */
  error: unknown;
}

/** After a failed read the log is read again this much later, unless the gateway refused it (4xx). */
const RETRY_MS = 3_000;

/**
 * Follows the log of one preparation: reads it from the start, then its tail from `nextOffset` every
 * second until the job is over and nothing new comes. A new job starts a new log.
 */
export function useEnvironmentLog(projectId: string, jobId: string | null): FollowedLog | null {
  const [log, setLog] = useState<FollowedLog | null>(null);

  useEffect(() => {
    if (!jobId) {
      setLog(null);
      return;
    }
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let state: LogState = emptyLog(jobId);
    setLog({ ...state, error: null });

    const read = async () => {
      try {
        const chunk = await environmentLogFrom(projectId, jobId, state.nextOffset, abort.signal);
        if (abort.signal.aborted) return;
        state = appendLog(state, chunk);
        setLog({ ...state, error: null });
        const next = nextLogRead(chunk, LOG_POLL_MS);
        if (next !== null) timer = setTimeout(() => void read(), next);
      } catch (error) {
        if (abort.signal.aborted) return;
        setLog({ ...state, error });
        if (!(isApiError(error) && error.status >= 400 && error.status < 500)) timer = setTimeout(() => void read(), RETRY_MS);
      }
    };
    void read();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [projectId, jobId]);

  return log && log.jobId === jobId ? log : null;
}
