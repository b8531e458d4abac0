// Test support: a KVM counter summed over a VM's vCPUs, from each vCPU's newest sample.
import type { Sampler } from '../../electron/vmm/telemetry/sampler.ts';

export function vcpuTotal(s: Sampler, field: string): number {
  const newest = new Map<number, Record<string, unknown>>();
  for (const r of s.records()) newest.set(r.vcpu, r as unknown as Record<string, unknown>);
  return [...newest.values()].reduce((a, r) => a + Number(r[field] ?? 0), 0);
}
