// The one error of the image reader: every refusal a user can cause is one line naming what was
// found and what to do. Strings read from the image are hostile, so a message shows them quoted
// and escaped (quoteFromImage), never raw: a newline in a grub.cfg must not make a second line.

export class ImageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageError';
  }
}

/** A string read from the image as a message may show it: JSON-quoted, ASCII only, bounded. */
export function quoteFromImage(s: string, max = 80): string {
  const quoted = JSON.stringify(s.slice(0, max)).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return s.length > max ? `${quoted}…` : quoted;
}
