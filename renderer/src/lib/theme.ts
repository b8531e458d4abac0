// Light and dark themes: CSS variables under html[data-theme]; 'system' follows
// prefers-color-scheme. Canvas painters (uPlot, sparklines, bar charts, xterm) read the same
// variables through palette() and repaint when the theme changes.
import type { ThemeChoice } from '../state/app.ts';

export type Effective = 'light' | 'dark';

const media = window.matchMedia('(prefers-color-scheme: dark)');
const listeners = new Set<() => void>();
let choice: ThemeChoice = 'system';

export function effectiveTheme(): Effective {
  return choice === 'system' ? (media.matches ? 'dark' : 'light') : choice;
}

export function applyTheme(c: ThemeChoice): void {
  choice = c;
  const eff = effectiveTheme();
  if (document.documentElement.dataset.theme === eff) return;
  document.documentElement.dataset.theme = eff;
  cached = null;
  for (const l of listeners) l();
}

media.addEventListener('change', () => applyTheme(choice));

export function onThemeChange(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export interface Palette {
  bg: string;
  surface: string;
  text: string;
  muted: string;
  grid: string;
  accent: string;
  marker: string;
  good: string;
  bad: string;
  series: string[];
  termBg: string;
  termFg: string;
}

let cached: Palette | null = null;

export function palette(): Palette {
  if (cached) return cached;
  const cs = getComputedStyle(document.documentElement);
  const v = (name: string) => cs.getPropertyValue(name).trim();
  cached = {
    bg: v('--bg'),
    surface: v('--surface'),
    text: v('--text'),
    muted: v('--muted'),
    grid: v('--grid'),
    accent: v('--accent'),
    marker: v('--marker'),
    good: v('--good'),
    bad: v('--bad'),
    series: Array.from({ length: 8 }, (_, i) => v(`--s${i}`)),
    termBg: v('--term-bg'),
    termFg: v('--term-fg'),
  };
  return cached;
}

export function seriesColor(i: number): string {
  const s = palette().series;
  return s[i % s.length] || '#888';
}
