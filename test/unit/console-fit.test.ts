import { describe, expect, it } from 'vitest';
import { CONSOLE_COLUMNS, CONSOLE_FONT_MAX, CONSOLE_FONT_MIN, consoleColumnsFor, consoleFontFor } from '../../renderer/src/console/console-fit.ts';

describe('the console keeps 80 columns', () => {
  it('shrinks the font in proportion when fewer columns fit', () => {
    // 66 columns of 13 px fit (the VM page's console column at 1440 px): 80 fit at 10.5 px.
    expect(consoleFontFor(13, 66)).toBe(10.5);
    expect(consoleFontFor(13, 74)).toBe(12);
  });
  it('grows back to its largest size when the column widens', () => {
    expect(consoleFontFor(10.5, 120)).toBe(CONSOLE_FONT_MAX);
    expect(consoleFontFor(CONSOLE_FONT_MAX, CONSOLE_COLUMNS)).toBe(CONSOLE_FONT_MAX);
  });
  it('never goes below a readable size; the columns stay 80 and the rest scrolls', () => {
    expect(consoleFontFor(13, 30)).toBe(CONSOLE_FONT_MIN);
    expect(consoleColumnsFor(61.4)).toBe(CONSOLE_COLUMNS);
    expect(consoleColumnsFor(97.9)).toBe(97);
  });
  it('answers an unmeasured terminal with the largest size', () => {
    expect(consoleFontFor(13, 0)).toBe(CONSOLE_FONT_MAX);
    expect(consoleFontFor(13, Number.NaN)).toBe(CONSOLE_FONT_MAX);
  });
});
