// Console input to a VM, in calls the service takes: a paste of 1 MiB in one sendConsole was
// over host mode's 1 MiB WebSocket message limit (host-server.ts MAX_MESSAGE_BYTES), and over
// the 64 KiB the call accepts (lifecycle-calls.ts): the server closed the connection and the
// paste was lost. Input goes in chunks, each sent after the previous one's reply (the
// connection never carries more than one chunk of a paste), in order per VM.

/** Characters per call: a latin1 string whose JSON (at worst 6 bytes a char) stays far under 1 MiB. */
export const CHUNK_CHARS = 16 * 1024;
/**
 * The most one input may be: what the VMM queues for a guest that is not reading its UART
 * (guest-channels.ts MAX_PENDING_INPUT, 1 MiB). A bigger paste would be cut there; it is refused.
 */
export const MAX_PASTE_CHARS = 1024 * 1024;

/** Splits input into calls of at most `size` characters. */
export function chunkInput(data: string, size = CHUNK_CHARS): string[] {
  const out: string[] = [];
  for (let i = 0; i < data.length; i += size) out.push(data.slice(i, i + size));
  return out;
}

type Send = (vmId: string, data: string) => Promise<void>;
/** A refused paste (a sentence) or a failed call (its error). */
type Report = (vmId: string, problem: unknown) => void;

/** One queue per VM: input is sent in order, a chunk at a time, each awaiting its reply. */
export function consoleInputSender(send: Send, report: Report): (vmId: string, data: string) => void {
  const tails = new Map<string, Promise<void>>();
  return (vmId, data) => {
    if (data.length > MAX_PASTE_CHARS) {
      report(vmId, `a paste of ${(data.length / 1048576).toFixed(1)} MiB is more than the console takes at once (1 MiB): nothing was sent`);
      return;
    }
    const prev = tails.get(vmId) ?? Promise.resolve();
    const next = prev.then(async () => {
      for (const chunk of chunkInput(data)) await send(vmId, chunk);
    }).catch((e: unknown) => report(vmId, e));
    tails.set(vmId, next);
    void next.then(() => { if (tails.get(vmId) === next) tails.delete(vmId); });
  };
}
