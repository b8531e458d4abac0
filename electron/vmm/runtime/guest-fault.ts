// The one line a user reads for an unhandled exception the guest reported on its agent channel
// (`@u1 fault vector=N error_code=N rip=N cpu=N`, docs/guest-contract.md).

/** The fields of a `@u1 fault` event, as the agent line reader parsed them. */
export type GuestFault = Record<string, number>;

const EXCEPTION_NAMES: Record<number, string> = {
  0: '#DE divide error', 1: '#DB debug', 3: '#BP breakpoint', 4: '#OF overflow', 5: '#BR bound range', 6: '#UD invalid opcode',
  7: '#NM device not available', 8: '#DF double fault', 10: '#TS invalid TSS', 11: '#NP segment not present',
  12: '#SS stack fault', 13: '#GP general protection', 14: '#PF page fault', 16: '#MF x87 error', 17: '#AC alignment check',
  18: '#MC machine check', 19: '#XM SIMD error',
};

/** One line for a `@u1 fault vector=N error_code=N rip=N cpu=N` event. */
export function describeGuestFault(f: GuestFault): string {
  const vector = f.vector;
  const name = vector === undefined ? 'an exception' : `${EXCEPTION_NAMES[vector] ?? 'exception'} (vector ${vector})`;
  const rip = f.rip === undefined ? '' : ` at rip 0x${BigInt.asUintN(64, BigInt(f.rip)).toString(16)}`;
  const code = f.error_code ? `, error code 0x${f.error_code.toString(16)}` : '';
  const cpu = f.cpu === undefined ? '' : ` on CPU ${f.cpu}`;
  return `the guest reported an unhandled ${name}${rip}${code}${cpu}`;
}
