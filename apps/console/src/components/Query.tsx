import type { ReactNode } from 'react';
import type { UseQueryResult } from '@tanstack/react-query';
import { ErrorPanel, Loading } from './States';

/** What a view needs to know about data it does not fetch itself. */
export type QueryState<T> = { status: 'loading' } | { status: 'error'; error: unknown; retry?: () => void } | { status: 'ready'; data: T };

export function fromQuery<T>(q: UseQueryResult<T>): QueryState<T> {
  if (q.isPending) return { status: 'loading' };
  if (q.isError) return { status: 'error', error: q.error, retry: () => void q.refetch() };
  return { status: 'ready', data: q.data as T };
}

export const ready = <T,>(data: T): QueryState<T> => ({ status: 'ready', data });

export function Query<T>({ state, what, children }: { state: QueryState<T>; what: string; children: (data: T) => ReactNode }) {
  if (state.status === 'loading') return <Loading what={what} />;
  if (state.status === 'error') return <ErrorPanel title={`Could not load ${what}`} error={state.error} onRetry={state.retry} />;
  return <>{children(state.data)}</>;
}
