// A field's text as the value it denotes, where the schema accepts it (else undefined): what the
// steps show while the user types, and what the draft becomes (draft.ts). The field's message is
// validate.ts's.
import { parseCpuList } from '../../../../electron/vmm/config/knob-syntax.ts';

/** A number field's text as the number it denotes, when the schema accepts it. */
export function typedNumber(text: string, rule: (v: unknown) => number): number | undefined {
  try {
    return rule(text);
  } catch {
    return undefined;
  }
}

/** The pin list as typed: host CPUs, [] for none, undefined when it does not parse. */
export function typedPin(text: string): number[] | undefined {
  if (text.trim() === '') return [];
  try {
    return parseCpuList(text);
  } catch {
    return undefined;
  }
}
