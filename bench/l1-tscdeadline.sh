#!/bin/sh
# bench/tscdeadline-latency.ts inside the nested lane's L1 (hardware-semantics KVM, emulated:
# ratios, not sizes). From the checkout, on the host (the suite is built there first, cached):
#
#   node native/guest/kvm-unit-tests/build.mjs && \
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-tscdeadline.sh npm test -- nested
#
# The table is in test/artifacts/nested/l1.1/results/script.log.
cd /project || exit 1
node bench/tscdeadline-latency.ts --runs "${UNHALT_TSCDEADLINE_RUNS:-5}" 2>&1 || echo "tscdeadline-latency failed: $?"
