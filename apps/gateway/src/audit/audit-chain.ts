// The hash chain (T2), pure: how an entry is written down, how it is hashed, and how a walk over
// the stored entries finds the first one that was altered, removed, reordered or slipped in.
import { createHash } from 'node:crypto';
import { AUDIT_GENESIS_HASH, auditEntryText, type AuditChainEntry } from '@lemniscate/contracts';

/** The `prev_hash` of entry 1. */
export const GENESIS_HASH = AUDIT_GENESIS_HASH;

export class CanonicalJsonError extends Error {
  override readonly name = 'CanonicalJsonError';
}

/**
 * JSON with object keys sorted (UTF-16 code-unit order) and no whitespace; numbers and strings as
 * JSON.stringify writes them. This is RFC 8785 (JCS) for the values JavaScript produces, so anyone
 * can recompute a hash from an export with a standard library. Values JSON cannot hold exactly
 * (NaN, Infinity, BigInt, functions, cycles) are refused rather than silently changed.
 */
export function canonicalJson(value: unknown): string {
  return write(value, [], new Set());
}

/** Where a value sits, as the refusal names it: `$`, then `.key` or `[index]` per level. */
function where(path: readonly (string | number)[]): string {
  return `$${path.map((step) => (typeof step === 'number' ? `[${step}]` : `.${step}`)).join('')}`;
}

