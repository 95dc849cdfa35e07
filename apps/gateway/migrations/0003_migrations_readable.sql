-- The gateway checks at start-up that the database carries every migration it knows; a login that
-- runs only as the application role must be able to read that list (and nothing more).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT ON schema_migrations TO lemniscate_app;
  END IF;
END;
$$;
