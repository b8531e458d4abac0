// Usage texts, one per command (printed on stdout by `unhalt COMMAND --help`) and the overview.

export const RUN_USAGE = `usage: unhalt run [--guest probe|linux|custom] [--kernel F] [--initrd F] [--append S] [--cpus N]
                  [--memory MiB] [--name NAME] [--machine TYPE] [--cpu host,FEATURE=on|off,...]
                  [--overcommit cpu-pm=on|off,mem-lock=on|off] [--halt-poll-ns N] [--pin CPU,...]
                  [--guest-halt-poll-ns N] [--pvm-profile on|off] [--rng on|off]
                  [--disk FILE[,readonly=on][,snapshot=on]]...
                  [--net user[,hostfwd=[tcp|udp]:[ADDR]:PORT-[ADDR]:PORT]...|tap=NAME]
                  [--device isa-debug-exit[,iobase=N][,iosize=1|2|4]] [--device pc-testdev]
                  [--agent-log F] [--stats F] [--stats-interval MS] [--timeout S] [--dry-run]
       unhalt run --vm NAME [--agent-log F] [--stats F] [--timeout S] [--dry-run]
Boots one VM (or the library's VM NAME, as saved) with ttyS0 on this terminal (Ctrl-A x quits). A distribution's own Linux:
  --kernel vmlinuz --initrd initrd.img --disk root.img --append 'console=ttyS0 root=/dev/vda1 rw'
(its initrd needs virtio_pci and virtio_blk; docs/own-guest.md).
Exit codes: 0 the guest shut down, 1 bad input or an output that could not be written, 2 the VM
failed (or the guest reported an unhandled exception), 124 --timeout expired, 130/143 stopped by
SIGINT/SIGTERM. With --device isa-debug-exit, a guest's write of V to it ends the run with
(V << 1) | 1 as QEMU's does (kvm-unit-tests: 1 pass, 3 fail, 77 skipped), numbers the codes
above share: judge such a run by the guest's output too.
`;

export const BENCH_USAGE = `usage: unhalt bench --workload NAME --config A='cpus=2,cpu-pm=off' --config B='cpus=2,cpu-pm=on'
                    [--guest probe|linux] [--workload-args S] [--runs N] [--vs-qemu] [--bare]
                    [--deadline S] [--contention N] [--format md|json|csv] [--output F]
       unhalt bench --vm VM --config A='halt-poll-ns=0' --config B='halt-poll-ns=200000'
                    (--workload NAME | (--host-cmd | --guest-cmd) 'CMD' --metric 'REGEX' [--ready 'REGEX']
                    [--higher-is-better] [--unit TEXT] [--save-workload NAME]) [--runs N] ...
An A/B experiment: one workload under two or more configurations; kept under UNHALT_HOME.
--contention N: N CPU-bound processes on the host CPUs the vCPUs may run on during every run
(vCPUs preempted by other work).
--vm: each config is that library VM's configuration with the named knobs changed; its writable
disks are attached snapshot=on for the runs (the images never change). --host-cmd runs on the host
once the console printed --ready, as an argument vector (quotes and backslashes group words; no
shell, no expansion); --guest-cmd runs in the guest through its agent (the Linux guest, or a VM
imported with the tools disk) once it is ready; --metric's one capture group in the command's
output is the figure (lower is better unless --higher-is-better). --save-workload NAME keeps it
for --workload NAME and unhalt tune.
Linux workloads: pipe, messaging, ctx (the agent's), and from the workloads disk, which bench
attaches: perf-pipe, perf-messaging, cyclictest, iperf3-tcp, stress-ng-switch, sockperf-tcp-rr
(docs/own-guest.md).
`;

export const TUNE_USAGE = `usage: unhalt tune VM --workload NAME|SAVED --budget 5m [--goal latency-p50|latency-p99|throughput|host-cpu]
                   [--latency-bound N] [--workload-args S] [--format markdown|json] [--output F]
       unhalt tune --config 'cpus=1,halt-poll-ns=0' [--guest probe|linux] --workload NAME --budget 5m ...
The tuning advisor: searches halt-poll-ns, cpu-pm, kvm-pv-unhalt and pinning (what this host can
run) with alternating runs against the current configuration, within the budget, and recommends
a configuration with its evidence, or to keep the current one. Kept under UNHALT_HOME.
A saved workload (bench --save-workload) runs on the VM as saved; its goal is its metric's direction.
Exit codes as for bench: 0 ok, 1 bad input (nothing ran), 2 runs failed, 130/143 SIGINT/SIGTERM.
`;

export const DOCTOR_USAGE = `usage: unhalt doctor [--json]
Checks this host: /dev/kvm (if it cannot be opened: the cause found and its fix), KVM
capabilities, halt polling, PVM, built guests. The last line sums up: ready, or what to fix first.
`;

