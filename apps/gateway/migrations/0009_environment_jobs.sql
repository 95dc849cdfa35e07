-- Project environments (S8): the preparations of a project's environment the gateway asked for or
-- saw, so that the end of each is audited exactly once (the row's state moves from 'preparing' once,
-- whichever gateway replica sees the end first), and its final state and the last 64 KiB of its log
-- outlive the exec-host's cache clean-up. A job of the same inputs may serve several projects: a row
-- per project and job.
CREATE TABLE environment_jobs (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  job_id text NOT NULL,
  key text NOT NULL,
  requested_by text REFERENCES users (id) ON DELETE SET NULL,
  state text NOT NULL DEFAULT 'preparing' CHECK (state IN ('preparing', 'ready', 'failed', 'lost')),
  message text,
  started_at timestamptz NOT NULL,
  finished_at timestamptz,
  log_tail text,
  log_tail_offset bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT environment_jobs_pkey PRIMARY KEY (project_id, job_id),
  CHECK ((state = 'preparing') = (finished_at IS NULL))
);
CREATE INDEX environment_jobs_state_idx ON environment_jobs (project_id, state);
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lemniscate_app') THEN
    GRANT SELECT, INSERT, UPDATE ON environment_jobs TO lemniscate_app;
  END IF;
END;
$$;
