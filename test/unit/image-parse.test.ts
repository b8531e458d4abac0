// The image reader's pure parsers on text and bytes written here: GRUB's default entry (numbers,
// titles, ids, submenu paths, grubenv's saved_entry, variables), BLS selection, the fallback to
// the newest kernel, file-system magic, and MBR layouts. image-inspect.test.ts reads real images.
import { describe, expect, it } from 'vitest';
import { compareVersions, fallbackEntry, parseBlsEntries, parseGrubCfg, parseGrubenv } from '../../electron/vmm/image/boot-config.ts';
import { detectFs } from '../../electron/vmm/image/fs-detect.ts';
import { parsePartitionTable } from '../../electron/vmm/image/partition-table.ts';

const menu = (title: string, kernel: string, extra = '', id = '') => `menuentry '${title}' ${id ? `$menuentry_id_option '${id}' ` : ''}{\n  ${extra}linux ${kernel} root=/dev/vda1 ro\n  initrd /boot/initrd-${title}\n}\n`;
const cfg = (def: string) =>
  `set default="${def}"\n${menu('A', '/boot/vmlinuz-a', '', 'id-a')}submenu 'Advanced' {\n${menu('B', '/boot/vmlinuz-b', '', 'id-b')}${menu('C', '/boot/vmlinuz-c')}}\n${menu('D', '/boot/vmlinuz-d')}`;

describe('grub.cfg: the default entry', () => {
  it('by number, submenu path, title, id, Title>Title; GRUB\'s fallback to the first', () => {
    const kernel = (def: string) => parseGrubCfg(cfg(def)).kernel;
    expect(kernel('0')).toBe('/boot/vmlinuz-a');
    expect(kernel('2')).toBe('/boot/vmlinuz-d');
    expect(kernel('1>1')).toBe('/boot/vmlinuz-c');
    expect(kernel('1')).toBe('/boot/vmlinuz-b');
    expect(kernel('D')).toBe('/boot/vmlinuz-d');
    expect(kernel('id-b')).toBe('/boot/vmlinuz-a');
    expect(kernel('Advanced>C')).toBe('/boot/vmlinuz-c');
    expect(kernel('9')).toBe('/boot/vmlinuz-a');
    expect(parseGrubCfg(cfg('0'))).toEqual({ source: 'grub', title: 'A', kernel: '/boot/vmlinuz-a', initrds: ['/boot/initrd-A'], cmdline: 'root=/dev/vda1 ro' });
  });

  it('saved_entry and variables from grubenv; ($root) paths; BOOT_IMAGE= dropped; a spaced word quoted', () => {
    const env = parseGrubenv('# GRUB Environment Block\nsaved_entry=D\nextra=quiet splash\n####');
    expect(parseGrubCfg(cfg('${saved_entry}'), env).kernel).toBe('/boot/vmlinuz-d');
    const text = `set opts="console=ttyS0"\nmenuentry 'x' {\n  set more=rw\n  linuxefi ($root)/vmlinuz-1 BOOT_IMAGE=/vmlinuz-1 $opts \${more} $extra init='/bin/sh -c x'\n  initrdefi ($root)/ucode.img ($root)/initrd-1\n}\n`;
    expect(parseGrubCfg(text, env)).toMatchObject({ kernel: '/vmlinuz-1', initrds: ['/ucode.img', '/initrd-1'], cmdline: 'console=ttyS0 rw quiet splash init="/bin/sh -c x"' });
  });

  it('refuses what it does not follow, in one line', () => {
    const entry = (line: string) => `menuentry 'x' {\n  ${line}\n}\n`;
    expect(() => parseGrubCfg(entry('linux /vmlinuz $vt_handoff'))).toThrow("grub.cfg line 2: linux uses the variable $vt_handoff, which grub.cfg and grubenv do not set; fix the image's grub.cfg");
    expect(() => parseGrubCfg(entry('linux (hd0,gpt2)/vmlinuz'))).toThrow('grub.cfg line 2: the path "(hd0,gpt2)/vmlinuz" names the GRUB device ("hd0,gpt2"); only files of the boot file system are read');
    expect(() => parseGrubCfg(entry('initrd /initrd.img'))).toThrow('grub.cfg\'s default entry "x" (line 1) has no linux line; fix the image\'s grub.cfg');
    expect(() => parseGrubCfg('set default=0\n')).toThrow("grub.cfg has no menuentry; fix the image's grub.cfg or remove it so the newest /boot/vmlinuz-* is used");
    expect(() => parseGrubCfg(entry('linux /vmlinuz x=\u0007'))).toThrow('refused: grub.cfg\'s entry "x" has a control or non-ASCII character in its command line ("x=\\u0007"); fix the image\'s boot configuration');
    expect(() => parseGrubCfg(entry(`linux /vmlinuz ${'a'.repeat(2100)}`))).toThrow('refused: grub.cfg\'s entry "x" has a 2100-byte command line; Linux takes at most 2047');
  });
});

