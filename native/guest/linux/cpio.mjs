// A cpio "newc" archive writer: what the kernel unpacks into its rootfs. Used for the Linux guest
// kit's initramfs and for the nested test lane's L1 initramfs.
/** cpio "newc" (SVR4 without CRC), what the kernel unpacks into its rootfs. */
export function CpioWriter() {
  const parts = [];
  let ino = 1;
  let size = 0;
  const push = (b) => { parts.push(b); size += b.length; };
  const pad4 = () => { if (size % 4) push(Buffer.alloc(4 - (size % 4))); };
  const hex = (n) => (n >>> 0).toString(16).padStart(8, '0');
  const entry = (name, mode, data = Buffer.alloc(0), rdevMajor = 0, rdevMinor = 0, nlink = 1) => {
    const nameBytes = Buffer.from(`${name}\0`);
    const fields = [ino++, mode, 0, 0, nlink, 0, data.length, 0, 0, rdevMajor, rdevMinor, nameBytes.length, 0];
    push(Buffer.from(`070701${fields.map(hex).join('')}`, 'ascii'));
    push(nameBytes);
    pad4();
    push(data);
    pad4();
  };
  this.dir = (name, perm) => entry(name, 0o040000 | perm, undefined, 0, 0, 2);
  this.file = (name, data, perm) => entry(name, 0o100000 | perm, data);
  this.symlink = (name, target) => entry(name, 0o120777, Buffer.from(target));
  this.charDev = (name, perm, major, minor) => entry(name, 0o020000 | perm, undefined, major, minor);
  this.finish = () => {
    ino = 0;
    entry('TRAILER!!!', 0);
    if (size % 512) push(Buffer.alloc(512 - (size % 512)));
    return Buffer.concat(parts, size);
  };
}
