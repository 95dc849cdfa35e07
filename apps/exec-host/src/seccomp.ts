import Ajv from 'ajv';
import * as fs from 'node:fs';

type SeccompCheck = { valid: true; profile: string } | { valid: false; message: string };

/**
 * Reads the seccomp profile and validates it against its JSON schema. Called at start-up and again
 * before every container is created, so a profile edited or removed while running is never used.
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
