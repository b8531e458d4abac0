// Every export is well-formed and holds only what it means to, whatever strings a user gives
// (issue 30 item 2): kernel, initrd and disk paths and the kernel command line made of hostile
// characters — line breaks of every kind (\n, \r, U+0085, U+2028/9), other controls, quotes, XML
// and YAML syntax, shell syntax, bidi overrides, a BOM — go into the QEMU, libvirt and KubeVirt
// exports, and real parsers read them back: /bin/sh runs the QEMU script against a stand-in
// qemu-system-x86_64 that prints its arguments, xmllint and Python's ElementTree read the libvirt
// XML, PyYAML reads the KubeVirt manifest. Each string comes back exactly where it belongs, and
// nothing else appears (a comment that became code, YAML keys, XML elements). A string XML 1.0
// cannot hold at all (a C0 control in a file name) is refused by the libvirt export, named.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, validateConfig, type VmConfig } from '../../electron/vmm/config/vm-config.ts';
import { exportConfig } from '../../electron/vmm/export/export.ts';
import { exportPlan } from '../../electron/vmm/export/plan.ts';
import { qemuArgs } from '../../electron/vmm/export/qemu.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

/** The characters that broke exports, or could: each alone, and mixed into random text. */
const HOSTILE = ['\n', '\r', '\t', '\x01', '\x1b', '\x7f', '\x85', '\u2028', '\u2029', '\ufeff', '\ufffe', '\uffff', '\ud800', '\udc00', '\u202e', '\u2066', "'", '"', '`', '\\', '$', '$(id)', '${x}', '&', '<', '>',
  '<!--', '-->', '--', ']]>', '#', ': ', '- ', '---', '...', '%', '@', '!', '|', '*', '&a', '? ', '{', '}', '[', ']', ',', ' ', 'é', '😀', 'k: v', '\nstatus: {injected: true}\n#'];
const piece = fc.oneof(fc.constantFrom(...HOSTILE), fc.string({ unit: 'binary', minLength: 1, maxLength: 4 }).filter((s) => !s.includes('\0')));
// Half a surrogate pair is refused by the configuration (below): the pieces join into well-formed text.
const hostile = fc.array(piece, { minLength: 1, maxLength: 6 }).map((a) => a.join('').replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
/** A kernel command line: printable (a control character is refused by the configuration itself). */
const cmdline = hostile.map((s) => s.replace(/[\x00-\x1f\x7f]/g, ' ')).filter((s) => s.trim() !== '');

const NOT_XML = /[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const SEED = Number(process.env.FUZZ_SEED ?? 30);
const RUNS = 150 * Number(process.env.FUZZ_SCALE ?? 1);

interface Case { config: VmConfig; strings: { kernel: string; initrd: string; disk: string; append: string } }
const cases: Case[] = fc.sample(fc.record({ k: hostile, i: hostile, d: hostile, a: cmdline }), { seed: SEED, numRuns: RUNS }).map(({ k, i, d, a }) => {
  // A disk path has no comma (it separates disk options: the configuration refuses one).
  const strings = { kernel: `/k/${k}`, initrd: `/i/${i}`, disk: `/d/${d.replace(/,/g, '')}`, append: a };
  return { strings, config: validateConfig({ name: 'hostile', guest: 'custom', kernel: strings.kernel, initrd: strings.initrd, append: a, disks: [{ path: strings.disk }] }) };
});
/** The boot files as resolveBoot gives a custom guest's (which also checks they exist: these do not). */
const bootOf = (c: VmConfig) => ({ kernelPath: c.kernel!, initrdPath: c.initrd!, cmdline: c.append! });
const exported = (format: 'qemu' | 'libvirt' | 'kubevirt', c: VmConfig) => exportConfig(format, { config: c, boot: bootOf(c), hostKind: 'hardware' }).text;

/** A Python 3 with PyYAML (Debian's python3-yaml: .ci/run installs it). */
const PYTHON = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'import yaml']).status === 0);

/** One Python process reads every document: the YAML's and the XML's values, as JSON. */
function python(program: string, input: unknown): unknown {
  if (!PYTHON) throw new Error('no python3 with PyYAML here: apt install python3-yaml');
  const r = spawnSync(PYTHON, ['-c', program], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`python3: ${r.stderr.trim().split('\n').at(-1)}`);
  return JSON.parse(r.stdout);
}

