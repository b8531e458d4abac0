ulimit -c unlimited
echo '/results/core.%p.%e' > /proc/sys/kernel/core_pattern
cat /proc/sys/kernel/core_pattern
timeout 900 node node_modules/vitest/vitest.mjs run --project linux test/linux/linux-boot.test.ts 2>&1 | tail -40
ls -la /results
