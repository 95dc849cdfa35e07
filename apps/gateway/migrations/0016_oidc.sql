-- Single sign-on with an OpenID Provider (T-series, docs/operator-guide.md "Single sign-on").
-- A person signed in through the provider is named by (issuer, subject), never by email alone.
ALTER TABLE users ADD COLUMN oidc_issuer text;
ALTER TABLE users ADD COLUMN oidc_subject text;
CREATE UNIQUE INDEX users_oidc_identity_key ON users (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

-- One row per sign-in started: the state (hashed), the PKCE verifier and the nonce, used once.
CREATE TABLE oidc_logins (
  state_hash text PRIMARY KEY,
  code_verifier text NOT NULL,
  nonce text NOT NULL,
  return_to text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);

-- A console session opened through the provider keeps its refresh token (sealed) to ask the provider,
-- at each check, whether the person still may sign in and with which groups.
ALTER TABLE web_sessions ADD COLUMN oidc_refresh_token text;
ALTER TABLE web_sessions ADD COLUMN oidc_checked_at timestamptz;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, UPDATE, DELETE ON oidc_logins TO lemniscate_app;
  END IF;
END;
$$;
