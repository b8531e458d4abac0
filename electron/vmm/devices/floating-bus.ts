// What a read of nothing returns: all ones, as on a bus nobody drives (an unmapped MMIO address,
// a BAR-less function). A loop, not TypedArray.prototype.fill: an MMIO access is at most 8 bytes,
// and fill's builtin (a call into C++ and memset) was a sixth of such an exit's user-space time.
export function readAllOnes(data: Uint8Array, size: number): void {
  for (let i = 0; i < size; i++) data[i] = 0xff;
}
