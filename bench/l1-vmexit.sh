#!/bin/sh
# bench/vmexit.ts inside the nested lane's L1 (hardware-semantics KVM, emulated: ratios, not
# sizes). From the checkout, on the host (the suite is built there first, cached):
#
#   node native/guest/kvm-unit-tests/build.mjs && \
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-vmexit.sh npm test -- nested
#
# The table is in test/artifacts/nested/l1.1/results/script.log.
# Fewer runs or exits: unhalt.vmexit_runs=N, unhalt.vmexit_exits=A,B on L1's command line
# (UNHALT_NESTED_L1_APPEND); unhalt.vmexit_warm=1 times each exit after its warm-up exits (--warm).
cd /project || exit 1
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^unhalt\.$1=//p"; }
runs=$(arg vmexit_runs)
exits=$(arg vmexit_exits)
warm=$(arg vmexit_warm)
node bench/vmexit.ts --runs "${runs:-3}" ${exits:+--exits "$exits"} ${warm:+--warm} 2>&1 || echo "vmexit failed: $?"
