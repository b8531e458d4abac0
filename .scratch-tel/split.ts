import { Sampler } from '../electron/vmm/telemetry/sampler.ts';
import { startProbe } from '../test/support/probe.ts';
const p = await startProbe({ cpus: 4, append: 'scenario=idle ms=30000' });
for (const sub of [false, true, false, true]) {
  const s = new Sampler(p.vm, {}); if (sub) s.subscribe(() => {}); s.start();
  await new Promise(r => setTimeout(r, 5000)); const c = s.cost(); s.stop();
  console.log(sub ? 'with subscriber' : 'no subscriber', (c.cpuNsPerTick/1000).toFixed(1), 'µs/tick');
}
await p.vm.stop();
