-- Audit sinks (T2): each sink named in the gateway's sinks file has a cursor, the last seq it was
-- sent, and a lease: one gateway at a time sends to a sink (the holder), so replicas never send an
-- entry twice; another takes over from the cursor when a holder stops renewing. The failure fields
-- are how every replica knows whether a sink can record (the console's warning, the refusal mode).
CREATE TABLE audit_sink_cursors (
  name text PRIMARY KEY,
  seq bigint NOT NULL DEFAULT 0,
  holder text,
  lease_until timestamptz,
  delivered_at timestamptz,
  failing_since timestamptz,
  last_error text,
  last_attempt_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, UPDATE ON audit_sink_cursors TO lemniscate_app;
  END IF;
END;
$$;
