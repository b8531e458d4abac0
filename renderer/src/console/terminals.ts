// Per-VM xterm.js terminals, kept outside React: a terminal is created once per VM and lives in
// its own detached element, which the console view adopts while it is on screen and gives back
// when it unmounts. Switching views or resizing the window never loses scrollback or selection.
import { Terminal } from '@xterm/xterm';
import type { ITheme } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { binaryToBytes, textToBinary } from '../api/client.ts';
import { CONSOLE_FONT_MAX, CONSOLE_FONT_MIN, consoleColumnsFor, consoleFontFor } from './console-fit.ts';

export interface ConsoleEntry {
  vmId: string;
  term: Terminal;
  fit: FitAddon;
  /** The terminal's own element; moved into whichever host element shows it. */
  el: HTMLDivElement;
  opened: boolean;
  host: HTMLElement | null;
  observer: ResizeObserver | null;
  fitFrame: number;
}

type Sender = (vmId: string, data: string) => void;

const entries = new Map<string, ConsoleEntry>();
let send: Sender = () => {};
let theme: ITheme = {};

/** Where typed and pasted input goes (set once by the app: api.sendConsole). */
export function setConsoleSender(s: Sender): void {
  send = s;
}

export function consoleFor(vmId: string): ConsoleEntry {
  let e = entries.get(vmId);
  if (e) return e;
  const term = new Terminal({
    scrollback: 10_000,
    convertEol: false,
    cursorBlink: true,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Cascadia Mono", Menlo, monospace',
    fontSize: CONSOLE_FONT_MAX,
    theme,
    allowProposedApi: false,
    // Serial consoles are byte streams: make the terminal send DEL for backspace like most.
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const el = document.createElement('div');
  el.className = 'term-el';
  el.dataset.vmId = vmId;
  e = { vmId, term, fit, el, opened: false, host: null, observer: null, fitFrame: 0 };
  const entry = e;
  term.onData((data) => send(vmId, textToBinary(data)));
  term.onBinary((data) => send(vmId, data));
  // Ctrl+Shift+C / Ctrl+Shift+V copy and paste (plain Ctrl+C goes to the guest).
  term.attachCustomKeyEventHandler((ev) => {
    // Shift+Tab is left to the browser: it moves focus out of the terminal (keyboard users).
    if (ev.key === 'Tab' && ev.shiftKey && !ev.ctrlKey && !ev.altKey) return false;
    if (ev.type !== 'keydown' || !ev.ctrlKey || !ev.shiftKey) return true;
    const k = ev.key.toLowerCase();
    if (k === 'c') {
      void copySelection(entry);
      ev.preventDefault();
      return false;
    }
    if (k === 'v') {
      void pasteClipboard(entry);
      ev.preventDefault();
      return false;
    }
    return true;
  });
  entries.set(vmId, e);
  return e;
}

/** Shows a VM's terminal inside `host` (fit to its size, refit when it resizes). */
export function attachConsole(vmId: string, host: HTMLElement): () => void {
  const e = consoleFor(vmId);
  if (e.host && e.host !== host) detach(e);
  host.appendChild(e.el);
  e.host = host;
  if (!e.opened) {
    e.term.open(e.el);
    e.opened = true;
  }
  refit(e);
  e.observer = new ResizeObserver(() => scheduleFit(e));
  e.observer.observe(host);
  return () => {
    if (e.host === host) detach(e);
  };
}

function detach(e: ConsoleEntry): void {
  e.observer?.disconnect();
  e.observer = null;
  if (e.fitFrame) cancelAnimationFrame(e.fitFrame);
  e.fitFrame = 0;
  e.el.remove();
  e.host = null;
}

function scheduleFit(e: ConsoleEntry): void {
  if (e.fitFrame) return;
  e.fitFrame = requestAnimationFrame(() => {
    e.fitFrame = 0;
    refit(e);
  });
}

function refit(e: ConsoleEntry): void {
  if (!e.host || !e.el.isConnected) return;
  const r = e.host.getBoundingClientRect();
  if (r.width < 20 || r.height < 20) return;
  try {
    // Shrink (or grow back) the font until 80 columns fit; a cell's width rounds to device
    // pixels, so a second look corrects a size that came out half a pixel too large.
    let dims = e.fit.proposeDimensions();
    for (let i = 0; i < 4 && dims; i++) {
      const size = e.term.options.fontSize ?? CONSOLE_FONT_MAX;
      let next = consoleFontFor(size, dims.cols);
      if (next === size && consoleColumnsFor(dims.cols) > dims.cols && size > CONSOLE_FONT_MIN) next = size - 0.5;
      if (next === size) break;
      e.term.options.fontSize = next;
      dims = e.fit.proposeDimensions();
    }
    if (!dims || !Number.isFinite(dims.cols) || !Number.isFinite(dims.rows)) return;
    const cols = consoleColumnsFor(dims.cols);
    if (cols !== e.term.cols || dims.rows !== e.term.rows) e.term.resize(cols, Math.max(2, dims.rows));
  } catch {
    /* not yet measurable */
  }
}

/** Console output (a latin1 binary string from the service). */
export function writeConsole(vmId: string, data: string): void {
  if (!data) return;
  consoleFor(vmId).term.write(binaryToBytes(data));
}

/** Clears a terminal before a backfill replays its scrollback. */
export function resetConsole(vmId: string): void {
  const e = entries.get(vmId);
  if (e) e.term.reset();
}

export function disposeConsole(vmId: string): void {
  const e = entries.get(vmId);
  if (!e) return;
  detach(e);
  e.term.dispose();
  entries.delete(vmId);
}

export function focusConsole(vmId: string): void {
  entries.get(vmId)?.term.focus();
}

export async function copySelection(e: ConsoleEntry): Promise<boolean> {
  const text = e.term.getSelection();
  if (!text) return false;
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

export async function pasteClipboard(e: ConsoleEntry): Promise<boolean> {
  try {
    const text = await navigator.clipboard.readText();
    if (text) e.term.paste(text);
    return true;
  } catch {
    return false;
  }
}

/** The visible and scrollback text of a VM's console (used by the end-to-end test hook). */
export function consoleText(vmId: string): string {
  const e = entries.get(vmId);
  if (!e) return '';
  const buf = e.term.buffer.active;
  const lines: string[] = [];
  for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? '');
  return lines.join('\n').replace(/\n+$/, '');
}

/** The console's size in cells and font (the end-to-end test hook: guests write 80 columns). */
export function consoleSize(vmId: string): { cols: number; rows: number; fontSize: number } | undefined {
  const e = entries.get(vmId);
  return e ? { cols: e.term.cols, rows: e.term.rows, fontSize: e.term.options.fontSize ?? CONSOLE_FONT_MAX } : undefined;
}

/** Terminal colours follow the app theme. */
export function setConsoleTheme(t: ITheme): void {
  theme = t;
  for (const e of entries.values()) e.term.options.theme = t;
}
