-- "Approved once" memory (P3): a remembered command is identified by its text AND the directory it
-- ran in, and names the approval that allowed it, so every repeat it lets through is audited as
-- allowed by that approval.
ALTER TABLE approved_commands ADD COLUMN working_directory text NOT NULL DEFAULT '/workspace';
ALTER TABLE approved_commands ADD COLUMN approval_id text REFERENCES approvals (id) ON DELETE SET NULL;
ALTER TABLE approved_commands DROP CONSTRAINT approved_commands_pkey;
ALTER TABLE approved_commands ADD CONSTRAINT approved_commands_pkey PRIMARY KEY (session_id, working_directory, command);
