// Word offsets of the parts of one shared state buffer, computed from a list of parts rather
// than written by hand: parts cannot overlap, and a new part is one more entry in the list.

/** One part: its Int32 words, or its words and the word multiple it starts at (2: Float64s inside). */
export type StatePart = number | { readonly words: number; readonly align: number };

/** Each part's first word, and `words`, the buffer's length in words. */
export type StateLayout<K extends string> = Readonly<Record<K | 'words', number>>;

/**
 * Lays `parts` end to end in their order, each at its alignment. Computed once, at load: every
 * thread that imports the same list gets the same offsets.
 */
export function layOut<K extends string>(parts: readonly (readonly [K, StatePart])[]): StateLayout<K> {
  const out: Record<string, number> = {};
  let at = 0;
  for (const [name, part] of parts) {
    const { words, align } = typeof part === 'number' ? { words: part, align: 1 } : part;
    if (name === 'words' || Object.hasOwn(out, name)) throw new Error(`state layout: part ${name} named twice`);
    if (!Number.isInteger(words) || words < 0 || !Number.isInteger(align) || align < 1) throw new RangeError(`state layout: bad size of ${name}`);
    at = Math.ceil(at / align) * align;
    out[name] = at;
    at += words;
  }
  out['words'] = at;
  return Object.freeze(out) as StateLayout<K>;
}
