// The API declared once: api.ts's method table, the service that serves it and the transports
// that carry it agree — at compile time (the type tests below are checked by `tsc`) and at run
// time (every method of the table reaches the core method of its name; nothing else dispatches;
// errors arrive as { code, message } over a real host-mode WebSocket).
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  API_METHOD_NAMES, API_METHODS, type ApiCallHandlers, type ApiMethod, type ApiMethodList, type ServerMessage, type UnhaltApi,
} from '../../electron/service/api.ts';
import { handleCall } from '../../electron/service/dispatch.ts';
import { ApiError } from '../../electron/service/errors.ts';
import { startHostServer, type HostServer } from '../../electron/service/host-server.ts';
import type { ServiceCore } from '../../electron/service/service-core.ts';
import { UnhaltService } from '../../electron/service/service.ts';

describe('the method table, at compile time', () => {
  it('names exactly the methods of UnhaltApi, and the service serves exactly those', () => {
    expectTypeOf<ApiMethod>().toEqualTypeOf<keyof UnhaltApi>();
    expectTypeOf<ServiceCore>().toExtend<ApiCallHandlers>();
    expectTypeOf<UnhaltService>().toExtend<UnhaltApi>();
    // A core without one of the table's calls does not serve the table.
    // @ts-expect-error createVm is missing
    const partial: ApiCallHandlers = {} as Omit<ServiceCore, 'createVm'>;
    void partial;
    // A literal copy of the names (the preload's) must list every one.
    // @ts-expect-error every name but 'host' is missing
    const short: ApiMethodList<readonly ['host']> = ['host'] as const;
    void short;
    const full: ApiMethodList<typeof API_METHOD_NAMES> = API_METHOD_NAMES;
    expect(full).toHaveLength(Object.keys(API_METHODS).length);
  });
});

/** Records what reaches it: each call answers { method, params }; subscriptions keep the sink. */
function recordingCore(overrides: Partial<Record<ApiMethod, (...params: unknown[]) => unknown>> = {}) {
  const reached: { method: string; params: unknown[] }[] = [];
  const core: Record<string, unknown> = { sessions: new Set(), closed: false };
  for (const method of API_METHOD_NAMES) {
    core[method] = (...params: unknown[]) => {
      reached.push({ method, params });
      const override = overrides[method];
      if (override) return override(...params);
      return API_METHODS[method].kind === 'subscription'
        ? { vmId: params[0], backfill: { console: '', samples: [], markers: [], metrics: [] } }
        : { method, params };
    };
  }
  return { core: core as unknown as ServiceCore, reached };
}

describe('the method table and the service agree', () => {
  it('every call of the table reaches the core method of its name with its parameters', async () => {
    const { core, reached } = recordingCore();
    const service = new UnhaltService(core);
    for (const [i, method] of API_METHOD_NAMES.entries()) {
      const params = ['first', 'second'].slice(0, API_METHODS[method].params);
      const answer = await handleCall(service, { id: i, method, params });
      if (API_METHODS[method].kind === 'call') {
        expect(answer, method).toEqual({ id: i, result: { method, params } });
        expect(reached.at(-1), method).toEqual({ method, params });
      } else {
        // Subscriptions are served by the session, which hands the core its own event sink.
        expect(answer, method).not.toHaveProperty('error');
        expect(reached.at(-1)?.method, method).toBe(method);
        expect(reached.at(-1)?.params, method).toEqual([params[0], expect.any(Function)]);
      }
    }
    expect(new Set(reached.map((r) => r.method))).toEqual(new Set(API_METHOD_NAMES));
  });

  it('refuses a method the table does not list, or more parameters than it lists, as { code, message }', async () => {
    const { core, reached } = recordingCore();
    const service = new UnhaltService(core);
    // The session object has more members than the table; none of them is callable from outside.
    for (const name of ['nope', 'close', 'connect', 'shutdown', 'on', 'deliver', 'core', 'toString', 'hasOwnProperty']) {
      expect(await handleCall(service, { id: 3, method: name, params: [] })).toEqual({ id: 3, error: { code: 'invalid', message: `unknown method "${name}"` } });
    }
    for (const method of API_METHOD_NAMES) {
      const most = API_METHODS[method].params;
      const answer = await handleCall(service, { id: 4, method, params: Array.from({ length: most + 1 }, () => 'x') });
      expect(answer, method).toEqual({ id: 4, error: { code: 'invalid', message: `too many params for ${method} (${most + 1}; it takes at most ${most})` } });
    }
    expect(reached).toEqual([]);
  });
});

describe('errors over a host-mode WebSocket', () => {
  let server: HostServer;
  let ws: WebSocket;

  beforeAll(async () => {
    const { core } = recordingCore({
      getVm: () => { throw new ApiError('not-found', 'there is no VM with the id "x"'); },
      // A plain error from below the service, over two lines: one line, code 'internal'.
      deleteVm: () => { throw new Error('the library file vanished\n    at somewhere (library-store.ts:1:1)'); },
      startVm: () => Promise.reject(new RangeError('a busy host')),
    });
    server = await startHostServer({ service: new UnhaltService(core) });
    ws = new WebSocket(`ws://127.0.0.1:${server.port}/api?token=${server.token}`, { origin: server.origin });
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  });
  afterAll(async () => {
    ws.close();
    await server.close();
  });

  function call(id: number, method: string, params: unknown[]): Promise<ServerMessage> {
    return new Promise((resolve) => {
      const on = (d: Buffer) => {
        const m = JSON.parse(d.toString()) as ServerMessage;
        if ('id' in m && m.id === id) { ws.off('message', on); resolve(m); }
      };
      ws.on('message', on);
      ws.send(JSON.stringify({ id, method, params }));
    });
  }

  it('an error thrown in the service arrives as exactly { code, message }', async () => {
    expect(await call(1, 'getVm', ['x'])).toEqual({ id: 1, error: { code: 'not-found', message: 'there is no VM with the id "x"' } });
    expect(await call(2, 'deleteVm', ['x'])).toEqual({ id: 2, error: { code: 'internal', message: 'the library file vanished at somewhere (library-store.ts:1:1)' } });
    expect(await call(3, 'startVm', ['x'])).toEqual({ id: 3, error: { code: 'internal', message: 'a busy host' } });
    expect(await call(4, 'rebootHost', [])).toEqual({ id: 4, error: { code: 'invalid', message: 'unknown method "rebootHost"' } });
    expect(await call(5, 'listVms', [])).toEqual({ id: 5, result: { method: 'listVms', params: [] } });
  });
});
