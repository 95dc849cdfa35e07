// The policy validator for every reader: `lemni policy check`, the gateway's publish and the
// console's editor all call `parsePolicy` through here, so a document one accepts the others accept,
// and a refusal reads the same everywhere. This entry imports only the schema (zod and yaml): no
// Node module and no shell parser, so it bundles in the browser.
import { parsePolicy, PolicyValidationError, type PolicyIssue } from './schema';

export { parsePolicy, PolicyValidationError, policyJsonSchema, type Policy, type PolicyIssue } from './schema';

/** Every problem of a policy document (YAML or JSON text, or a parsed value); empty when it is valid. */
export function checkPolicy(input: unknown): PolicyIssue[] {
  try {
    parsePolicy(input);
    return [];
  } catch (error) {
    if (error instanceof PolicyValidationError) return error.issues;
    throw error;
  }
}

/** One problem as one line, the way `lemni policy check` prints it and the gateway's sentence lists it. */
export function issueLine(issue: PolicyIssue): string {
  return issue.path ? `${issue.path}: ${issue.message}` : issue.message;
}
