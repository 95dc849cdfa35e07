import { createContext, useContext, type ReactNode } from 'react';
import type { MeResponse } from '@lemniscate/contracts';

interface AuthValue {
  me: MeResponse;
  signOut: () => void;
}

const Ctx = createContext<AuthValue | null>(null);

export function AuthProvider({ value, children }: { value: AuthValue; children: ReactNode }) {
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAuth(): AuthValue {
  const v = useContext(Ctx);
  if (!v) throw new Error('useAuth outside AuthProvider');
  return v;
}
