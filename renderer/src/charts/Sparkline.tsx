// A small canvas of the summed halt exits/s over the last minute, redrawn from the telemetry
// store's frame callback (no React state per sample).
import { useEffect, useRef } from 'react';
import { telemetryFor, val } from './telemetry-store.ts';
import { palette, onThemeChange } from '../lib/theme.ts';
import { si } from '../lib/format.ts';

const W = 160;
const H = 32;
const POINTS = 600; // one minute at 10 Hz

export function Sparkline({ vmId, live }: { vmId: string; live: boolean }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const readout = useRef<HTMLSpanElement>(null);
  useEffect(() => {
    const t = telemetryFor(vmId);
    const el = canvas.current!;
    const dpr = window.devicePixelRatio || 1;
    el.width = W * dpr;
    el.height = H * dpr;
    const draw = () => {
      const ctx = el.getContext('2d');
      if (!ctx) return;
      const p = palette();
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      const col = t.samples.cols.get('halt_exits_per_s#sum');
      const n = t.samples.length;
      const from = Math.max(0, n - POINTS);
      let max = 0;
      let sum = 0;
      let count = 0;
      if (col) for (let i = from; i < n; i++) {
        const v = col[i]!;
        if (Number.isNaN(v)) continue;
        if (v > max) max = v;
        sum += v;
        count++;
      }
      ctx.strokeStyle = p.grid;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(0, H - 0.5);
      ctx.lineTo(W, H - 0.5);
      ctx.stroke();
      if (col && n > 1) {
        const scale = max > 0 ? (H - 4) / max : 0;
        ctx.strokeStyle = p.accent;
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        let pen = false;
        for (let i = from; i < n; i++) {
          const v = col[i]!;
          const x = ((i - (n - POINTS)) / (POINTS - 1)) * W;
          if (Number.isNaN(v)) {
            pen = false;
            continue;
          }
          const y = H - 1 - v * scale;
          if (pen) ctx.lineTo(x, y);
          else ctx.moveTo(x, y);
          pen = true;
        }
        ctx.stroke();
      }
      const last = col && n ? val(col[n - 1]) : null;
      // The mean over the minute drawn: the newest sample of a bursty series is mostly 0.
      const mean = count ? sum / count : null;
      if (readout.current) {
        readout.current.textContent = mean === null ? '—' : `mean ${si(mean)}/s`;
        readout.current.title = mean === null ? '' : `halt exits per second over the last minute: mean ${si(mean)}, max ${si(max)}`;
      }
      el.dataset.latest = String(last ?? '');
      el.dataset.mean = String(mean ?? '');
    };
    draw();
    const off = t.listen(draw);
    const offTheme = onThemeChange(draw);
    return () => {
      off();
      offTheme();
    };
  }, [vmId]);
  return (
    <span className={`sparkline ${live ? '' : 'idle'}`}>
      <canvas ref={canvas} style={{ width: W, height: H }} role="img" aria-label="halt exits per second, last minute" />
      <span ref={readout} className="spark-value">—</span>
    </span>
  );
}
