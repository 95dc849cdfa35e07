-- T2: the audit log is append-only for everyone, even where grants are loose (a trigger), and the
-- application's role may only read and insert it (grants). Tampering then takes a superuser who
-- disables the trigger on purpose, and verify() still names the entry touched.

CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the audit log is append-only: % is refused on audit_log', TG_OP
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'Entries can only be added; verify() detects any change made by other means.';
END;
$$;

CREATE TRIGGER audit_log_no_update_delete
  BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();

CREATE TRIGGER audit_log_no_truncate
  BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();

REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;

-- The role the gateway switches to after migrating (database.ts). Roles are cluster-wide, so it may
-- exist already; a login without CREATEROLE keeps working, with the trigger as the only guard.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    BEGIN
      CREATE ROLE lemniscate_app NOLOGIN;
    EXCEPTION
      WHEN duplicate_object OR unique_violation THEN NULL;
      WHEN insufficient_privilege THEN
        RAISE NOTICE 'role lemniscate_app not created (no CREATEROLE privilege); the audit trigger still applies';
    END;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO lemniscate_app', current_schema());
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO lemniscate_app', current_schema());
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO lemniscate_app', current_schema());
    REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM lemniscate_app;
    REVOKE INSERT, DELETE, TRUNCATE ON audit_chain_head FROM lemniscate_app;
    REVOKE ALL ON schema_migrations FROM lemniscate_app;
  END IF;
END;
$$;
