// A user's path as a message shows it (boot files, disk images): printable and bounded.
export function shownPath(path: string): string {
  const printable = path.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > 200 ? `${printable.slice(0, 200)}…` : printable;
}
