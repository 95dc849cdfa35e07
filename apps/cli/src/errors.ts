/** Exit codes of the CLI contract (DESIGN.md): scripts branch on these. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;

/**
 * Machine-readable classes for failures that happen before or around a session (X2), so a script
 * reading `--output-format json` can branch on a value rather than on the sentence.
 */
export type CliErrorClass =
  | 'usage'
  | 'ambiguous_id'
  | 'config'
  | 'gateway_unreachable'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'unknown_project'
  | 'conflict'
  | 'gateway_error'
  | 'gateway_contract'
  | 'git'
  | 'too_large'
  | 'apply_conflict'
  | 'environment_failed';

/** A failure the person can act on: `message` is one sentence saying what happened and what to do. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly errorClass: CliErrorClass,
    readonly exitCode: number = EXIT_FAILURE,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export function isCliError(error: unknown): error is CliError {
  return error instanceof CliError;
}
