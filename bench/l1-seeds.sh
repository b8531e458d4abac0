#!/bin/sh
# The reference results of the seeds (pv-unhalt and `perf bench sched messaging`, cpu-pm and
# `perf bench sched pipe`, halt polling and lmbench-style lat_ctx) with their own commands from
# the workloads disk, inside the nested lane's L1: hardware-semantics KVM under QEMU TCG, so the
# direction of each effect, not its size (everything runs 10-50x slower, emulated). From the
# checkout, on the host:
#
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-seeds.sh npm test -- nested
#
# L1 runs this instead of its checks and prints the tables (the lane then says no file ran:
# expected). Each run boots the guest (~30 s in L1): two runs a side, about 22 min in all
# (UNHALT_SEED_RUNS=N for more). One L1 CPU (docs/nested.md: two fault now and then with Linux guests), so a guest of
# two vCPUs is already overcommitted: its vCPUs take turns on that CPU, the seeds' condition for
# pv-unhalt; --contention 1 adds a busy host process on it. Last, guest-side polling against host
# polling (not a seed: the knob they lead to). bench/README.md has the figures.
runs=${UNHALT_SEED_RUNS:-2}
cd /project || exit 1
bench() { node bin/unhalt.mjs bench --guest linux --runs "$runs" "$@" || echo "bench failed: $?"; }
echo "== perf bench sched messaging, kvm-pv-unhalt off / on, 2 vCPUs (runs=$runs)"
bench --workload perf-messaging --workload-args 'groups=2 loops=20' \
  --config off='cpus=2,kvm-pv-unhalt=off' --config on='cpus=2,kvm-pv-unhalt=on'
echo "== perf bench sched messaging, kvm-pv-unhalt off / on, 2 vCPUs, one busy host process (runs=$runs)"
bench --workload perf-messaging --workload-args 'groups=2 loops=20' --contention 1 \
  --config off='cpus=2,kvm-pv-unhalt=off' --config on='cpus=2,kvm-pv-unhalt=on'
echo "== perf bench sched pipe, cpu-pm off / on, 2 vCPUs (runs=$runs)"
bench --workload perf-pipe --workload-args 'loops=20000' \
  --config off='cpus=2' --config on='cpus=2,cpu-pm=on'
echo "== the agent's pipe (perf's within 20 %: bench/pipe-truth.ts), cpu-pm off / on, and bare L1 (runs=$runs)"
bench --workload pipe --workload-args 'loops=20000' --bare \
  --config off='cpus=2' --config on='cpus=2,cpu-pm=on'
for cell in 'procs=2 size_kb=0' 'procs=16 size_kb=64'; do
  # 2 ms, not the host default of 200 us: in L1 a wake-up takes longer than 200 us, and KVM
  # grows a poll window only on halts shorter than its maximum (nothing would poll).
  echo "== lat_ctx $cell, halt polling off / on (2 ms), 2 vCPUs (runs=$runs)"
  bench --workload ctx --workload-args "$cell loops=2000" \
    --config off='cpus=2,halt-poll-ns=0' --config on='cpus=2,halt-poll-ns=2000000'
done
echo "== guest-side polling: lat_ctx procs=2 size_kb=0 with host polling (2 ms), guest polling (cpuidle-haltpoll), both (runs=$runs)"
bench --workload ctx --workload-args 'procs=2 size_kb=0 loops=2000' \
  --config host='cpus=2,halt-poll-ns=2000000' \
  --config guest='cpus=2,halt-poll-ns=2000000,guest-halt-poll-ns=2000000' \
  --config both='cpus=2,halt-poll-ns=2000000,guest-halt-poll-ns=2000000,kvm-poll-control=off'
