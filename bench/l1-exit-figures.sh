#!/bin/sh
# Every kvm-unit-tests figure in one boot of the nested lane's L1: vmexit's cycles per exit
# (bench/l1-vmexit.sh), tscdeadline_latency with halt polling off and on (bench/l1-tscdeadline.sh),
# then the table's rows (bench/l1-kvm-unit-tests.sh; unhalt.kut_only=NAME,... on L1's command line
# for some). From the checkout, on the host:
#
#   node native/guest/kvm-unit-tests/build.mjs && \
#   UNHALT_NESTED_FILES=test/kvm/boot.test.ts UNHALT_NESTED_L1S=1 UNHALT_NESTED_CHECKS_MINUTES=90 \
#     UNHALT_NESTED_L1_APPEND=unhalt.script=/project/bench/l1-exit-figures.sh npm test -- nested
#
# The tables are in test/artifacts/nested/l1.1/results/script.log, one after the other.
here=$(dirname "$0")
sh "$here/l1-vmexit.sh"
sh "$here/l1-tscdeadline.sh"
sh "$here/l1-kvm-unit-tests.sh"
