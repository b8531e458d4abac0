// The source's shape, as issue 26 asks it: no import circles between TypeScript files, and no
// file over 600 lines, in electron/, renderer/src/ and native/ (the app's code; tests, benches and
// scripts are not held to it). A failure names each circle as a path from a file back to itself,
// and each long file with its length.
//
// The import graph is read with TypeScript's own parser (no type checking) and a small resolver of
// relative specifiers. Every kind of import counts: `import` and `export ... from` (type-only ones
// too: a circle of types is still two files that cannot be read apart), `import x = require()`,
// `import('...')` with a literal specifier and `typeof import('...')` types. Package imports
// ('node:fs', 'react') are not edges.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
/** Where the rules hold: [folder, the file endings it holds]. */
const SCOPES: readonly (readonly [string, readonly string[]])[] = [
  ['electron', ['.ts']],
  ['renderer/src', ['.ts', '.tsx']],
  ['native', ['.ts']],
];
const MAX_LINES = 600;

/** Every TypeScript file of the scopes, as paths relative to the repository (forward slashes). */
function sourceFiles(root = ROOT): string[] {
  const out: string[] = [];
  const walk = (dir: string, endings: readonly string[]) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel, endings);
      else if (endings.some((e) => entry.name.endsWith(e)) && !entry.name.endsWith('.d.ts')) out.push(rel);
    }
  };
  for (const [dir, endings] of SCOPES) walk(dir, endings);
  return out.sort();
}

/** The module specifiers a file imports, every kind (see the head of this file). */
function importSpecifiers(fileName: string, text: string): string[] {
  const kind = fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, kind);
  const found: string[] = [];
  const literal = (n: ts.Node | undefined) => { if (n && ts.isStringLiteralLike(n)) found.push(n.text); };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) literal(node.moduleReference.expression);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) literal(node.arguments[0]);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal(node.argument.literal);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * The file a relative specifier names (relative to the repository), or undefined for a package
 * or a file that is not TypeScript (a stylesheet, an asset). Throws for a relative TypeScript
 * import that names no file: the graph would silently miss an edge.
 */
