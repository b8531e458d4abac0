// Which loadable modules of a Debian kernel package a set of drivers needs, in load order. The
// package ships no modules.dep (depmod writes it at install time), so each module's own
// `depends=` field (.modinfo) is read. Used by the Linux kit (virtio drivers) and by the nested
// lane's L1 (KVM and virtio-blk): one rule for both.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Module names are spelled with '_' inside the kernel, with either '-' or '_' in file names. */
export const moduleName = (file) => file.replace(/\.ko$/, '').replace(/-/g, '_');

/** The depends= field of a module's .modinfo section (NUL-separated key=value strings). */
export function moduleDepends(file) {
  const b = readFileSync(file);
  const at = b.indexOf('\0depends=');
  if (at < 0) return [];
  const text = b.subarray(at + 9, b.indexOf(0, at + 9)).toString('latin1');
  return text ? text.split(',') : [];
}

/**
 * Every module the roots need, each after its dependencies: [{ name, file }]. `kernelDir` is
 * lib/modules/RELEASE/kernel of the unpacked package; `what` names it in errors. Throws on a
 * missing module (compressed .ko.xz modules are not handled) or a dependency loop.
 */
export function moduleLoadOrder(kernelDir, roots, what = 'the kernel package') {
  const files = new Map();
  for (const f of readdirSync(kernelDir, { recursive: true })) {
    if (f.endsWith('.ko')) files.set(moduleName(f.split('/').at(-1)), join(kernelDir, f));
  }
  const order = [];
  const visit = (name, chain) => {
    if (order.some((m) => m.name === name)) return;
    if (chain.includes(name)) throw new Error(`module dependency loop: ${[...chain, name].join(' -> ')}`);
    const file = files.get(name);
    if (!file) throw new Error(`${what} has no module ${name} (compressed modules are not handled)`);
    for (const d of moduleDepends(file)) visit(d, [...chain, name]);
    order.push({ name, file });
  };
  for (const r of roots) visit(r, []);
  return order;
}
