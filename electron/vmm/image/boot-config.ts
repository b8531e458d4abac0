// Which kernel, initrd and command line an image boots, from its own boot configuration, parsed
// as text (pure; inspect.ts reads the files): GRUB's grub.cfg (its default entry), the Boot Loader
// Specification's /boot/loader/entries/*.conf (Fedora, RHEL), and, with neither, the newest
// /boot/vmlinuz-* with its initrd. Paths are as the configuration writes them, relative to the
// file system that holds it (a separate /boot partition's grub.cfg says /vmlinuz-...).
// GRUB script is only understood as far as a default entry needs: quotes, `set`, `$var` and
// `${var}` from grub.cfg's own assignments and grubenv; anything else in the lines that matter
// is refused in one line rather than guessed. The command line is kept as the image gives it
// (without the BOOT_IMAGE= GRUB adds at boot); the caller may append to it.
import { ImageError, quoteFromImage } from './image-error.ts';

export interface BootEntry {
  source: 'grub' | 'bls' | 'fallback';
  title?: string;
  /** The kernel's path in the boot file system. */
  kernel: string;
  /** Initrds in load order (GRUB and BLS may list a microcode image before the initramfs). */
  initrds: string[];
  cmdline: string;
}

/** Linux's x86 COMMAND_LINE_SIZE, less the terminating NUL. */
const MAX_CMDLINE = 2047;
/** The longest value a `$var` expansion may build (`set a="$a$a"` doubles it on every line). */
const MAX_EXPANSION = 64 * 1024;

/** grubenv's `name=value` lines (saved_entry, kernelopts ...). */
export function parseGrubenv(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}

interface Node {
  kind: 'menuentry' | 'submenu' | 'block';
  title?: string;
  id?: string;
  line: number;
  lines: { text: string; line: number }[];
  children: Node[];
}

/** grub.cfg's default entry. `env` holds grubenv's variables. Throws ImageError. */
export function parseGrubCfg(text: string, env: Record<string, string> = {}): BootEntry {
  const top: Node = { kind: 'block', line: 0, lines: [], children: [] };
  const stack = [top];
  const vars: Record<string, string> = { ...env };
  const defaults: { raw: string; line: number }[] = [];
  if (text.includes('\0')) throw new ImageError(`grub.cfg line ${text.slice(0, text.indexOf('\0')).split('\n').length}: a NUL byte; fix the image's grub.cfg`);
  joinContinuations(text.split('\n')).forEach(({ raw, n }) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const cur = stack[stack.length - 1];
    if (line === '}') {
      if (stack.length > 1) stack.pop();
      return;
    }
    const words = splitWords(line);
    if (line.endsWith('{') && words !== undefined) {
      const head = words[0];
      const node: Node = { kind: head === 'menuentry' || head === 'submenu' ? head : 'block', line: n, lines: [], children: [] };
      if (node.kind !== 'block') {
        if (words.length < 3) throw new ImageError(`grub.cfg line ${n}: a ${head} without a title; fix the image's grub.cfg`);
        node.title = tryExpand(words[1], vars) ?? words[1];
        const idAt = words.findIndex((w) => w === '--id' || w === '$menuentry_id_option');
        if (idAt > 0 && words[idAt + 1] !== undefined) node.id = unquote(words[idAt + 1]);
      }
      cur.children.push(node);
      stack.push(node);
      return;
    }
    cur.lines.push({ text: line, line: n });
    // Assignments outside entries: the default and the variables later lines use.
    if (cur.kind !== 'menuentry' && words?.[0] === 'set' && words.length === 2) {
      const eq = words[1].indexOf('=');
      if (eq > 0) {
        const name = words[1].slice(0, eq);
        if (name === 'default') defaults.push({ raw: words[1].slice(eq + 1), line: n });
        else if (/^[A-Za-z_]\w*$/.test(name)) {
          const value = tryExpand(words[1].slice(eq + 1), vars);
          if (value !== undefined) vars[name] = value;
        }
      }
    }
  });
  const entries = top.children.filter((c) => c.kind !== 'block').concat(top.children.filter((c) => c.kind === 'block').flatMap(entriesIn));
  if (entries.length === 0) throw new ImageError('grub.cfg has no menuentry; fix the image\'s grub.cfg or remove it so the newest /boot/vmlinuz-* is used');
  // The last `set default=` that names something (Debian's first one is "${next_entry}", empty).
  let chosen: string | undefined;
  for (const d of defaults) {
    const v = tryExpand(d.raw, vars);
    if (v !== undefined && v !== '' && v !== 'saved') chosen = v;
  }
  const node = pick(entries, chosen ?? '0');
  return entryFrom(node, vars);
}

