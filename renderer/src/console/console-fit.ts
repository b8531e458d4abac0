// How big the console's font is: a serial console has no size negotiation, and the guest's
// kernel, getty and probe write 80-column lines, so the terminal keeps 80 columns by shrinking
// its font (down to a readable floor) before it lets a narrow column scroll sideways.

export const CONSOLE_COLUMNS = 80;
export const CONSOLE_FONT_MAX = 13;
export const CONSOLE_FONT_MIN = 10;

/**
 * The font size that fits `CONSOLE_COLUMNS` where `cols` columns of `fontSize` fit now
 * (a cell's width is proportional to the font size), in half-pixel steps within the bounds.
 */
export function consoleFontFor(fontSize: number, cols: number): number {
  if (!(cols > 0) || !(fontSize > 0)) return CONSOLE_FONT_MAX;
  const fitting = Math.floor(((fontSize * cols) / CONSOLE_COLUMNS) * 2) / 2;
  return Math.min(CONSOLE_FONT_MAX, Math.max(CONSOLE_FONT_MIN, fitting));
}

/** The terminal's columns: what fits, but never fewer than a guest writes (the rest scrolls). */
export function consoleColumnsFor(fittingCols: number): number {
  return Math.max(CONSOLE_COLUMNS, Math.floor(fittingCols));
}
