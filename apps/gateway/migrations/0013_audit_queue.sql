-- Audit appends from many gateway replicas (docs/decisions/0013-audit-across-replicas.md).
-- One connection at a time chains: a round is one transaction holding the advisory lock 7341205119.
-- A replica that finds that lock taken does not wait for it: it commits its entries to audit_pending
-- (durable, no lock, so many replicas' commits share disk flushes), and the chainer moves them into
-- audit_log in its next round, oldest first, hashing each onto the chain; the round's commit
-- announces where they went (NOTIFY lemniscate_audit). `entry_key` names an entry from its first
-- write to its row in audit_log: a write retried after a lost COMMIT reply is recognised instead of
-- written twice.
CREATE TABLE audit_pending (
  id bigserial PRIMARY KEY,
  entry_key uuid NOT NULL,
  actor text NOT NULL,
  kind text NOT NULL,
  project_id text,
  session_id text,
  payload text NOT NULL,
  queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT audit_pending_entry_key_key UNIQUE (entry_key)
);

-- Not part of the hashed entry: a receipt. NULL for entries written before this migration.
ALTER TABLE audit_log ADD COLUMN entry_key uuid;
CREATE UNIQUE INDEX audit_log_entry_key_idx ON audit_log (entry_key);

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    -- Read, queue, and remove when chained; a queued entry is never changed.
    GRANT SELECT, INSERT, DELETE ON audit_pending TO lemniscate_app;
    GRANT USAGE, SELECT ON SEQUENCE audit_pending_id_seq TO lemniscate_app;
  END IF;
END;
$$;
