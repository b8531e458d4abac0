#!/bin/sh
# The virtio benches inside the nested lane's L1 (hardware-semantics KVM under QEMU TCG), where a
# host has no KVM of its own or only PVM: our VMM and QEMU (with L1's KVM) on the same probe guest,
# alternating, as on a host. Absolute figures there are 10-50x off (everything runs emulated);
# only the ratios mean something. Runs are long enough that a JIT's warm-up (V8's, which under
# emulation takes seconds) is not most of what is timed. From the checkout, on the host:
#
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 UNHALT_NESTED_L1_CPUS=2 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-virtio.sh npm test -- nested
#
# L1 runs this instead of its checks and prints what it wrote (the lane then says no file ran:
# expected). Two L1 CPUs: with one, each VMM's threads (and V8's) queue behind the vCPU's, which
# is a different machine from the one users have (2026-12-02: IOPS 0.23x with one, 0.42-0.51x
# with two at 300 requests, 0.62-0.69x with two at 3000). Five runs a side: in L1 single runs of
# the same build vary 2-3x (QEMU's as much as ours), and three left a ratio that moved 0.67-0.90x
# between identical runs of the lane.
runs=5
cd /project || exit 1
echo "== virtio-blk in L1 (runs=$runs)"
node bench/virtio-blk.ts --runs "$runs" --ops 3000 --seq-kib 8192 || echo "virtio-blk bench failed: $?"
for proto in udp tcp; do
  echo "== virtio-net $proto request-response in L1 (runs=$runs)"
  node bench/virtio-net-rr.ts --proto "$proto" --runs "$runs" --rounds 200 || echo "virtio-net $proto bench failed: $?"
done
