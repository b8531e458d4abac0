// Every relative link in the project's documents resolves: README.md, CHANGELOG.md, docs/*.md and
// bench/*.md name files (and images) that exist, and a `#section` names a heading the target has,
// by GitHub's anchor rule. Web addresses are not followed.
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = [
  'README.md',
  'CHANGELOG.md',
  ...['docs', 'bench'].flatMap((d) => readdirSync(join(ROOT, d)).filter((f) => f.endsWith('.md')).map((f) => `${d}/${f}`)),
];

/** Markdown without its fenced code blocks and inline code, where a bracket is no link. */
const prose = (md: string): string => md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');

/** GitHub's anchor of a heading: lower case, only letters, digits, spaces, '-' and '_', spaces to '-'; repeats get -1, -2, … */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of md.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Each relative link target of a document (links and images), as written. */
function links(md: string): string[] {
  return [...prose(md).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('the documents\' relative links', () => {
  it('finds the anchors GitHub makes', () => {
    expect(anchors('## The UI files on a host without KVM (test/support/e2e-files.ts)\n'))
      .toEqual(new Set(['the-ui-files-on-a-host-without-kvm-testsupporte2e-filests']));
    expect(anchors('# A\n## A\n```\n# not a heading\n```\n')).toEqual(new Set(['a', 'a-1']));
    expect(links('[x](docs/a.md#b) ![i](docs/images/i.png) [w](https://example.com) `[c](no.md)`')).toEqual(['docs/a.md#b', 'docs/images/i.png']);
  });

  it.each(DOCS)('%s: every relative link names a file or heading that exists', (doc) => {
    const text = readFileSync(join(ROOT, doc), 'utf8');
    const broken: string[] = [];
    for (const target of links(text)) {
      const [path, hash] = target.split('#', 2) as [string, string | undefined];
      const file = path ? join(ROOT, dirname(doc), decodeURIComponent(path)) : join(ROOT, doc);
      if (!existsSync(file)) {
        const hint = relative(ROOT, file).startsWith('docs/images/') ? ' (node scripts/screenshots.mjs makes the README\'s images)' : '';
        broken.push(`${target}: no such file ${relative(ROOT, file)}${hint}`);
        continue;
      }
      if (hash && file.endsWith('.md') && statSync(file).isFile() && !anchors(readFileSync(file, 'utf8')).has(hash)) {
        broken.push(`${target}: ${relative(ROOT, file)} has no heading with the anchor #${hash}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
