// Where a chart writes its markers' labels (knob changes, restarts): pure, unit-tested without a
// browser. A label touches its own dashed line (right of it, or left where the right has no room),
// stays inside the plot (never cut at an edge), never overlaps another label, and is shortened
// with an ellipsis, or left out, rather than drawn far from its line.

export interface MarkerAt {
  /** The line's x in pixels. */
  x: number;
  label: string;
}

export interface PlacedLabel {
  /** The marker's line. */
  x: number;
  /** What is written (the label, or its start with an ellipsis). */
  text: string;
  /** Left edge of the text, its width, and its line (0 = top). */
  tx: number;
  width: number;
  line: number;
}

const MIN_CHARS = 4;

/**
 * Places labels, in the order of their lines, between `left` and `right` on up to `lines` text
 * lines; `pad` is the space between a line and its label and between two labels. Markers whose
 * label fits nowhere get none (their line is still drawn).
 */
export function placeMarkerLabels(markers: readonly MarkerAt[], measure: (s: string) => number, left: number, right: number,
  lines = 3, pad = 3): PlacedLabel[] {
  const taken: [number, number][][] = Array.from({ length: lines }, () => []);
  const free = (line: number, a: number, b: number) => taken[line]!.every(([l, r]) => b + pad <= l || a >= r + pad);
  const placed: PlacedLabel[] = [];
  for (const m of [...markers].sort((a, b) => a.x - b.x)) {
    let done = false;
    for (let chars = m.label.length; chars >= Math.min(MIN_CHARS, m.label.length) && !done; chars--) {
      const text = chars === m.label.length ? m.label : `${m.label.slice(0, chars - 1)}…`;
      const width = measure(text);
      for (let line = 0; line < lines && !done; line++) {
        for (const tx of [m.x + pad, m.x - pad - width]) {
          if (tx < left || tx + width > right || !free(line, tx, tx + width)) continue;
          taken[line]!.push([tx, tx + width]);
          placed.push({ x: m.x, text, tx, width, line });
          done = true;
          break;
        }
      }
    }
  }
  return placed;
}
