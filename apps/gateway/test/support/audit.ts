import type { TestDatabase } from './db';
import { chainHash, GENESIS_HASH } from '../../src/audit/audit-chain';

/** Tampering the way an attacker with the database superuser would: switch the trigger off first. */
export async function tamper(database: TestDatabase, statements: string[]): Promise<void> {
  await database.superuser('ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete');
  try {
    for (const statement of statements) await database.superuser(statement);
  } finally {
    await database.superuser('ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete');
  }
}

/**
 * Rewrites entry `seq`'s actor and re-hashes every entry and the head after it, as someone holding
 * the database would to hide a change: the chain holds again, and only an anchor kept elsewhere shows it.
 */
export async function rewriteEndToEnd(database: TestDatabase, seq: number, actor: string): Promise<void> {
  const rows = await database.superuser<{ seq: string; at: Date; actor: string; kind: string; project_id: string | null; session_id: string | null; payload: string }>(
    'SELECT * FROM audit_log ORDER BY seq',
  );
  let prev = GENESIS_HASH;
  const statements: string[] = [];
  for (const row of rows) {
    const entry = {
      seq: Number(row.seq),
      at: new Date(row.at),
      actor: Number(row.seq) === seq ? actor : row.actor,
      kind: row.kind,
      projectId: row.project_id,
      sessionId: row.session_id,
      payload: row.payload,
    };
    const hash = chainHash(prev, entry);
    statements.push(`UPDATE audit_log SET actor = '${entry.actor}', prev_hash = '${prev}', hash = '${hash}' WHERE seq = ${entry.seq}`);
    prev = hash;
  }
  await tamper(database, [...statements, `UPDATE audit_chain_head SET hash = '${prev}'`]);
}
