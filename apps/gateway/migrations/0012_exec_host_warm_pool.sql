-- An exec-host's warm pool as its last heartbeat reported it: sandboxes made ahead of their sessions,
-- ready and wanted ({"ready": n, "target": m}); null when the host reports no pool (turned off, or
-- an exec-host from before the pool).
ALTER TABLE exec_hosts ADD COLUMN warm jsonb;
