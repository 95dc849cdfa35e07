import { useMutation, useQueryClient } from '@tanstack/react-query';
import { login } from '../api/queries/auth';
import { meQuery } from '../api/queries/auth';
import { SignInPageView } from './SignInPageView';

export function SignInPage({ notice = null }: { notice?: string | null }) {
  const qc = useQueryClient();
  const m = useMutation({
    mutationFn: login,
    onSuccess: (res) => qc.setQueryData(meQuery().queryKey, { user: res.user, csrfToken: res.csrfToken, via: 'cookie' as const }),
  });
  return <SignInPageView onSubmit={(c) => m.mutate(c)} pending={m.isPending} error={m.error} notice={notice} />;
}
