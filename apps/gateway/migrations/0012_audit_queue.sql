-- Audit appends from many gateway replicas (docs/decisions/0013-audit-across-replicas.md).
-- One connection at a time chains: it holds the advisory lock 7341205119 for a round (one
-- transaction), and 7341205120 from the start of that round to its commit. A replica that finds the
-- chainer lock taken does not queue on it: it commits its entries to audit_pending (durable, no lock,
-- so many replicas' commits share disk flushes) and the chainer moves them into audit_log in its next
-- round, oldest first, hashing each onto the chain. `entry_key` names an entry from its first write
-- to its row in audit_log: a writer learns where its entries went, and a write retried after a lost
-- COMMIT reply is recognised instead of written twice.
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

-- Waits until no chaining round is in progress, then returns which of `keys` are in the chain. A
-- VOLATILE function takes a new snapshot for each query, so the lookup sees the round that has just
-- committed. The lock is the transaction's, so it is released when the calling statement ends.
CREATE FUNCTION audit_chained(keys uuid[])
  RETURNS TABLE (entry_key uuid, seq bigint, at timestamptz, prev_hash text, hash text)
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(7341205120);
  RETURN QUERY SELECT l.entry_key, l.seq, l.at, l.prev_hash, l.hash FROM audit_log l WHERE l.entry_key = ANY (keys);
END;
$$;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    -- Read, queue, and remove when chained; an entry in the queue is never changed.
    GRANT SELECT, INSERT, DELETE ON audit_pending TO lemniscate_app;
    GRANT USAGE, SELECT ON SEQUENCE audit_pending_id_seq TO lemniscate_app;
  END IF;
END;
$$;
