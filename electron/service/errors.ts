// The one error type that crosses the API: a code saying what kind of problem it is and one line
// a user can read. Everything thrown below the service is mapped here, so a transport never
// leaks a stack trace or an internal object.
import type { ApiErrorCode, ApiErrorDto } from './api.ts';
import { HomeFileError } from './home-file.ts';
import { LockFileError } from './file-lock.ts';
import { HostCommandsFileError } from './host-commands.ts';
import { ConfigError } from '../vmm/config/vm-config.ts';
import { RunnabilityError } from '../vmm/config/resolve.ts';
import { isDiskFull } from './io-errors.ts';

export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: ApiErrorCode;

  constructor(code: ApiErrorCode, message: string) {
    super(oneLine(message));
    this.code = code;
  }

  toDto(): ApiErrorDto {
    return { code: this.code, message: this.message };
  }
}

/** Maps anything thrown below the service to an ApiError (`fallback` for plain errors). */
export function toApiError(e: unknown, fallback: ApiErrorCode = 'internal'): ApiError {
  if (e instanceof ApiError) return e;
  // RunnabilityError is a ConfigError: the host, not the input, is what cannot do it.
  if (e instanceof RunnabilityError) return new ApiError('host', e.message);
  if (e instanceof ConfigError) return new ApiError('invalid', e.message);
  // A file of UNHALT_HOME that is no file (a FIFO, a directory): the user moves it away.
  if (e instanceof HomeFileError || e instanceof LockFileError || e instanceof HostCommandsFileError) return new ApiError('conflict', e.message);
  // A full disk is the host's condition, and the user can fix it: say so, not "internal".
  if (isDiskFull(e)) return new ApiError('host', `disk full: ${(e as Error).message}`);
  if (e instanceof Error) return new ApiError(fallback, e.message);
  return new ApiError(fallback, String(e));
}

const MAX_MESSAGE = 500;

/** Error messages are single lines of bounded length, whatever produced them. */
function oneLine(s: string): string {
  const line = s.replace(/\s*\n\s*/g, ' ').trim();
  return line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE - 1)}…` : line;
}