// `path` is the way down to `value`, extended and shortened in place; it is only written out for a refusal.
function write(value: unknown, path: (string | number)[], ancestors: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`${where(path)} is ${value}, which JSON cannot represent.`);
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw new CanonicalJsonError(`${where(path)} is a ${typeof value}, which JSON cannot represent.`);
  }
  const object = value as object & { toJSON?: unknown };
  if (typeof object.toJSON === 'function') return write((object.toJSON as () => unknown)(), path, ancestors);
  if (ancestors.has(object)) throw new CanonicalJsonError(`${where(path)} refers back to itself; JSON cannot represent a cycle.`);
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      // As JSON.stringify does: holes and unrepresentable items become null inside arrays.
      let text = '[';
      for (let i = 0; i < object.length; i++) {
        const item: unknown = object[i];
        if (i > 0) text += ',';
        if (item === undefined || typeof item === 'function' || typeof item === 'symbol') text += 'null';
        else {
          path.push(i);
          text += write(item, path, ancestors);
          path.pop();
        }
      }
      return `${text}]`;
    }
    const record = object as Record<string, unknown>;
    let text = '{';
    for (const key of Object.keys(record).sort()) {
      const item = record[key];
      // As JSON.stringify does: a property holding undefined is simply absent.
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      path.push(key);
      text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${write(item, path, ancestors)}`;
      path.pop();
    }
    return `${text}}`;
  } finally {
    ancestors.delete(object);
  }
}

/** An entry as hashed and stored. `payload` is canonical JSON text, kept byte for byte. */
export type ChainEntry = AuditChainEntry;

export interface StoredEntry extends ChainEntry {
  prevHash: string;
  hash: string;
}

/** The canonical JSON of the entry (libs/contracts' auditEntryText, shared with the offline verifier). */
export const entryText = auditEntryText;

/** hash = hex(sha256(prev_hash || canonical JSON of the entry)), both as UTF-8. */
export function chainHash(prevHash: string, entry: ChainEntry): string {
  return createHash('sha256').update(prevHash, 'utf8').update(entryText(entry), 'utf8').digest('hex');
}

export interface ChainAnchor {
  seq: number;
  hash: string;
}

export type ChainProblem = 'removed' | 'reordered' | 'altered' | 'truncated' | 'inserted';

export interface ChainBreak {
  /** The first entry at which the chain stops holding. */
  seq: number;
  problem: ChainProblem;
  /** A sentence a security officer can act on. */
  message: string;
}

/**
 * Walks stored entries in seq order, one at a time, keeping only the previous hash: a chain of any
 * length is verified in constant memory. `check` returns the first break; after one, stop walking.
 */
export class ChainVerifier {
  private expectedSeq = 1;
  private previousHash = GENESIS_HASH;
  private count = 0;

  /**
   * `anchor`: a {seq, hash} pair kept outside the database (a past `verify()` result). Someone able
   * to rewrite the whole table can re-hash every entry and the head; only a hash they cannot reach
   * shows that the entry at that seq is no longer the one that was written.
   */
  /**
   * `start`: where the log begins when its oldest entries were archived (retention): the last
   * archived entry's seq and hash, which the first entry in the database must follow.
   */
  constructor(
    private readonly anchor?: ChainAnchor,
    start?: ChainAnchor,
  ) {
    if (anchor && (!Number.isSafeInteger(anchor.seq) || anchor.seq < 1 || !/^[0-9a-f]{64}$/.test(anchor.hash))) {
      throw new RangeError('An anchor is a positive seq and the 64-hex-digit hash of that entry.');
    }
    if (start) {
      this.expectedSeq = start.seq + 1;
      this.previousHash = start.hash;
    }
  }

  get checked(): number {
    return this.count;
  }

  get lastHash(): string {
    return this.previousHash;
  }

  get lastSeq(): number {
    return this.expectedSeq - 1;
  }

  check(entry: StoredEntry): ChainBreak | undefined {
    const seq = this.expectedSeq;
    if (entry.seq !== seq) {
      const span = entry.seq - 1 === seq ? `entry ${seq} is` : `entries ${seq} to ${entry.seq - 1} are`;
      const before = seq === 1 ? `the log starts at ${entry.seq}` : `the log goes from ${seq - 1} to ${entry.seq}`;
      return { seq, problem: 'removed', message: `Entry ${seq} was removed: ${before}, so ${span} missing.` };
    }
    if (entry.prevHash !== this.previousHash) {
      const predecessor = `entry ${seq - 1}`;
      return {
        seq,
        problem: 'reordered',
        message:
          seq === 1
            ? `Entry 1 does not start the chain: the hash it records for its predecessor is not the genesis hash, so entries were removed and renumbered, or reordered.`
            : `Entry ${seq} does not follow ${predecessor}: the hash it records for its predecessor is not entry ${seq - 1}'s, so entries were reordered, removed and renumbered, or entry ${seq - 1} was altered and re-hashed.`,
      };
    }
    if (chainHash(entry.prevHash, entry) !== entry.hash) {
      return { seq, problem: 'altered', message: `Entry ${seq} was altered: its content no longer matches the hash recorded when it was written.` };
    }
    if (this.anchor && entry.seq === this.anchor.seq && entry.hash !== this.anchor.hash) {
      return {
        seq,
        problem: 'altered',
        message: `Entry ${seq} is not the entry your anchor recorded: the log was rewritten at or before entry ${seq}, and every hash after it was recomputed.`,
      };
    }
    this.previousHash = entry.hash;
    this.expectedSeq += 1;
    this.count += 1;
    return undefined;
  }

  /** After the last entry: the walk must have reached the head the appends recorded. */
  finish(head: { seq: number; hash: string }): ChainBreak | undefined {
    const last = this.lastSeq;
    if (this.anchor && last < this.anchor.seq && head.seq < this.anchor.seq) {
      return {
        seq: last + 1,
        problem: 'truncated',
        message: `Entry ${last + 1} was removed: the log ends at ${last} but your anchor records entry ${this.anchor.seq}, so the end of the log was cut off and the head moved back.`,
      };
    }
    if (last < head.seq) {
      const span = last + 1 === head.seq ? `entry ${head.seq} is` : `entries ${last + 1} to ${head.seq} are`;
      return { seq: last + 1, problem: 'truncated', message: `Entry ${last + 1} was removed: the log ends at ${last} but ${head.seq} entries were written, so ${span} missing.` };
    }
    if (head.seq > 0 && head.hash !== this.previousHash) {
      return { seq: head.seq, problem: 'altered', message: `Entry ${head.seq} was altered: it is not the entry the chain head recorded when it was written (it was changed and re-hashed).` };
    }
    return undefined;
  }
}
