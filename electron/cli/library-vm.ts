// A VM of UNHALT_HOME's library by name, for the commands that take one (`unhalt export VM`,
// `unhalt tune VM`). The library is only read, never changed or locked (a rename is atomic, so a
// read sees the old file or the new one): the app may own it meanwhile.
import { HomeFileError, readHomeFile } from '../service/home-file.ts';
import { describeIoError } from '../service/io-errors.ts';
import { MAX_LIBRARY_BYTES, parseLibrary } from '../service/library-schema.ts';
import { homeLayout, unhaltHome } from '../service/paths.ts';
import { sameVmName, type VmConfig } from '../vmm/config/vm-config.ts';
import { UsageError } from './args.ts';

/** The VM of that name in UNHALT_HOME's library. */
export function libraryVm(name: string): VmConfig {
  return libraryRecord(name).config;
}

/** The library record (id and config) of that name. */
export function libraryRecord(name: string): { id: string; config: VmConfig } {
  const file = homeLayout(unhaltHome()).library;
  // Only a regular file of sane size is read (a directory, a FIFO or /dev/zero in its place would
  // throw, hang or fill memory): anything else is named in one line.
  let text: string | undefined;
  try {
    text = readHomeFile(file, 'the VM library', MAX_LIBRARY_BYTES);
  } catch (e) {
    throw new UsageError(e instanceof HomeFileError ? e.message : `the VM library ${file} cannot be read: ${describeIoError(e)}`);
  }
  if (text === undefined) throw new UsageError(`there is no VM library at ${file} (UNHALT_HOME), so no VM "${name.slice(0, 64)}"; use --config for a configuration`);
  const { vms } = parseLibrary(text).file;
  const vm = vms.find((v) => sameVmName(v.config.name, name));
  if (!vm) {
    const names = vms.map((v) => v.config.name);
    throw new UsageError(`no VM named "${name.slice(0, 64)}" in ${file}${names.length ? `; VMs: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', ...' : ''}` : ' (it is empty)'}`);
  }
  return vm;
}
