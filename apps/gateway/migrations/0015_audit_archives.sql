-- Audit retention (T2): the oldest entries are archived to signed JSON-lines files, then removed from
-- audit_log through audit_prune() alone, which removes only a prefix of the chain and records where it
-- ended (seq and hash) in audit_archives: verify() then starts from that anchor, and the archive file
-- proves what was removed (lemni audit verify --file). Outside this function the log stays append-only.
CREATE TABLE audit_archives (
  through_seq bigint PRIMARY KEY,
  through_hash text NOT NULL,
  first_seq bigint NOT NULL,
  file text NOT NULL,
  sha256 text NOT NULL,
  archived_at timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER audit_archives_no_update_delete
  BEFORE UPDATE OR DELETE ON audit_archives
  FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_archives_no_truncate
  BEFORE TRUNCATE ON audit_archives
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();

-- The append-only trigger lets a row go only inside audit_prune(), and only up to its bound.
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_log'
     AND current_setting('lemniscate.audit_prune_through', true) IS NOT NULL
     AND current_setting('lemniscate.audit_prune_through', true) <> ''
     AND OLD.seq <= current_setting('lemniscate.audit_prune_through', true)::bigint THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'the audit log is append-only: % is refused on %', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'Entries can only be added, and the oldest archived through audit_prune(); verify() detects any change made by other means.';
END;
$$;

-- Removes entries up to `through` (archived beforehand by the caller into `p_file`, whose SHA-256 is
-- `p_sha256`), from the first one still in the log: never a gap, never past the head. Answers how
-- many it removed. One at a time (an advisory lock), so two gateways cannot both archive a range.
CREATE FUNCTION audit_prune(through bigint, p_file text, p_sha256 text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  archived bigint;
  head bigint;
  first bigint;
  last_hash text;
  removed bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(7341205120);
  SELECT COALESCE(max(through_seq), 0) INTO archived FROM audit_archives;
  SELECT seq INTO head FROM audit_chain_head WHERE chain = 'main';
  IF through <= archived THEN
    RAISE EXCEPTION 'entries up to % are already archived', archived USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF through > head THEN
    RAISE EXCEPTION 'entry % is beyond the chain head (%)', through, head USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT min(seq) INTO first FROM audit_log;
  IF first IS DISTINCT FROM archived + 1 THEN
    RAISE EXCEPTION 'the log does not start where the last archive ended (entry %, found %)', archived + 1, first USING ERRCODE = 'data_corrupted';
  END IF;
  SELECT hash INTO last_hash FROM audit_log WHERE seq = through;
  IF last_hash IS NULL THEN
    RAISE EXCEPTION 'entry % is not in the log', through USING ERRCODE = 'data_corrupted';
  END IF;
  PERFORM set_config('lemniscate.audit_prune_through', through::text, true);
  DELETE FROM audit_log WHERE seq <= through;
  GET DIAGNOSTICS removed = ROW_COUNT;
  PERFORM set_config('lemniscate.audit_prune_through', '', true);
  INSERT INTO audit_archives (through_seq, through_hash, first_seq, file, sha256) VALUES (through, last_hash, first, p_file, p_sha256);
  RETURN removed;
END;
$$;

REVOKE ALL ON FUNCTION audit_prune(bigint, text, text) FROM PUBLIC;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT ON audit_archives TO lemniscate_app;
    GRANT EXECUTE ON FUNCTION audit_prune(bigint, text, text) TO lemniscate_app;
  END IF;
END;
$$;
