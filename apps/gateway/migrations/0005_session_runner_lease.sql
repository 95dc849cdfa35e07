-- Which gateway process runs a session's loop, and when it last said so. A loop that stops saying so
-- (its gateway was killed or lost its database) leaves an orphan: any gateway ends it as a crash,
-- closes its approvals and destroys its sandbox. Sessions recorded without a loop carry no runner.
ALTER TABLE sessions ADD COLUMN runner text;
ALTER TABLE sessions ADD COLUMN runner_seen_at timestamptz;
ALTER TABLE sessions ADD CONSTRAINT sessions_runner_seen CHECK ((runner IS NULL) = (runner_seen_at IS NULL));
CREATE INDEX sessions_running_runner_idx ON sessions (runner_seen_at) WHERE status = 'running' AND runner IS NOT NULL;
