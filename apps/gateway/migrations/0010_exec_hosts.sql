-- The exec-host pool (S1, S3, S6, G07; docs/decisions/0010-exec-host-pool.md): every exec-host that
-- registered, what it last said about itself, and its state. `drained_by` is set while an operator
-- keeps it drained, whatever happens to its heartbeats, so a drained host that is lost and comes
-- back stays drained. A session's placement is `sessions.exec_host` (a column kept since 0001).
CREATE TABLE exec_hosts (
  id text PRIMARY KEY,
  address text NOT NULL,
  runtimes jsonb NOT NULL,
  images jsonb NOT NULL,
  environments jsonb NOT NULL,
  capacity integer NOT NULL CHECK (capacity > 0),
  load integer NOT NULL CHECK (load >= 0),
  version text NOT NULL,
  state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'lost')),
  drained_by text,
  drain_reason text,
  state_changed_at timestamptz NOT NULL DEFAULT now(),
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
  CHECK (state <> 'draining' OR drained_by IS NOT NULL)
);
CREATE INDEX sessions_exec_host_idx ON sessions (exec_host) WHERE status = 'running';
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, UPDATE ON exec_hosts TO lemniscate_app;
  END IF;
END;
$$;
