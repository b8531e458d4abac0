#!/bin/sh
# bench/tscdeadline-latency.ts inside the nested lane's L1 (hardware-semantics KVM, emulated:
# ratios, not sizes). From the checkout, on the host (the suite is built there first, cached):
#
#   node native/guest/kvm-unit-tests/build.mjs && \
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-tscdeadline.sh npm test -- nested
#
# The table is in test/artifacts/nested/l1.1/results/script.log. Runs and wake-ups a run:
# unhalt.tsc_runs=N (default 5), unhalt.tsc_samples=N (default 200: each latency line costs tens
# of ms of serial output in L1) on L1's command line (UNHALT_NESTED_L1_APPEND).
cd /project || exit 1
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^unhalt\.$1=//p"; }
runs=$(arg tsc_runs)
samples=$(arg tsc_samples)
node bench/tscdeadline-latency.ts --runs "${runs:-5}" --samples "${samples:-200}" 2>&1 || echo "tscdeadline-latency failed: $?"
