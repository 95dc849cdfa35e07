import type { ExecHostErrorCode } from '@lemniscate/contracts';

/**
 * The one exception type of the exec-host's domain code: a machine-readable code and a sentence a
 * person understands. The HTTP filter maps codes to statuses in one place (http/error.filter.ts).
 */
export class ExecHostError extends Error {
  constructor(
    readonly code: ExecHostErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'ExecHostError';
  }
}

/** Configuration or start-up checks that make the exec-host refuse to start. */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}