/** Lines as GRUB reads them: a line ending in an unescaped backslash goes on on the next one (not a comment's). */
function joinContinuations(lines: string[]): { raw: string; n: number }[] {
  const out: { raw: string; n: number }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    let raw = lines[i]!;
    while (!raw.trimStart().startsWith('#') && /(^|[^\\])(\\\\)*\\$/.test(raw) && i + 1 < lines.length) raw = raw.slice(0, -1) + lines[++i]!;
    out.push({ raw, n });
  }
  return out;
}

/** menuentry and submenu nodes inside non-menu blocks (an `if` never opens a brace; functions do). */
function entriesIn(b: Node): Node[] {
  return b.children.flatMap((c) => (c.kind === 'block' ? entriesIn(c) : [c]));
}

/** The entry `spec` names: "N", "N>M", a title, an id, or "Title>Title"; GRUB falls back to the first. */
function pick(entries: Node[], spec: string): Node {
  let level = entries;
  let node: Node | undefined;
  for (const part of spec.split('>')) {
    const found = /^\d+$/.test(part) ? level[Number(part)] : level.find((e) => e.title === part || e.id === part);
    if (found === undefined) {
      node = undefined;
      break;
    }
    node = found;
    level = found.children.filter((c) => c.kind !== 'block');
  }
  let chosen: Node = node ?? entries[0];
  // A submenu as the default boots its first entry.
  while (chosen.kind === 'submenu') {
    const first: Node | undefined = chosen.children.find((c) => c.kind === 'menuentry');
    if (!first) throw new ImageError(`grub.cfg line ${chosen.line}: submenu ${quoteFromImage(chosen.title ?? '')} has no menuentry; fix the image's grub.cfg`);
    chosen = first;
  }
  return chosen;
}

function entryFrom(node: Node, outer: Record<string, string>): BootEntry {
  const vars = { ...outer };
  let kernel: string | undefined;
  let args: string[] = [];
  let initrds: string[] = [];
  for (const { text, line } of node.lines) {
    const words = splitWords(text);
    const cmd = words?.[0] ?? text.split(/\s+/)[0];
    if (!['linux', 'linuxefi', 'linux16', 'initrd', 'initrdefi', 'initrd16', 'set'].includes(cmd)) continue;
    if (words === undefined) throw new ImageError(`grub.cfg line ${line}: an unterminated quote in ${quoteFromImage(text)}; fix the image's grub.cfg`);
    if (cmd !== 'set' && hasSecondCommand(text)) throw new ImageError(`grub.cfg line ${line}: a ';' after the ${cmd} command (${quoteFromImage(text)}); fix the image's grub.cfg`);
    if (cmd === 'set') {
      const eq = words[1]?.indexOf('=') ?? -1;
      if (words.length === 2 && eq > 0) {
        const v = tryExpand(words[1].slice(eq + 1), vars);
        if (v !== undefined) vars[words[1].slice(0, eq)] = v;
      }
      continue;
    }
    // `($root)/x` is the boot file system's /x whatever $root holds: stripped before expansion.
    const expanded = words
      .slice(1)
      .flatMap((w, i) => expand(cmd.startsWith('initrd') || i === 0 ? w.replace(/^\(\$\{?root\}?\)/, '') : w, vars, line, cmd).split('\0'))
      .filter((w) => w !== '');
    if (cmd.startsWith('linux')) {
      if (expanded.length === 0) throw new ImageError(`grub.cfg line ${line}: ${cmd} without a kernel path; fix the image's grub.cfg`);
      kernel = grubPath(expanded[0], line);
      args = expanded.slice(1);
    } else {
      initrds = expanded.map((p) => grubPath(p, line));
    }
  }
  if (kernel === undefined) throw new ImageError(`grub.cfg's default entry ${quoteFromImage(node.title ?? '')} (line ${node.line}) has no linux line; fix the image's grub.cfg`);
  return { source: 'grub', title: node.title, kernel, initrds, cmdline: cmdlineOf(args, `grub.cfg's entry ${quoteFromImage(node.title ?? '')}`) };
}

/** A file path as GRUB takes it: a path on another device, `(hd0,gpt2)/x`, is not followed. */
function grubPath(p: string, line: number): string {
  const dev = /^\(([^)]*)\)(.*)$/.exec(p);
  if (dev) {
    if (dev[1] !== '') throw new ImageError(`grub.cfg line ${line}: the path ${quoteFromImage(p)} names the GRUB device (${quoteFromImage(dev[1])}); only files of the boot file system are read`);
    return dev[2];
  }
  return p;
}

