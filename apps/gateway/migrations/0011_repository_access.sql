-- How the platform fetches a project's repository when it is a git URL (docs/decisions/0012-repositories-by-url.md).
-- The credential (a password or token, or an SSH private key) is sealed with AES-256-GCM under the
-- gateways' secret key, bound to the project and the kind (`sealed` is "v1.<key id>.<iv>.<tag>.<data>",
-- base64url); what may be shown (the user name, the key's fingerprint, known hosts, a CA) is kept
-- beside it in clear. One row per project; removed with the project.
CREATE TABLE repository_access (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  credential_kind text CHECK (credential_kind IN ('https', 'ssh')),
  credential_sealed text,
  username text,
  key_fingerprint text,
  known_hosts text,
  ca_pem text,
  updated_by text REFERENCES users (id) ON DELETE SET NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((credential_kind IS NULL) = (credential_sealed IS NULL))
);
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, UPDATE, DELETE ON repository_access TO lemniscate_app;
  END IF;
END;
$$;
