// The smallest YAML writer the KubeVirt export needs, so no YAML package is added: block
// mappings and sequences, every scalar in JSON syntax (a JSON string is a valid YAML
// double-quoted scalar, JSON numbers, true/false/null are YAML's too), `#` comments on top.
// Plain keys only where YAML reads them as the same string; anything else is quoted.

import { commentLine } from './plan.ts';

export type YamlValue = string | number | boolean | null | YamlValue[] | { [key: string]: YamlValue };

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

export function toYaml(value: YamlValue, comments: string[] = []): string {
  const lines = comments.map((c) => (c ? `# ${commentLine(c)}` : '#'));
  lines.push(...block(value, 0));
  return `${lines.join('\n')}\n`;
}

/**
 * A string as a YAML double-quoted scalar: JSON's escapes, plus those JSON leaves raw but YAML
 * does not take as they are — U+0085, U+2028/9 (line breaks to a YAML 1.1 parser), DEL and the C1
 * controls, U+FEFF, U+FFFE/U+FFFF (not printable in YAML) — each as \uNNNN, which both read alike.
 */
function yamlString(s: string): string {
  // JSON.stringify already writes a lone surrogate as \uNNNN (well-formed JSON.stringify).
  return JSON.stringify(s).replace(/[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function scalar(v: YamlValue): string | undefined {
  if (typeof v === 'string') return yamlString(v);
  if (v === null || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`YAML export: ${v} is not a number YAML and JSON share`);
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return v.length === 0 ? '[]' : undefined;
  return Object.keys(v).length === 0 ? '{}' : undefined;
}

function key(k: string): string {
  // `true`, `null`, `no` … would read as other types in some YAML versions: quoted.
  return PLAIN_KEY.test(k) && !/^(true|false|null|yes|no|on|off|y|n)$/i.test(k) ? k : yamlString(k);
}

function block(v: YamlValue, indent: number): string[] {
  const pad = ' '.repeat(indent);
  const s = scalar(v);
  if (s !== undefined) return [`${pad}${s}`];
  const out: string[] = [];
  if (Array.isArray(v)) {
    for (const item of v) {
      const inner = scalar(item);
      if (inner !== undefined) { out.push(`${pad}- ${inner}`); continue; }
      const nested = block(item, indent + 2);
      // A mapping starts on the dash's line; a nested sequence below it.
      if (Array.isArray(item)) out.push(`${pad}-`, ...nested);
      else out.push(`${pad}- ${nested[0]!.slice(indent + 2)}`, ...nested.slice(1));
    }
    return out;
  }
  for (const [k, item] of Object.entries(v as { [key: string]: YamlValue })) {
    const inner = scalar(item);
    if (inner !== undefined) out.push(`${pad}${key(k)}: ${inner}`);
    else out.push(`${pad}${key(k)}:`, ...block(item, indent + 2));
  }
  return out;
}
