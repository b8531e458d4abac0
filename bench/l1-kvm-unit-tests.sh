#!/bin/sh
# The whole kvm-unit-tests table (bench/kvm-unit-tests.ts) inside the nested lane's L1, where KVM
# has hardware semantics: every x86 test in scope under Unhalt and under QEMU -cpu host on L1's
# KVM. From the checkout, on the host (the suite is built there first, cached):
#
#   node native/guest/kvm-unit-tests/build.mjs && \
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-kvm-unit-tests.sh npm test -- nested
#
# L1 runs this instead of its checks (the lane then says no file ran: expected); the table is in
# test/artifacts/nested/l1.1/results/script.log. A test that hangs is cut at twice its own time-out.
# Some rows only: add unhalt.kut_only=NAME,NAME to UNHALT_NESTED_L1_APPEND (L1's command line).
cd /project || exit 1
only=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^unhalt\.kut_only=//p')
node bench/kvm-unit-tests.ts --timeout-scale 2 ${only:+--only "$only"} 2>&1 || echo "kvm-unit-tests table failed: $?"
