-- The gateway's tables. Kept in step with apps/gateway/src/db/schema.ts (schema.medium.ts checks).
-- Identifiers are text holding a random UUID: a malformed id from a URL is "not found", not a type error.

CREATE TABLE users (
  id            text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  email         text NOT NULL CHECK (email <> ''),
  display_name  text NOT NULL,
  role          text NOT NULL CHECK (role IN ('admin', 'developer', 'security_officer')),
  password_hash text,
  disabled_at   timestamptz,
  revoked_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

CREATE TABLE projects (
  id                text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  name              text NOT NULL CONSTRAINT projects_name_key UNIQUE CHECK (name <> ''),
  repository_source text NOT NULL,
  default_ref       text NOT NULL DEFAULT 'HEAD',
  created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE project_memberships (
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT project_memberships_pkey PRIMARY KEY (user_id, project_id)
);
CREATE INDEX project_memberships_project_idx ON project_memberships (project_id);

CREATE TABLE policy_versions (
  id          text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  project_id  text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  version     integer NOT NULL CHECK (version > 0),
  document    jsonb NOT NULL,
  source_text text NOT NULL,
  author_id   text REFERENCES users (id) ON DELETE SET NULL,
  comment     text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT policy_versions_project_version_key UNIQUE (project_id, version)
);

CREATE TABLE api_tokens (
  id           text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name         text NOT NULL,
  token_hash   text NOT NULL CONSTRAINT api_tokens_token_hash_key UNIQUE,
  prefix       text NOT NULL,
  expires_at   timestamptz,
  revoked_at   timestamptz,
  last_used_at timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

CREATE TABLE web_sessions (
  id         text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sessions_user_idx ON web_sessions (user_id);

CREATE TABLE sessions (
  id                   text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  project_id           text NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
  user_id              text NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
  parent_session_id    text REFERENCES sessions (id) ON DELETE SET NULL,
  depth                integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
  agent                text NOT NULL,
  instruction          text NOT NULL,
  policy_version_id    text REFERENCES policy_versions (id) ON DELETE RESTRICT,
  status               text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'stopped', 'failed')),
  stop_reason          text,
  headless             boolean NOT NULL DEFAULT false,
  actions_used         integer NOT NULL DEFAULT 0 CHECK (actions_used >= 0),
  extensions_used      integer NOT NULL DEFAULT 0 CHECK (extensions_used >= 0),
  started_at           timestamptz NOT NULL DEFAULT now(),
  ended_at             timestamptz,
  base_commit          text,
  branch               text,
  included_uncommitted boolean NOT NULL DEFAULT false,
  fingerprint_start    text,
  fingerprint_end      text,
  final_patch          text,
  summary              text,
  sandbox_id           text,
  exec_host            text
);
CREATE INDEX sessions_project_idx ON sessions (project_id, started_at);
CREATE INDEX sessions_user_idx ON sessions (user_id, started_at);
CREATE INDEX sessions_parent_idx ON sessions (parent_session_id);
CREATE INDEX sessions_status_idx ON sessions (status);

CREATE TABLE tool_calls (
  id         text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  seq        integer NOT NULL,
  name       text NOT NULL,
  arguments  jsonb NOT NULL,
  decision   jsonb,
  result     jsonb,
  agent      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT tool_calls_session_seq_key UNIQUE (session_id, seq)
);

CREATE TABLE approvals (
  id           text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  tool_call_id text REFERENCES tool_calls (id) ON DELETE SET NULL,
  kind         text NOT NULL CHECK (kind IN ('command', 'write', 'changes', 'third_party', 'extension')),
  payload      jsonb NOT NULL,
  flags        jsonb NOT NULL DEFAULT '{}'::jsonb,
  agent        text NOT NULL,
  state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'refused_headless')),
  decided_by   text REFERENCES users (id) ON DELETE SET NULL,
  decided_at   timestamptz,
  reason       text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- An answered approval says when it was answered; a pending one has no answer yet.
  CONSTRAINT approvals_decision_consistent CHECK ((state = 'pending') = (decided_at IS NULL))
);
CREATE INDEX approvals_session_state_idx ON approvals (session_id, state);
CREATE INDEX approvals_state_idx ON approvals (state, created_at);

CREATE TABLE approved_commands (
  session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  command     text NOT NULL,
  approved_by text REFERENCES users (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT approved_commands_pkey PRIMARY KEY (session_id, command)
);

CREATE TABLE audit_log (
  seq        bigint PRIMARY KEY CHECK (seq > 0),
  at         timestamptz NOT NULL,
  actor      text NOT NULL,
  kind       text NOT NULL,
  project_id text,
  session_id text,
  payload    text NOT NULL,
  prev_hash  text NOT NULL CHECK (prev_hash ~ '^[0-9a-f]{64}$'),
  hash       text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$')
);
CREATE INDEX audit_log_project_idx ON audit_log (project_id, seq);
CREATE INDEX audit_log_session_idx ON audit_log (session_id, seq);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, seq);
CREATE INDEX audit_log_kind_idx ON audit_log (kind, seq);
CREATE INDEX audit_log_at_idx ON audit_log (at);

CREATE TABLE audit_chain_head (
  chain text PRIMARY KEY,
  seq   bigint NOT NULL CHECK (seq >= 0),
  hash  text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$')
);
INSERT INTO audit_chain_head (chain, seq, hash) VALUES ('main', 0, repeat('0', 64));

CREATE TABLE events (
  seq        bigserial PRIMARY KEY,
  session_id text,
  project_id text,
  type       text NOT NULL,
  payload    jsonb NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_session_idx ON events (session_id, seq);
CREATE INDEX events_project_idx ON events (project_id, seq);
