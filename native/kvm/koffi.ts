// koffi, loaded the short way. Its package entry spends 10-25 ms of every start finding its
// prebuilt addon (an ESM shim, a CommonJS shim in the platform package that reads this Node's ELF
// headers to tell glibc from musl, several path probes), which is a tenth of `unhalt run`'s whole
// start. The addon for this platform sits at a fixed path in that package, and it is the very
// object the entry exports (the entry only adds deprecated aliases), so it is required directly
// (the same file, so the same module in require's cache if the entry is loaded later). Anything
// unexpected — another platform, musl, a bundled app — falls back to the package entry.
import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';

type KoffiApi = typeof Koffi.default;

const require = createRequire(import.meta.url);

function load(): KoffiApi {
  if (process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64')) {
    try {
      const native = require(`@koromix/koffi-linux-${process.arch}/linux_${process.arch}/koffi.node`) as KoffiApi;
      if (typeof native.load === 'function' && typeof native.version === 'string') return native;
    } catch { /* not installed that way, or not glibc: the entry knows */ }
  }
  return require('koffi') as KoffiApi;
}

const koffi: KoffiApi = load();
export default koffi;
