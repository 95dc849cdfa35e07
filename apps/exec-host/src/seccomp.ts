import Ajv from 'ajv';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';

type SeccompCheck = { valid: true; profile: string } | { valid: false; message: string };

/** The last checks, by the content of schema and profile: reading is cheap, compiling the schema is not. */
const checked = new Map<string, SeccompCheck>();
const CHECKED_KEPT = 8;

/**
 * Reads the seccomp profile and validates it against its JSON schema. Called at start-up and again
 * before every container is created, so a profile edited or removed while running is never used (the
 * files are read every time; the validation of the same contents is remembered).
 */
export function loadSeccompProfile(profilePath: string, schemaPath: string): SeccompCheck {
  let schema: unknown;
  try {
    schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
  } catch (e) {
    return { valid: false, message: `The seccomp schema ${schemaPath} could not be read as JSON (${(e as Error).message}).` };
  }
  let raw: string;
  try {
    raw = fs.readFileSync(profilePath, 'utf8');
  } catch {
    return { valid: false, message: `The seccomp profile ${profilePath} is missing or unreadable.` };
  }
  const key = createHash('sha256').update(schemaPath).update('\0').update(JSON.stringify(schema)).update('\0').update(profilePath).update('\0').update(raw).digest('hex');
  const known = checked.get(key);
  if (known) return known;
  const result = checkProfile(profilePath, schemaPath, schema, raw);
  if (checked.size >= CHECKED_KEPT) checked.delete(checked.keys().next().value as string);
  checked.set(key, result);
  return result;
}

function checkProfile(profilePath: string, schemaPath: string, schema: unknown, raw: string): SeccompCheck {
  let profile: unknown;
  try {
    profile = JSON.parse(raw);
  } catch (e) {
    return { valid: false, message: `The seccomp profile ${profilePath} is not valid JSON (${(e as Error).message}).` };
  }
  const ajv = new Ajv({ allErrors: true, strict: false });
  let validate;
  try {
    validate = ajv.compile(schema as object);
  } catch (e) {
    return { valid: false, message: `The seccomp schema ${schemaPath} is not a usable JSON schema (${(e as Error).message}).` };
  }
  if (!validate(profile)) {
    const first = validate.errors?.[0];
    const where = first ? `${first.instancePath || '/'} ${first.message ?? ''}`.trim() : 'unknown error';
    return { valid: false, message: `The seccomp profile ${profilePath} does not match its schema: ${where}.` };
  }
  // Docker takes the profile inline; compact JSON keeps the create request small.
  return { valid: true, profile: JSON.stringify(profile) };
}