/** The kernel command line from its words: BOOT_IMAGE= dropped, a word with spaces quoted as the kernel parses it. */
function cmdlineOf(words: string[], where: string): string {
  const out: string[] = [];
  for (const w of words) {
    if (w.startsWith('BOOT_IMAGE=') || w === '') continue;
    if (/[^\x20-\x7e]/.test(w)) throw new ImageError(`refused: ${where} has a control or non-ASCII character in its command line (${quoteFromImage(w)}); fix the image's boot configuration`);
    if (/\s/.test(w)) {
      if (w.includes('"')) throw new ImageError(`refused: ${where} has a command-line word with both spaces and quotes (${quoteFromImage(w)}); fix the image's boot configuration`);
      const eq = w.indexOf('=');
      out.push(eq > 0 ? `${w.slice(0, eq)}="${w.slice(eq + 1)}"` : `"${w}"`);
    } else out.push(w);
  }
  const line = out.join(' ');
  if (line.length > MAX_CMDLINE) throw new ImageError(`refused: ${where} has a ${line.length}-byte command line; Linux takes at most ${MAX_CMDLINE}`);
  return line;
}

/** Splits a line of GRUB script into words with their quotes kept; undefined on an unterminated quote. */
function splitWords(line: string): string[] | undefined {
  const words: string[] = [];
  let cur = '';
  let quote = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      cur += c;
      if (c === '\\' && quote === '"' && i + 1 < line.length) cur += line[++i];
      else if (c === quote) quote = '';
      continue;
    }
    if (c === '#' && !inWord) break;
    if (c === ' ' || c === '\t') {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
      continue;
    }
    // `;` ends a command; the lines that matter have one command each, so what follows is dropped.
    if (c === ';') break;
    inWord = true;
    cur += c;
    if (c === '\\' && i + 1 < line.length) cur += line[++i];
    else if (c === '"' || c === "'") quote = c;
  }
  if (quote) return undefined;
  if (inWord) words.push(cur);
  return words;
}

/** Whether an unquoted `;` ends the line's first command early. */
function hasSecondCommand(line: string): boolean {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = '';
    } else if (c === '\\') i++;
    else if (c === '"' || c === "'") quote = c;
    else if (c === '#') return false;
    else if (c === ';') return line.slice(i + 1).trim() !== '';
  }
  return false;
}

/** A word's value: quotes removed, `$var`/`${var}` replaced (not in single quotes). Throws for an unknown variable. */
function expand(word: string, vars: Record<string, string>, line: number, what: string): string {
  let out = '';
  let quote = '';
  for (let i = 0; i < word.length; i++) {
    const c = word[i];
    if (quote === "'") {
      if (c === "'") quote = '';
      else out += c;
      continue;
    }
    if (c === '\\' && i + 1 < word.length) {
      out += word[++i];
      continue;
    }
    if ((c === '"' && quote === '"') || (c === '"' && !quote) || (c === "'" && !quote)) {
      quote = quote ? '' : c;
      continue;
    }
    if (c === '$') {
      const m = /^\$(?:\{([A-Za-z_]\w*|\d+)\}|([A-Za-z_]\w*|\d+))/.exec(word.slice(i));
      if (!m) throw new ImageError(`grub.cfg line ${line}: ${what} uses ${quoteFromImage(word)}, a GRUB expansion not followed here; fix the image's grub.cfg`);
      const name = m[1] ?? m[2];
      if (!(name in vars)) throw new ImageError(`grub.cfg line ${line}: ${what} uses the variable $${name}, which grub.cfg and grubenv do not set; fix the image's grub.cfg`);
      // Unquoted, a value splits into words as GRUB splits it (Fedora's `$kernelopts`): NUL marks the cuts.
      out += quote ? vars[name] : vars[name].trim().replace(/\s+/g, '\0');
      if (out.length > MAX_EXPANSION) throw new ImageError(`grub.cfg line ${line}: ${what} expands ${quoteFromImage(word)} to more than ${MAX_EXPANSION} characters; fix the image's grub.cfg`);
      i += m[0].length - 1;
      continue;
    }
    out += c;
  }
  return out;
}

