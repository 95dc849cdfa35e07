import './zod-config';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { isApiError } from './api/client';
import { App } from './App';
import './styles.css';

// A sign-in that expired or was revoked shows the sign-in page again, whichever call noticed it.
// The `me` query itself is left out: its own 401 is what shows the sign-in page, and re-asking
// it from here would loop.
const signedOut = (error: unknown) => isApiError(error) && error.status === 401 && queryClient.getQueryState(['me'])?.status === 'success';
const expire = () => void queryClient.invalidateQueries({ queryKey: ['me'] });

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: (error, query) => query.queryKey[0] !== 'me' && signedOut(error) && expire() }),
  mutationCache: new MutationCache({ onError: (error) => signedOut(error) && expire() }),
  defaultOptions: {
    queries: {
      // A refusal or a missing resource will not change on a second try; a dropped connection may.
      retry: (count, error) => count < 2 && !(isApiError(error) && error.status >= 400 && error.status < 500),
      refetchOnWindowFocus: true,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <BrowserRouter>
        <App />
      </BrowserRouter>
    </QueryClientProvider>
  </StrictMode>,
);