describe('BLS entries and the fallback', () => {
  const conf = (v: string, extra = '') => ({ name: `m-${v}.conf`, text: `title L ${v}\nversion ${v}\nlinux /vmlinuz-${v}\ninitrd /initramfs-${v}.img\noptions root=UUID=u ro${extra}\n` });
  it('the newest version, not a rescue entry, unless grubenv names one', () => {
    const files = [conf('6.2.9-300'), conf('6.10.1-100'), conf('0-rescue-m'), conf('6.9.0-1')];
    expect(parseBlsEntries(files)).toEqual({ source: 'bls', title: 'L 6.10.1-100', kernel: '/vmlinuz-6.10.1-100', initrds: ['/initramfs-6.10.1-100.img'], cmdline: 'root=UUID=u ro' });
    expect(parseBlsEntries(files, { saved_entry: 'm-6.2.9-300' }).kernel).toBe('/vmlinuz-6.2.9-300');
    expect(parseBlsEntries([conf('0-rescue-m')]).kernel).toBe('/vmlinuz-0-rescue-m');
    expect(() => parseBlsEntries([conf('1', ' $(reboot)')])).toThrow('boot entry "m-1.conf" uses "root=UUID=u ro $(reboot)", a GRUB expansion not followed here; fix the image\'s boot entries');
    // RHEL without tuned: $tuned_params and $tuned_initrd are unset and expand to nothing, as in GRUB.
    const rhel = { name: 'r.conf', text: 'linux ($root)/vmlinuz-4.18\ninitrd ($root)/initramfs-4.18.img $tuned_initrd\noptions $kernelopts $tuned_params\n' };
    expect(parseBlsEntries([rhel], { kernelopts: 'root=/dev/vda2 ro' })).toMatchObject({ kernel: '/vmlinuz-4.18', initrds: ['/initramfs-4.18.img'], cmdline: 'root=/dev/vda2 ro' });
    expect(() => parseBlsEntries([rhel])).toThrow('boot entry "r.conf" has no root= once $kernelopts, $tuned_params (not set in grubenv) expand to nothing; fix the image\'s boot entries');
    expect(() => parseBlsEntries([{ name: 'x.conf', text: 'title x\n' }])).toThrow("loader/entries has no entry with a linux line; fix the image's boot entries");
  });

  it('the newest vmlinuz-* with initrd.img-, initramfs-*.img or none', () => {
    expect(fallbackEntry(['vmlinuz-5.10.0-9-amd64', 'vmlinuz-5.10.0-10-amd64', 'initrd.img-5.10.0-10-amd64', 'config-5.10.0-10-amd64'], '/boot', 'u')).toEqual({
      source: 'fallback', kernel: '/boot/vmlinuz-5.10.0-10-amd64', initrds: ['/boot/initrd.img-5.10.0-10-amd64'], cmdline: 'root=UUID=u ro',
    });
    expect(fallbackEntry(['vmlinuz-6.5.0', 'initramfs-6.5.0.img'], '/', 'u')).toMatchObject({ kernel: '/vmlinuz-6.5.0', initrds: ['/initramfs-6.5.0.img'] });
    expect(fallbackEntry(['vmlinuz-6.5.0'], '/boot', undefined)).toMatchObject({ initrds: [], cmdline: 'ro' });
    expect(fallbackEntry(['grub', 'config-1'], '/boot', 'u')).toBeUndefined();
    expect(['6.1.0-10', '6.1.0-9', '6.10.0-1', '6.1.0-10a'].sort(compareVersions)).toEqual(['6.1.0-9', '6.1.0-10', '6.1.0-10a', '6.10.0-1']);
  });
});

