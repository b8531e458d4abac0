// V8 flags of Unhalt's long-lived processes: `unhalt serve` (bin/unhalt.mjs), the Electron app's
// main process (scripts/start-electron.mjs) and the test runner's (vitest.config.ts). Plain
// JavaScript: bin/unhalt.mjs reads it before anything else is loaded.
//
// On a host with memory protection keys (PKU: most Xeon and EPYC servers) V8 keeps a registry of
// its JIT pages (ThreadIsolation) that can abort a process which creates and ends many isolates —
// worker threads — with "Check failed: jit_page.has_value()" (nodejs/node#64500); CI's kvm lane
// saw it once. vCPU workers are reused across VMs (electron/vmm/vcpu/worker-pool.ts), which takes
// most of that churn away; a process that runs VMs for hours also turns V8's PKU write-protection
// of its own code pages off, which is all this flag changes. `unhalt run` (one VM, then the
// process ends) does without: a re-exec would cost its start a whole Node start-up.
//
// --expose-gc: a vCPU worker left idle between two VMs collects its isolate once, so that it holds
// nothing of the VM it left (electron/vmm/vcpu/vcpu-worker.ts); given at start-up, as V8's own
// documentation asks of its flags (turning one on in a running process may do nothing or worse).
export const LONG_LIVED_V8_FLAGS = ['--no-memory-protection-keys', '--expose-gc'];
