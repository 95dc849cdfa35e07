-- Single sign-on for the CLI (docs/operator-guide.md "Single sign-on"): `lemni login --sso` starts a
-- sign-in whose answer goes to the CLI's loopback address as a one-time code, redeemed only with the
-- verifier whose SHA-256 the CLI gave at the start (RFC 8252, RFC 7636 between the CLI and the gateway).
ALTER TABLE oidc_logins ADD COLUMN cli_port integer;
ALTER TABLE oidc_logins ADD COLUMN cli_challenge text;
ALTER TABLE oidc_logins ADD COLUMN cli_code_hash text;
ALTER TABLE oidc_logins ADD COLUMN cli_user_id text REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE oidc_logins ADD COLUMN cli_refresh_token text;
ALTER TABLE oidc_logins ADD COLUMN cli_code_expires_at timestamptz;
ALTER TABLE oidc_logins ADD COLUMN cli_code_used_at timestamptz;
CREATE UNIQUE INDEX oidc_logins_cli_code_key ON oidc_logins (cli_code_hash) WHERE cli_code_hash IS NOT NULL;

-- An API token made from a console session opened through the provider keeps that session's refresh
-- token (sealed), so the provider is asked again at its use too: a person removed there loses the token.
ALTER TABLE api_tokens ADD COLUMN oidc_refresh_token text;
ALTER TABLE api_tokens ADD COLUMN oidc_checked_at timestamptz;