export const SELFTEST_USAGE = `usage: unhalt selftest [--kvm-unit-tests TARBALL|DIR] [--only TEST,...] [--exits EXIT,...|none]
                       [--no-suite] [--no-qemu] [--format md|json] [--output F]
Checks the knobs' mechanisms on this host's own KVM with the probe guest (halt polling per VM,
cpu-pm=on, pv-unhalt's kicks; a check this KVM cannot show is "not judged", with why), then runs
kvm-unit-tests' x86 tests in scope (--only: some) and vmexit's exit costs (--exits: some) under
Unhalt and, where QEMU is installed, under QEMU -cpu host on the same KVM. The suite is built
from its upstream source tarball (--kvm-unit-tests, else one in a shared/kvm-unit-tests/ folder
above the checkout; needs gcc and make).
Writes a report to share: host CPU, kernel, KVM and its module parameters, each result.
Exit codes: 0 all passed, 1 bad input or no KVM (nothing ran) or the report could not be
written, 2 a check failed or a test QEMU passes failed under Unhalt, 129/130/143 SIGHUP/SIGINT/
SIGTERM (the run in progress killed, no report).
`;

export const SERVE_USAGE = `usage: unhalt serve [--port N] [--no-open] [--demo]
Host mode: the app in a browser, on 127.0.0.1 with a token in the URL.
`;

export const MACHINES_USAGE = `usage: unhalt machines
Lists the machine types and their default properties.
`;

export const EXPORT_USAGE = `usage: unhalt export VM --format qemu|libvirt|kubevirt [--output F] [--for-host pvm|hardware]
       unhalt export --config 'cpus=2,halt-poll-ns=1000000' [--guest probe|linux] --format F ...
Writes a VM of the library (or a configuration) as a QEMU command line, a libvirt domain or a
KubeVirt VirtualMachine; knobs without an equivalent are listed in its header (docs/export.md).
`;

export const IMPORT_USAGE = `usage: unhalt import IMAGE [--name NAME] [--memory MiB] [--cpus N] [--user NAME]
                     [--ssh-key FILE | --password-file FILE]
A distribution's cloud image (qcow2 or raw) into the library as a VM: its own kernel, initrd and
command line read out of it (no root, nothing booted, the image not written), a cloud-init seed
with your login (the key in --ssh-key, default the first ~/.ssh/*.pub, or the password on the
first line of --password-file), user networking with a forward to the guest's SSH, the tools disk
for the agent. qcow2 is converted to a raw copy under UNHALT_HOME (docs/own-guest.md).
Exit codes: 0 imported, 1 bad input (nothing kept), 130/143 SIGINT/SIGTERM (nothing kept).
`;

export const WATCH_USAGE = `usage: unhalt watch qmp:PATH [--stats F] [--interval MS] [--duration S]
       unhalt watch --list [--json]
Watches a QEMU you run (7.1 or later, -accel kvm) through its QMP socket, read-only: QEMU started
with -qmp unix:PATH,server=on,wait=off. Its vCPUs' KVM stats every --interval ms (default 1000, at
least 100) go to --stats as the NDJSON of unhalt run --stats; without --stats, one summary line per
interval on stderr. Only query-* commands are sent; a socket another client holds (libvirt) is
refused (docs/watch.md). --list shows the QEMUs running here, their QMP sockets and which this
user can watch (from /proc: it connects to none); --json for scripts.
Exit codes: 0 QEMU exited or --duration passed, 1 bad input, a socket that cannot be watched or a
QEMU that stops answering, 130/143 stopped by SIGINT/SIGTERM (the VM runs on).
`;

export const OVERVIEW = `usage: unhalt <command> [options]      (unhalt <command> --help for one command)

commands:
  run       boot a VM with ttyS0 on this terminal (Ctrl-A x quits)
  doctor    check this host: /dev/kvm, KVM capabilities, halt polling, built guests
  selftest  the knobs and kvm-unit-tests on this host's KVM, and a report to share
  machines  list machine types and their default properties
  serve     host mode: the app in a browser, on 127.0.0.1 with a token in the URL
  bench     A/B experiment: one workload under two or more configurations
  tune      the tuning advisor: the knob settings that best serve a goal, with the evidence
  import    a distribution's cloud image (qcow2 or raw) into the library as a VM
  export    a VM as a QEMU command line, a libvirt domain or a KubeVirt VirtualMachine
  watch     a QEMU you run, watched read-only through its QMP socket: its vCPUs' KVM stats

${[RUN_USAGE, BENCH_USAGE, TUNE_USAGE, DOCTOR_USAGE, SELFTEST_USAGE, SERVE_USAGE, IMPORT_USAGE, EXPORT_USAGE, WATCH_USAGE].map((u) => u.split('\n')[0]!.replace(/^usage: /, '')).join('\n')}
`;
