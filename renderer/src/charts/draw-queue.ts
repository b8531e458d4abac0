// Spreads chart redraws over animation frames: every chart with new data redraws at most once
// per batch of samples, and only one (two when many wait) per frame, so a frame never carries all
// the charts' canvas work (software-rasterized canvases make that a long task otherwise).
type Draw = () => void;

const queue = new Set<Draw>();
let frame = 0;

function run(): void {
  frame = 0;
  const n = queue.size > 8 ? 2 : 1;
  let i = 0;
  for (const d of queue) {
    queue.delete(d);
    try {
      d();
    } catch (e) {
      console.error('unhalt: chart redraw failed', e);
    }
    if (++i >= n) break;
  }
  if (queue.size) schedule();
}

function schedule(): void {
  if (frame) return;
  frame = document.visibilityState === 'hidden' ? (setTimeout(run, 100) as unknown as number) : requestAnimationFrame(run);
}

/** Queues a redraw (a no-op if this one is already waiting). */
export function queueDraw(d: Draw): void {
  queue.add(d);
  schedule();
}

/** Drops a pending redraw (the chart went away). */
export function cancelDraw(d: Draw): void {
  queue.delete(d);
}
