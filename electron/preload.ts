// The only bridge between the sandboxed renderer and the main process: `window.unhalt` with
// call(method, ...params) for the methods of api.ts and onEvent(listener) for its events —
// nothing else, no ipcRenderer, no Node. A sandboxed preload cannot load local modules, so the
// method names and channel names are repeated here: ApiMethodList makes the names a compile-time
// copy of api.ts's method table, and test/unit/electron-hardening.test.ts checks both.
//
// Calls resolve with the result or reject with a plain { code, message } (ApiErrorDto), always:
// Error objects lose their properties crossing the context bridge and arrive as strings, plain
// data does not, so nothing on the page ever has to parse a message.
import { contextBridge, ipcRenderer } from 'electron';
import type { ApiErrorDto, ApiEvent, ApiMethodList, ServerMessage } from './service/api.ts';

const IPC_CALL = 'unhalt:call';
const IPC_EVENT = 'unhalt:event';

const METHODS = [
  'host', 'listVms', 'getVm', 'createVm', 'updateVm', 'renameVm', 'keepLiveKnobs', 'cloneVm', 'deleteVm', 'listFolder', 'importImage', 'describeConfig', 'checkBootFiles', 'exportConfig',
  'startVm', 'stopVm', 'forceStopVm', 'resetVm', 'pauseVm', 'resumeVm', 'status', 'setHaltPollNs', 'setPin',
  'sendConsole', 'subscribe', 'unsubscribe', 'startExperiment', 'requestHostCommand', 'confirmHostCommand', 'listSavedWorkloads', 'saveWorkload', 'listExperiments', 'getExperiment',
  'cancelExperiment', 'deleteExperiment', 'startTune', 'applyTune',
  'dismissLibraryNotices', 'listAllowedFolders', 'addAllowedFolder', 'removeAllowedFolder', 'createDiskImage', 'convertDiskImage',
] as const;
// Compile-time: the list names every method of the table and nothing else.
const listed: ApiMethodList<typeof METHODS> = METHODS;

const known: ReadonlySet<string> = new Set(listed);
let nextId = 1;

contextBridge.exposeInMainWorld('unhalt', {
  transport: 'electron',
  methods: [...METHODS],
  call(method: string, ...params: unknown[]): Promise<unknown> {
    if (typeof method !== 'string' || !known.has(method)) {
      return Promise.reject({ code: 'invalid', message: `unknown method "${String(method).slice(0, 40)}"` } satisfies ApiErrorDto);
    }
    return ipcRenderer.invoke(IPC_CALL, { id: nextId++, method, params }).then(
      (m: ServerMessage) => {
        if ('error' in m) throw { code: m.error.code, message: m.error.message } satisfies ApiErrorDto;
        return 'result' in m ? m.result : undefined;
      },
      // main.ts answers every call with a ServerMessage; a rejection means the call never got
      // there (the window is closing, the handler is gone). Still { code, message }.
      (e: unknown) => {
        throw { code: 'internal', message: `${method} did not reach the Unhalt service: ${e instanceof Error ? e.message : String(e)}` } satisfies ApiErrorDto;
      },
    );
  },
  onEvent(listener: (event: ApiEvent) => void): () => void {
    // The IPC event object (with its sender) never reaches the page.
    const handler = (_e: unknown, event: ApiEvent) => listener(event);
    ipcRenderer.on(IPC_EVENT, handler);
    return () => { ipcRenderer.removeListener(IPC_EVENT, handler); };
  },
});