function tryExpand(word: string, vars: Record<string, string>): string | undefined {
  try {
    return expand(word, vars, 0, 'set').replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
}

const unquote = (w: string) => tryExpand(w, {}) ?? w;

/** The BLS entry to boot: the one grubenv's saved_entry names, else the newest non-rescue version. */
export function parseBlsEntries(files: { name: string; text: string }[], env: Record<string, string> = {}): BootEntry {
  const entries = files.map((f) => {
    const keys: Record<string, string[]> = {};
    for (const raw of f.text.split('\n')) {
      const m = /^\s*([A-Za-z_]+)\s+(.*?)\s*$/.exec(raw);
      if (m && !raw.trimStart().startsWith('#')) (keys[m[1]] ??= []).push(m[2]);
    }
    return { id: f.name.replace(/\.conf$/, ''), keys, file: f.name };
  });
  const usable = entries.filter((e) => e.keys.linux);
  if (usable.length === 0) throw new ImageError('loader/entries has no entry with a linux line; fix the image\'s boot entries');
  const rescue = (e: (typeof usable)[number]) => /rescue/i.test(e.id) || /rescue/i.test(e.keys.title?.[0] ?? '');
  const saved = env.saved_entry ? usable.find((e) => e.id === env.saved_entry) : undefined;
  const pool = usable.some((e) => !rescue(e)) ? usable.filter((e) => !rescue(e)) : usable;
  const entry = saved ?? [...pool].sort((a, b) => compareVersions(b.keys.version?.[0] ?? b.id, a.keys.version?.[0] ?? a.id))[0];
  const where = `boot entry ${quoteFromImage(entry.file)}`;
  // GRUB expands a variable grubenv lacks to nothing (RHEL's $tuned_params, $tuned_initrd without
  // tuned); only a command line left without root= is refused, naming what was missing.
  const unset: string[] = [];
  const words = (s: string) => blsExpand(s, env, where, unset).split(/\s+/).filter(Boolean);
  const path = (p: string) => p.replace(/^\(\$\{?root\}?\)/, '');
  const cmdline = cmdlineOf((entry.keys.options ?? []).flatMap(words), where);
  if (unset.length > 0 && !/(^| )root=/.test(cmdline)) {
    throw new ImageError(`${where} has no root= once ${unset.map((n) => `$${n}`).join(', ')} (not set in grubenv) expand to nothing; fix the image's boot entries`);
  }
  return {
    source: 'bls',
    title: entry.keys.title?.[0],
    kernel: path(words(entry.keys.linux[0])[0] ?? ''),
    initrds: (entry.keys.initrd ?? []).flatMap(words).map(path),
    cmdline,
  };
}

function blsExpand(s: string, env: Record<string, string>, where: string, unset: string[]): string {
  return s.replace(/\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))|\$/g, (all, a: string | undefined, b: string | undefined) => {
    const name = a ?? b;
    if (name === 'root') return all;
    if (name === undefined) throw new ImageError(`${where} uses ${quoteFromImage(s)}, a GRUB expansion not followed here; fix the image's boot entries`);
    if (!(name in env)) unset.push(name);
    return env[name] ?? '';
  });
}

/** Neither grub.cfg nor BLS: the newest vmlinuz-VERSION in `names` (a /boot listing) and its initrd. */
export function fallbackEntry(names: string[], dir: string, rootUuid: string | undefined): BootEntry | undefined {
  const versions = names.filter((n) => /^vmlinuz-.+/.test(n) && !/\.(sig|old|bak)$/.test(n)).map((n) => n.slice('vmlinuz-'.length));
  if (versions.length === 0) return undefined;
  const v = versions.sort(compareVersions).at(-1)!;
  const initrd = [`initrd.img-${v}`, `initramfs-${v}.img`, `initrd-${v}`, `initrd-${v}.img`, `initramfs-${v}`].find((n) => names.includes(n));
  const at = (n: string) => `${dir.replace(/\/$/, '')}/${n}`;
  return { source: 'fallback', kernel: at(`vmlinuz-${v}`), initrds: initrd ? [at(initrd)] : [], cmdline: rootUuid ? `root=UUID=${rootUuid} ro` : 'ro' };
}

/** Version order as package managers roughly see it: digit runs numerically, the rest as text. */
export function compareVersions(a: string, b: string): number {
  const pa = a.match(/\d+|\D+/g) ?? [];
  const pb = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const nx = /^\d/.test(x);
    const ny = /^\d/.test(y);
    if (nx && ny) {
      const d = Number(x) - Number(y);
      if (d !== 0) return d;
    } else if (x !== y) return nx ? 1 : ny ? -1 : x < y ? -1 : 1;
  }
  return 0;
}
