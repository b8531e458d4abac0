// ACPI PM1a fixed-hardware registers, as described by our FADT (firmware/acpi.ts):
//   event block   0x600: PM1_STS (16 bits, write 1 to clear), PM1_EN (16 bits)
//   control block 0x604: PM1_CNT (16 bits); SLP_TYP=5 (our \_S5) with SLP_EN = power off.
// The FADT has SMI_CMD = 0, so the OS must find the machine already in ACPI mode: SCI_EN
// always reads back set. The one event source is the power button (PWRBTN_STS, bit 8): the
// host presses it to ask the guest to shut down; the SCI (IRQ 9, level) is asserted while any
// enabled status bit is set.
// State lives in shared words (enable bits and control bits), so any thread's instance works.

export const ACPI_PM_BASE = 0x600;
export const ACPI_PM_LENGTH = 6; // 0x600-0x603 event block, 0x604-0x605 control block
export const ACPI_PM_STATE_WORDS = 4;
export const SLP_TYP_S5 = 5;

const STS = 0; // state word indices
const EN = 1;
const CNT = 2;

const SCI_EN = 1 << 0;
const PWRBTN = 1 << 8; // in PM1_STS and PM1_EN
export const SCI_IRQ = 9;
const SLP_EN = 1 << 13;
const SLP_TYP_SHIFT = 10;
// CNT bits that are stored: SCI_EN, BM_RLD, GBL_RLS, SLP_TYP. SLP_EN is write-only.
const CNT_STORED = 0x1c07;

export interface AcpiPmIo {
  /** The guest entered S5 (the run ends: exit code 0). */
  onPowerOff(): void;
  /** Drive the SCI line (only called when its level changes). */
  setSci?(level: boolean): void;
}

const SCI_LEVEL = 3; // state word: last SCI level reported (shared, so only changes are reported)
/** Where each register lives in the state words (read-only: for diagnostics and tests that inspect state). */
export const ACPI_PM_STATE_LAYOUT = Object.freeze({ sts: STS, en: EN, cnt: CNT, sciLevel: SCI_LEVEL });

export class AcpiPm {
  private readonly s: Int32Array;
  private readonly io: AcpiPmIo;

  constructor(state: Int32Array, io: AcpiPmIo) {
    this.s = state;
    this.io = io;
  }

  /** `offset` from 0x600; accesses of 1, 2 or 4 bytes, little endian, any alignment. */
  read(offset: number, size: number): number {
    let v = 0;
    for (let i = 0; i < size; i++) v |= this.readByte(offset + i) << (8 * i);
    return v >>> 0;
  }

  write(offset: number, size: number, value: number): void {
    let sleep = false;
    for (let i = 0; i < size; i++) {
      const b = (value >>> (8 * i)) & 0xff;
      const at = offset + i;
      if (at === 0 || at === 1) {
        this.s[STS] &= ~(b << (8 * at)); // write 1 to clear
      } else if (at === 2 || at === 3) {
        const shift = 8 * (at - 2);
        this.s[EN] = (this.s[EN] & ~(0xff << shift)) | (b << shift);
      } else if (at === 4 || at === 5) {
        const shift = 8 * (at - 4);
        const cnt = (this.s[CNT] & ~(0xff << shift)) | (b << shift);
        this.s[CNT] = cnt & CNT_STORED;
        // SLP_EN and SLP_TYP are both in the high byte, so a byte write of it suffices.
        if (at === 5 && cnt & SLP_EN && ((cnt >>> SLP_TYP_SHIFT) & 7) === SLP_TYP_S5) sleep = true;
      }
    }
    this.updateSci();
    if (sleep) this.io.onPowerOff();
  }

  /** The host presses the power button: PWRBTN_STS is set and the SCI raised if the OS enabled it. */
  pressPowerButton(): void {
    this.s[STS] |= PWRBTN;
    this.updateSci();
  }

  /** Whether the guest's OS enabled power-button events (an ACPI-aware OS does). */
  powerButtonEnabled(): boolean {
    return (this.s[EN]! & PWRBTN) !== 0;
  }

  private updateSci(): void {
    const level = (this.s[STS]! & this.s[EN]! & 0xffff) !== 0 ? 1 : 0;
    if (level !== this.s[SCI_LEVEL]) {
      this.s[SCI_LEVEL] = level;
      this.io.setSci?.(level === 1);
    }
  }

  private readByte(at: number): number {
    let reg: number;
    if (at < 2) reg = this.s[STS];
    else if (at < 4) reg = this.s[EN];
    else if (at < 6) reg = this.s[CNT] | SCI_EN;
    else return 0xff;
    return (reg >>> (8 * (at & 1))) & 0xff;
  }
}
