import { useEffect } from 'react';
import { onThemeChange, palette } from '../lib/theme.ts';
import { setConsoleTheme } from './terminals.ts';

/** Keeps every terminal's colours in step with the app theme. */
export function useConsoleTheme(): void {
  useEffect(() => {
    const apply = () => {
      const p = palette();
      setConsoleTheme({ background: p.termBg, foreground: p.termFg, cursor: p.termFg, selectionBackground: p.accent + '66' });
    };
    apply();
    return onThemeChange(apply);
  }, []);
}
