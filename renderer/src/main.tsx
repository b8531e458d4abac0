import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import '@xterm/xterm/css/xterm.css';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { store } from './state/app.ts';
import { applyTheme } from './lib/theme.ts';
import { App } from './App.tsx';

applyTheme(store.get().theme);
store.subscribe(() => applyTheme(store.get().theme));

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
