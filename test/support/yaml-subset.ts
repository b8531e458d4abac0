// Test support: a strict parser for the block-YAML subset the KubeVirt export writes (block
// mappings and sequences, scalars in JSON syntax, `#` comment lines), so the tests need no YAML
// package. Strict on purpose: anything outside the subset (tabs, flow collections with content,
// plain scalars, anchors, bad indentation) is an error naming the line, never a guess. Where
// PyYAML is installed, yamlViaPython() reads the same text with a full YAML parser to compare.
import { spawnSync } from 'node:child_process';

type Value = unknown;
interface Line { indent: number; text: string; no: number }

export function parseYamlSubset(source: string): Value {
  const lines: Line[] = [];
  source.split('\n').forEach((raw, i) => {
    if (raw.includes('\t')) throw new Error(`line ${i + 1}: a tab`);
    const text = raw.trimEnd();
    if (text.trim() === '' || text.trimStart().startsWith('#')) return;
    lines.push({ indent: text.length - text.trimStart().length, text: text.trimStart(), no: i + 1 });
  });
  if (!lines.length) throw new Error('no document');
  const [value, next] = node(lines, 0, lines[0]!.indent);
  if (next !== lines.length) throw new Error(`line ${lines[next]!.no}: unexpected indentation`);
  return value;
}

function scalar(text: string, no: number): Value {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === 'object' && v !== null && Object.keys(v).length) throw new Error('flow collection with content');
    return v;
  } catch (e) {
    throw new Error(`line ${no}: ${JSON.stringify(text)} is not a JSON scalar (${(e as Error).message})`);
  }
}

const KEY_LINE = /^("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_./-]*):(?: (.*))?$/;

function key(text: string, no: number): [string, string] {
  const m = KEY_LINE.exec(text);
  if (!m) throw new Error(`line ${no}: ${JSON.stringify(text)} is not "key: value"`);
  const k = m[1]!.startsWith('"') ? (JSON.parse(m[1]!) as string) : m[1]!;
  return [k, m[2] ?? ''];
}

/** Parses the node starting at lines[i] (all its lines at `indent`); returns it and the next index. */
function node(lines: Line[], i: number, indent: number): [Value, number] {
  const first = lines[i]!;
  if (first.indent !== indent) throw new Error(`line ${first.no}: indentation ${first.indent}, expected ${indent}`);
  if (first.text === '-' || first.text.startsWith('- ')) return sequence(lines, i, indent);
  if (KEY_LINE.test(first.text)) return mapping(lines, i, indent);
  return [scalar(first.text, first.no), i + 1];
}

function mapping(lines: Line[], i: number, indent: number): [Value, number] {
  const out: Record<string, Value> = {};
  while (i < lines.length && lines[i]!.indent === indent) {
    const { text, no } = lines[i]!;
    if (text.startsWith('-')) throw new Error(`line ${no}: a sequence item inside a mapping`);
    const [k, rest] = key(text, no);
    if (Object.hasOwn(out, k)) throw new Error(`line ${no}: key ${k} twice`);
    if (rest !== '') {
      out[k] = scalar(rest, no);
      i++;
    } else {
      const child = lines[i + 1];
      if (!child || child.indent <= indent) throw new Error(`line ${no}: ${k} has no value`);
      [out[k], i] = node(lines, i + 1, child.indent);
    }
  }
  if (i < lines.length && lines[i]!.indent > indent) throw new Error(`line ${lines[i]!.no}: unexpected indentation`);
  return [out, i];
}

function sequence(lines: Line[], i: number, indent: number): [Value, number] {
  const out: Value[] = [];
  while (i < lines.length && lines[i]!.indent === indent && (lines[i]!.text === '-' || lines[i]!.text.startsWith('- '))) {
    const { text, no } = lines[i]!;
    if (text === '-') {
      const child = lines[i + 1];
      if (!child || child.indent <= indent) throw new Error(`line ${no}: empty sequence item`);
      let v: Value;
      [v, i] = node(lines, i + 1, child.indent);
      out.push(v);
      continue;
    }
    // "- rest": the item's first line, as if it stood at indent + 2.
    const inner = { indent: indent + 2, text: text.slice(2), no };
    const copy = [...lines.slice(0, i), inner, ...lines.slice(i + 1)];
    let v: Value;
    [v, i] = node(copy, i, indent + 2);
    out.push(v);
  }
  return [out, i];
}

/** The same texts through PyYAML (a complete YAML parser) in one process, or undefined when it is not installed. */
export function yamlViaPython(sources: string[]): { values: Value[] } | undefined {
  const program = 'import sys, json, yaml; print(json.dumps([yaml.safe_load(t) for t in json.load(sys.stdin)]))';
  const r = spawnSync('python3', ['-c', program], { input: JSON.stringify(sources), encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    if (/No module named .?yaml/.test(r.stderr ?? '') || r.error) return undefined;
    throw new Error(`PyYAML refused a document: ${r.stderr.trim().split('\n').at(-1)}`);
  }
  return { values: JSON.parse(r.stdout) as Value[] };
}
