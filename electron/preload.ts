// The only bridge between the sandboxed renderer and the main process: `window.unhalt` with
// call(method, ...params) for the methods of api.ts and onEvent(listener) for its events —
// nothing else, no ipcRenderer, no Node. A sandboxed preload cannot load local modules, so the
// method list and channel names are repeated here; the type check below keeps the list equal to
// api.ts's API_METHODS, and test/unit/electron-hardening.test.ts the channel names.
//
// Calls resolve with the result or reject with a plain { code, message } (ApiErrorDto): Error
// objects lose their properties crossing the context bridge, plain data does not.
import { contextBridge, ipcRenderer } from 'electron';
import type { ApiErrorDto, ApiEvent, ApiMethod, ServerMessage } from './service/api.ts';

const IPC_CALL = 'unhalt:call';
const IPC_EVENT = 'unhalt:event';

const METHODS = [
  'host', 'listVms', 'getVm', 'createVm', 'updateVm', 'cloneVm', 'deleteVm', 'describeConfig',
  'startVm', 'stopVm', 'forceStopVm', 'pauseVm', 'resumeVm', 'status', 'setHaltPollNs', 'setPin',
  'sendConsole', 'subscribe', 'unsubscribe', 'startExperiment', 'listExperiments', 'getExperiment',
  'dismissLibraryNotices', 'listAllowedFolders', 'addAllowedFolder', 'removeAllowedFolder',
] as const satisfies readonly ApiMethod[];
// Compile-time: every API method is listed (the `satisfies` above: nothing that is not one).
const allListed: [Exclude<ApiMethod, (typeof METHODS)[number]>] extends [never] ? true : false = true;
void allListed;

const known: ReadonlySet<string> = new Set(METHODS);
let nextId = 1;

contextBridge.exposeInMainWorld('unhalt', {
  transport: 'electron',
  methods: [...METHODS],
  call(method: string, ...params: unknown[]): Promise<unknown> {
    if (typeof method !== 'string' || !known.has(method)) {
      return Promise.reject({ code: 'invalid', message: `unknown method "${String(method).slice(0, 40)}"` } satisfies ApiErrorDto);
    }
    return ipcRenderer.invoke(IPC_CALL, { id: nextId++, method, params }).then((m: ServerMessage) => {
      if ('error' in m) throw { code: m.error.code, message: m.error.message } satisfies ApiErrorDto;
      return 'result' in m ? m.result : undefined;
    });
  },
  onEvent(listener: (event: ApiEvent) => void): () => void {
    // The IPC event object (with its sender) never reaches the page.
    const handler = (_e: unknown, event: ApiEvent) => listener(event);
    ipcRenderer.on(IPC_EVENT, handler);
    return () => { ipcRenderer.removeListener(IPC_EVENT, handler); };
  },
});