describe('exports of hostile strings', () => {
  it('the configuration takes tabs and line breaks in the kernel command line as spaces, and refuses other control characters', () => {
    expect(validateConfig({ name: 'x', guest: 'custom', kernel: '/k', append: 'a\nstatus:\tx\r' }).append).toBe('a status: x ');
    expect(() => validateConfig({ name: 'x', guest: 'custom', kernel: '/k', append: 'a\x01b' })).toThrow(new ConfigError("append contains the control character U+0001: the kernel's command line is one line of printable text"));
    expect(() => validateConfig({ name: 'x', guest: 'custom', kernel: '/k\ud800' })).toThrow(new ConfigError('kernel contains half of a UTF-16 surrogate pair, which is no character'));
  });

  it(`QEMU: /bin/sh runs the script with exactly the arguments meant, and nothing else (${RUNS} cases)`, () => {
    const dir = tempHome('hostile-qemu');
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    // The stand-in: each argument NUL-terminated on stdout; a comment turned into code would print or fail.
    writeFileSync(join(bin, 'qemu-system-x86_64'), '#!/bin/sh\nfor a; do printf "%s\\0" "$a"; done\n');
    chmodSync(join(bin, 'qemu-system-x86_64'), 0o755);
    for (const c of cases) {
      const script = join(dir, 'vm.sh');
      writeFileSync(script, exported('qemu', c.config));
      const r = spawnSync('/bin/sh', [script], { env: { PATH: `${bin}:/usr/bin:/bin` }, encoding: 'buffer' });
      expect(r.stderr.toString(), JSON.stringify(c.strings)).toBe('');
      expect(r.status).toBe(0);
      const args = r.stdout.toString('utf8').split('\0').slice(0, -1);
      expect(args, JSON.stringify(c.strings)).toEqual(qemuArgs(exportPlan({ config: c.config, boot: bootOf(c.config), hostKind: 'hardware' })));
      expect(args[args.indexOf('-kernel') + 1]).toBe(c.strings.kernel);
      expect(args[args.indexOf('-append') + 1]).toBe(c.strings.append);
    }
  });

  it(`libvirt: well-formed for xmllint; ElementTree reads each path and the command line back exactly; what XML cannot hold is refused (${RUNS} cases)`, () => {
    const dir = tempHome('hostile-libvirt');
    const docs: { file: string; c: Case }[] = [];
    let refused = 0;
    cases.forEach((c, n) => {
      const cannot = Object.values(c.strings).some((s) => NOT_XML.test(s));
      let text: string;
      try {
        text = exported('libvirt', c.config);
      } catch (e) {
        expect(e, JSON.stringify(c.strings)).toBeInstanceOf(ConfigError);
        expect((e as Error).message).toMatch(/^libvirt's XML cannot hold the (kernel|initrd|disk 1) .*: it has the character U\+[0-9A-F]{4}, which XML 1.0 allows in no form; rename it, or export --format qemu$/s);
        expect(cannot, JSON.stringify(c.strings)).toBe(true);
        refused++;
        return;
      }
      expect(cannot, `exported what XML cannot hold: ${JSON.stringify(c.strings)}`).toBe(false);
      const file = join(dir, `${n}.xml`);
      writeFileSync(file, text);
      docs.push({ file, c });
    });
    const lint = spawnSync('xmllint', ['--noout', ...docs.map((d) => d.file)], { encoding: 'utf8' });
    expect(lint.stderr).toBe('');
    expect(lint.status).toBe(0);
    const read = python([
      'import sys, json, xml.etree.ElementTree as ET',
      'out = []',
      'for f in json.load(sys.stdin):',
      '  r = ET.parse(f).getroot()',
      "  out.append({'top': sorted({e.tag for e in r}), 'kernel': r.findtext('os/kernel'), 'initrd': r.findtext('os/initrd'), 'cmdline': r.findtext('os/cmdline'),",
      "    'disks': [d.get('file') for d in r.iterfind('devices/disk/source')]})",
      'print(json.dumps(out))',
    ].join('\n'), docs.map((d) => d.file)) as { top: string[]; kernel: string; initrd: string; cmdline: string; disks: string[] }[];
    const tops = new Set(read.map((r) => r.top.join(',')));
    expect(tops.size, [...tops].join('\n')).toBe(1);
    read.forEach((r, n) => {
      const s = docs[n]!.c.strings;
      // ElementTree gives CRLF in text as it is (references kept it): each string exactly.
      expect({ kernel: r.kernel, initrd: r.initrd, cmdline: r.cmdline, disks: r.disks }, JSON.stringify(s)).toEqual({ kernel: s.kernel, initrd: s.initrd, cmdline: s.append, disks: [s.disk] });
    });
    console.log(`[export-hostile] libvirt: ${docs.length} read back exactly, ${refused} refused (a character XML 1.0 cannot hold)`);
  });

  it(`KubeVirt: PyYAML reads one VirtualMachine with the command line exactly, and no key a comment or a string made (${RUNS} cases)`, () => {
    const texts = cases.map((c) => exported('kubevirt', c.config));
    const docs = python('import sys, json, yaml\nprint(json.dumps([list(yaml.safe_load_all(t)) for t in json.load(sys.stdin)]))', texts) as Record<string, any>[][];
    docs.forEach((all, n) => {
      const s = cases[n]!.strings;
      expect(all, JSON.stringify(s)).toHaveLength(1);
      const doc = all[0]!;
      expect(Object.keys(doc).sort()).toEqual(['apiVersion', 'kind', 'metadata', 'spec']);
      expect(doc.kind).toBe('VirtualMachine');
      expect(doc.spec.template.spec.domain.firmware.kernelBoot.kernelArgs, JSON.stringify(s)).toBe(s.append);
    });
  });
});
