// The transport-neutral half of every transport: one ClientMessage in, one ServerMessage out.
// The WebSocket server and the Electron IPC handler both call this, so both accept exactly the
// methods of api.ts's table, with at most the parameters it lists, and frame results and errors
// the same way: an error is always { code, message }.
import { API_METHOD_NAMES, API_METHODS, type ApiMethod, type ServerMessage, type UnhaltApi } from './api.ts';
import { ApiError, toApiError } from './errors.ts';

const METHODS: ReadonlySet<string> = new Set(API_METHOD_NAMES);

export interface ParsedCall {
  id: number;
  method: ApiMethod;
  params: unknown[];
}

/** Checks a decoded ClientMessage; throws ApiError('invalid') naming what is wrong. */
export function parseCall(raw: unknown): ParsedCall {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid', 'a request must be an object { id, method, params }');
  const m = raw as Record<string, unknown>;
  if (typeof m.id !== 'number' || !Number.isSafeInteger(m.id) || m.id < 0) throw new ApiError('invalid', 'a request needs a non-negative whole-number id');
  // Own-property set lookup: "constructor", "__proto__" and friends are not methods here.
  if (typeof m.method !== 'string' || !METHODS.has(m.method)) {
    throw new ApiError('invalid', `unknown method ${typeof m.method === 'string' ? `"${m.method.slice(0, 40)}"` : '(none)'}`);
  }
  const params = m.params === undefined ? [] : m.params;
  if (!Array.isArray(params)) throw new ApiError('invalid', 'params must be a list');
  const method = m.method as ApiMethod;
  const most = API_METHODS[method].params;
  if (params.length > most) throw new ApiError('invalid', `too many params for ${method} (${params.length}; it takes at most ${most})`);
  return { id: m.id, method, params };
}

/** The id to answer with when a request could not even be parsed. */
export function requestId(raw: unknown): number {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? id : -1;
}

/** Runs one call against a session and frames the answer; never throws. */
export async function handleCall(api: UnhaltApi, raw: unknown): Promise<ServerMessage> {
  let call: ParsedCall;
  try {
    call = parseCall(raw);
  } catch (e) {
    return { id: requestId(raw), error: toApiError(e).toDto() };
  }
  try {
    const fn = api[call.method] as (...a: unknown[]) => Promise<unknown>;
    const result = await fn.apply(api, call.params);
    return { id: call.id, result: result === undefined ? null : result };
  } catch (e) {
    return { id: call.id, error: toApiError(e).toDto() };
  }
}