describe('file systems and MBR layouts from bytes', () => {
  const at = (size: number, writes: [number, Buffer | string][]) => {
    const b = Buffer.alloc(size);
    for (const [off, v] of writes) (typeof v === 'string' ? Buffer.from(v, 'latin1') : v).copy(b, off);
    return b;
  };
  it('names each magic; ext and xfs UUIDs and labels', () => {
    const uuid = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
    // 2048 blocks of 1024 << 2 bytes.
    const ext4 = at(4096, [[1080, Buffer.from([0x53, 0xef])], [1024 + 4, Buffer.from([0, 8, 0, 0])], [1024 + 24, Buffer.from([2])], [1024 + 0x60, Buffer.from([0x40, 0, 0, 0])], [1024 + 0x68, uuid], [1024 + 0x78, 'my root']]);
    expect(detectFs(ext4)).toEqual({
      kind: 'ext', extVersion: 'ext4', uuid: '00112233-4455-6677-8899-aabbccddeeff', label: 'my root', sizeBytes: 8 * 1024 * 1024,
    });
    expect(detectFs(at(4096, [[1080, Buffer.from([0x53, 0xef])], [1024 + 0x5c, Buffer.from([4])]]))).toMatchObject({ kind: 'ext', extVersion: 'ext3' });
    expect(detectFs(at(4096, [[0, 'XFSB'], [32, uuid], [108, 'data']]))).toEqual({ kind: 'xfs', uuid: '00112233-4455-6677-8899-aabbccddeeff', label: 'data' });
    expect(detectFs(at(4096, [[0, 'LUKS\xba\xbe'], [168, 'abcd-ef']]))).toEqual({ kind: 'luks', uuid: 'abcd-ef' });
    expect(detectFs(at(4096, [[1536, 'LABELONE']])).kind).toBe('lvm');
    expect(detectFs(at(8192, [[4086, 'SWAPSPACE2']])).kind).toBe('swap');
    expect(detectFs(at(0x11000, [[0x10040, '_BHRfS_M']])).kind).toBe('btrfs');
    expect(detectFs(at(512, [[0, '\xeb\x58\x90'], [82, 'FAT32   '], [67, Buffer.from([0x78, 0x56, 0x34, 0x12])], [71, 'ESP        '], [510, Buffer.from([0x55, 0xaa])]]))).toEqual({ kind: 'vfat', uuid: '1234-5678', label: 'ESP' });
    expect(detectFs(Buffer.alloc(4096)).kind).toBe('unknown');
  });

  it('MBR primaries by slot; an extended partition skipped and said; a FAT boot sector is no MBR', () => {
    const entry = (slot: number, type: number, lba: number, sectors: number) => {
      const e = Buffer.alloc(16);
      e[4] = type;
      e.writeUInt32LE(lba, 8);
      e.writeUInt32LE(sectors, 12);
      return [446 + slot * 16, e] as [number, Buffer];
    };
    const mbr = at(4096, [entry(0, 0x83, 2048, 100), entry(2, 0x05, 4096, 100), [510, Buffer.from([0x55, 0xaa])]]);
    expect(parsePartitionTable(mbr, 4 * 1024 * 1024)).toEqual({ scheme: 'mbr', partitions: [{ index: 1, startBytes: 1048576, sizeBytes: 51200, mbrType: 0x83 }], skippedLogical: true });
    expect(() => parsePartitionTable(at(4096, [entry(0, 0xee, 1, 100), [510, Buffer.from([0x55, 0xaa])]]), 1 << 20)).toThrow('damaged GPT: a protective MBR but no GPT header at sector 1; download or copy the image again');
    const fat = at(4096, [[0, '\xeb\x58\x90mkfs.fat'], [82, 'FAT32   '], [510, Buffer.from([0x55, 0xaa])]]);
    expect(parsePartitionTable(fat, 1 << 20)).toEqual({ scheme: 'none', partitions: [{ index: 0, startBytes: 0, sizeBytes: 1 << 20 }] });
  });
});
