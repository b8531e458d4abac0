// QEMU-style option syntax shared by the CLI and config strings: `--cpu host,kvm-pv-unhalt=on`,
// `--overcommit cpu-pm=on,mem-lock=off`, pin lists `0,1` / `0+1` / `0-3`.
import { FEATURE_NAMES } from '../machine/features.ts';
import { ConfigError, unknownFeature } from './vm-config.ts';
import { MAX_PIN_ENTRIES } from './limits.ts';

export function onOff(value: string, what: string): boolean {
  if (value === 'on' || value === 'true' || value === 'yes') return true;
  if (value === 'off' || value === 'false' || value === 'no') return false;
  throw new ConfigError(`${what} must be on or off, got "${value.slice(0, 40)}"`);
}

/** `host,kvm-pv-unhalt=on,-kvm-steal-time,+kvm-pv-ipi` -> explicit feature settings. */
export function parseCpuOption(spec: string): Record<string, boolean> {
  const [model, ...props] = spec.split(',');
  if (model !== 'host') throw new ConfigError(`CPU model "${(model ?? '').slice(0, 40)}" is not supported; use --cpu host[,feature=on|off...]`);
  const out: Record<string, boolean> = {};
  for (const prop of props) {
    if (prop === '') continue;
    let name: string;
    let value: boolean;
    if (prop.startsWith('+') || prop.startsWith('-')) {
      name = prop.slice(1);
      value = prop.startsWith('+');
    } else {
      const eq = prop.indexOf('=');
      if (eq < 0) throw new ConfigError(`CPU feature "${prop.slice(0, 40)}" needs a value: ${prop.slice(0, 40)}=on or =off`);
      name = prop.slice(0, eq);
      value = onOff(prop.slice(eq + 1), name);
    }
    if (!FEATURE_NAMES.includes(name)) throw new ConfigError(unknownFeature(name));
    out[name] = value;
  }
  return out;
}

export function formatCpuOption(features: Record<string, boolean>): string {
  return ['host', ...Object.entries(features).map(([k, v]) => `${k}=${v ? 'on' : 'off'}`)].join(',');
}

/** `cpu-pm=on,mem-lock=off` */
export function parseOvercommit(spec: string): { cpuPm?: boolean; memLock?: boolean } {
  const out: { cpuPm?: boolean; memLock?: boolean } = {};
  for (const part of spec.split(',')) {
    if (part === '') continue;
    const [key, value = ''] = part.split('=', 2) as [string, string?];
    if (key === 'cpu-pm') out.cpuPm = onOff(value, 'cpu-pm');
    else if (key === 'mem-lock') out.memLock = onOff(value, 'mem-lock');
    else throw new ConfigError(`unknown overcommit option "${key.slice(0, 40)}"; valid: cpu-pm, mem-lock`);
  }
  return out;
}

/** Host CPU lists: `0,1`, `0+1` (config strings) and ranges `0-3`. */
export function parseCpuList(spec: string, what = 'pin'): number[] {
  const out: number[] = [];
  for (const part of spec.split(/[,+]/)) {
    const m = /^(\d{1,4})(?:-(\d{1,4}))?$/.exec(part.trim());
    if (!m) throw new ConfigError(`${what}: "${part.slice(0, 40)}" is not a host CPU number or range (e.g. 0,1 or 0-3)`);
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a) throw new ConfigError(`${what}: range ${part} runs backwards`);
    // The same limit the schema enforces, named here before a long range is expanded.
    if (out.length + (b - a + 1) > MAX_PIN_ENTRIES) throw new ConfigError(`${what}: at most ${MAX_PIN_ENTRIES} host CPUs may be listed`);
    for (let c = a; c <= b; c++) out.push(c);
  }
  return out;
}