function resolveImport(from: string, specifier: string, exists: (rel: string) => boolean): string | undefined {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const bare = specifier.replace(/[?#].*$/, '');
  const base = relative(ROOT, resolve(ROOT, dirname(from), bare)).split(sep).join('/');
  const candidates = /\.(ts|tsx)$/.test(base) ? [base]
    : /\.(js|jsx|mjs)$/.test(base) ? [base.replace(/\.(m?)js(x?)$/, '.$1ts$2'), base] // an emitted name for its source
      : /\.[a-z0-9]+$/i.test(base) ? [] // .css, .svg, .json: not TypeScript
        : [`${base}.ts`, `${base}.tsx`, `${base}/index.ts`, `${base}/index.tsx`];
  const hit = candidates.find(exists);
  if (hit) return hit;
  if (/\.(ts|tsx)$/.test(base) || candidates.length > 1) throw new Error(`${from}: cannot resolve "${specifier}"`);
  return undefined;
}

/** The import graph of the given files: file -> the files of the set it imports. */
function importGraph(files: readonly string[], read: (rel: string) => string, exists: (rel: string) => boolean): Map<string, string[]> {
  const inSet = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const spec of importSpecifiers(file, read(file))) {
      const target = resolveImport(file, spec, exists);
      if (target !== undefined && inSet.has(target)) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

/**
 * The import circles: one per strongly connected component of more than one file (or a file that
 * imports itself), each as a closed path "a -> b -> a" through that component, shortest first
 * from its first file in order. Components found by Tarjan's algorithm (iterative).
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: { node: string; edge: number }[] = [{ node: start, edge: 0 }];
    index.set(start, next); low.set(start, next); next++;
    stack.push(start); onStack.add(start);
    while (work.length) {
      const top = work.at(-1)!;
      const edges = graph.get(top.node) ?? [];
      if (top.edge < edges.length) {
        const to = edges[top.edge++]!;
        if (!index.has(to)) {
          index.set(to, next); low.set(to, next); next++;
          stack.push(to); onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(top.node, Math.min(low.get(top.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(top.node)!));
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        let n: string;
        do {
          n = stack.pop()!;
          onStack.delete(n);
          component.push(n);
        } while (n !== top.node);
        const selfLoop = component.length === 1 && (graph.get(n) ?? []).includes(n);
        if (component.length > 1 || selfLoop) components.push(component.sort());
      }
    }
  }
  return components.map((c) => shortestCycle(graph, new Set(c), c[0]!)).sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** The shortest path from `from` back to itself inside one component (breadth first). */
function shortestCycle(graph: ReadonlyMap<string, readonly string[]>, within: ReadonlySet<string>, from: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [from];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]!;
    for (const to of graph.get(node) ?? []) {
      if (!within.has(to)) continue;
      if (to === from) {
        const path = [from];
        for (let n = node; n !== from; n = cameFrom.get(n)!) path.splice(1, 0, n);
        return [...path, from];
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  return [from, from];
}

function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('the import graph', () => {
  const read = (rel: string) => readFileSync(join(ROOT, rel), 'utf8');
  const exists = (rel: string) => { try { return statSync(join(ROOT, rel)).isFile(); } catch { return false; } };
  const files = sourceFiles();

  it('the resolver and the cycle finder do what they say (a small graph)', () => {
    expect(importSpecifiers('x.ts', [
      "import a from './a.ts';",
      "import type { B } from '../b.ts';",
      "export { c } from './c';",
      "export type * from './d.tsx';",
      "import './side-effect.ts';",
      "import fs from 'node:fs';",
      "const e = await import('./e.ts');",
      "type F = typeof import('./f.ts');",
      "// import { g } from './g.ts';",
      "const s = \"import { h } from './h.ts'\";",
    ].join('\n'))).toEqual(['./a.ts', '../b.ts', './c', './d.tsx', './side-effect.ts', 'node:fs', './e.ts', './f.ts']);
    const have = new Set(['src/a.ts', 'src/b/index.ts', 'src/c.tsx', 'x.ts']);
    const has = (f: string) => have.has(f);
    expect(resolveImport('src/z.ts', './a.ts', has)).toBe('src/a.ts');
    expect(resolveImport('src/z.ts', './a.js', has)).toBe('src/a.ts');
    expect(resolveImport('src/z.ts', './b', has)).toBe('src/b/index.ts');
    expect(resolveImport('src/z.ts', './c', has)).toBe('src/c.tsx');
    expect(resolveImport('src/z.ts', '../x.ts', has)).toBe('x.ts');
    expect(resolveImport('src/z.ts', './styles.css', has)).toBeUndefined();
    expect(resolveImport('src/z.ts', 'react', has)).toBeUndefined();
    expect(() => resolveImport('src/z.ts', './gone.ts', has)).toThrow('src/z.ts: cannot resolve "./gone.ts"');
    expect(importCycles(new Map([
      ['a', ['b']], ['b', ['c']], ['c', ['a', 'd']], ['d', []], ['e', ['e']], ['f', ['g']], ['g', []],
    ]))).toEqual([['a', 'b', 'c', 'a'], ['e', 'e']]);
  });

  it('finds the files (electron/, renderer/src/, native/)', () => {
    expect(files).toContain('electron/service/api.ts');
    expect(files).toContain('renderer/src/App.tsx');
    expect(files).toContain('native/kvm/kvm.ts');
    expect(files.length).toBeGreaterThan(100);
  });

  it('has no import circles', () => {
    const cycles = importCycles(importGraph(files, read, exists));
    expect(cycles.map((c) => c.join(' -> ')), 'import circles (each a path from a file back to itself)').toEqual([]);
  });

  it(`has no file over ${MAX_LINES} lines`, () => {
    const long = files.map((f) => ({ f, lines: lineCount(read(f)) })).filter(({ lines }) => lines > MAX_LINES);
    expect(long.map(({ f, lines }) => `${f}: ${lines} lines`), `files over ${MAX_LINES} lines`).toEqual([]);
  });
});
