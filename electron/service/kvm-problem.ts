// The one sentence for "this process cannot open KVM": the cause the open gave, with its fix
// (native/kvm/kvm.ts), behind one prefix. The app shows it once (HostInfo.kvmProblem) and a
// start is refused with the very same words.
export function kvmProblem(e: unknown): string {
  return `KVM is not usable on this host: ${e instanceof Error ? e.message : String(e)}`;
}
