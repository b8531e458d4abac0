// The ACPI PM timer (PM_TMR, ACPI 6.x 4.8.3.3) at 0x608, next to the PM1a blocks as QEMU's piix4
// and ich9 place it (unhalt-1.2 and later): a free-running 24-bit counter at 3.579545 MHz (the
// FADT's TMR_VAL_EXT clear), read as a 32-bit register. Like QEMU's (acpi_pm_tmr_get), its value is
// computed from a clock at each read rather than kept: here the host's CLOCK_MONOTONIC, which
// every thread reads alike (process.hrtime: exact, unlike performance.now(), whose origin differs
// per thread; one step back across vCPUs would read as a 4.7 s wrap). Unlike QEMU's it runs on
// while the VM is paused. No TMR_STS / TMR_EN: the overflow event is not raised.
// It has no state, so the bus maps it lockFree: a guest that polls it (kvm-unit-tests' vmexit
// inl_from_pmtimer) never contends for the bus lock.

export const PM_TMR_PORT = 0x608;
export const PM_TMR_LENGTH = 4;
export const PM_TIMER_HZ = 3_579_545;
export const PM_TIMER_MASK = 0xffffff;

/** A monotonic clock as process.hrtime gives it: whole seconds and nanoseconds within the second. */
export type HrClock = () => readonly [number, number];

/**
 * Ticks of a 3.579545 MHz counter at `sec` s + `nsec` ns, low 24 bits. Exact in doubles: 2^24 s
 * hold a whole number of wraps, so seconds count modulo 2^24 (their ticks stay below 2^53);
 * nsec * HZ / 1e9 never rounds across an integer; `&` keeps the low 32 bits exactly.
 */
export function pmTimerTicks(sec: number, nsec: number): number {
  return ((sec % 0x1000000) * PM_TIMER_HZ + Math.floor((nsec * PM_TIMER_HZ) / 1e9)) & PM_TIMER_MASK;
}

export class PmTimer {
  private readonly clock: HrClock;

  constructor(clock: HrClock = () => process.hrtime()) {
    this.clock = clock;
  }

  /** The counter's value now. */
  value(): number {
    const [sec, nsec] = this.clock();
    return pmTimerTicks(sec, nsec);
  }

  /** `offset` from 0x608: the register's bytes from there (the bus masks to `size`). */
  read(offset: number, _size: number): number {
    return this.value() >>> (8 * offset);
  }
}
