ulimit -c unlimited
echo '/results/core.%p.%e' > /proc/sys/kernel/core_pattern
ps | grep usleep | head -3
timeout 1800 node node_modules/vitest/vitest.mjs run --project linux 2>&1 | grep -vE "^\s*$" | tail -60
ls -la /results
