// How the wizard asks a shared rule (electron/vmm/config/) about a field: the rules throw their
// message, the wizard shows it beside the field.

/** The message a rule throws, or undefined when it passes. */
export function problem(rule: () => unknown): string | undefined {
  try {
    rule();
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}
