-- L4: how a session was started, one of three modes, so that a headless run that waited for
-- approvals is not read as a person's interactive session. `headless` stays the flag the approval
-- point reads (nobody can approve: refuse at once) and must agree with the mode.
ALTER TABLE sessions ADD COLUMN mode text;
UPDATE sessions SET mode = CASE WHEN headless THEN 'headless' ELSE 'interactive' END;
-- Sessions recorded before this column: a headless run with --wait-for-approvals was stored with
-- headless = false. Its `session.configured` audit entry says `"waitForApprovals":true` (canonical
-- JSON, no spaces; inside a string the quotes would be escaped, so only the key itself matches), and
-- only headless runs send that flag (the CLI refuses it without -p). Its subagents inherit the mode.
WITH RECURSIVE waited AS (
  SELECT s.id FROM sessions s
  WHERE NOT s.headless AND EXISTS (
    SELECT 1 FROM audit_log a WHERE a.session_id = s.id AND a.kind = 'session.configured' AND strpos(a.payload, '"waitForApprovals":true') > 0
  )
  UNION
  SELECT c.id FROM sessions c JOIN waited w ON c.parent_session_id = w.id
)
UPDATE sessions SET mode = 'headless_with_approvals' WHERE id IN (SELECT id FROM waited);
ALTER TABLE sessions ALTER COLUMN mode SET NOT NULL;
ALTER TABLE sessions ADD CONSTRAINT sessions_mode_check CHECK (mode IN ('interactive', 'headless', 'headless_with_approvals'));
ALTER TABLE sessions ADD CONSTRAINT sessions_mode_headless CHECK (headless = (mode = 'headless'));
