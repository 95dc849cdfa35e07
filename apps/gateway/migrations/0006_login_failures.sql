-- Failed sign-ins per account and per address, in the database so that every gateway replica paces
-- a guesser the same way (a guesser spreading attempts over replicas gains nothing). Rows older than
-- the pacing window are deleted as new failures arrive.
CREATE TABLE login_failures (
  key text NOT NULL CHECK (key ~ '^(account|ip):'),
  at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_key_at_idx ON login_failures (key, at);
CREATE INDEX login_failures_at_idx ON login_failures (at);
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, DELETE ON login_failures TO lemniscate_app;
  END IF;
END;
$$;
