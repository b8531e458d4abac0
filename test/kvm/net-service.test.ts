// User networking through the service's API on real KVM: a VM created with `net` (the library's
// JSON) starts with its port forward, the equivalent command line carries `--net`, and a second
// VM asking for the same host port is refused with one line naming the port (a `host` error: the
// host's port is taken, the configuration is fine), nothing of it started, the first VM running
// on; a stop frees the port for the second.
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../electron/service/errors.ts';
import { createService } from '../../electron/service/service.ts';
import { parseNetOption } from '../../electron/vmm/config/net-config.ts';
import { freePort } from '../support/free-port.ts';
import { kvmAvailable } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

describe.skipIf(!kvmAvailable)('user networking through the service', () => {
  it('starts a VM with a forward; a second VM on the same host port is refused in one line and nothing of it starts', async () => {
    const svc = await createService({ home: tempHome('net-svc') });
    try {
      const port = await freePort();
      const net = parseNetOption(`user,hostfwd=tcp:127.0.0.1:${port}-:22`);
      const a = await svc.createVm({ name: 'net a', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo', net });
      const b = await svc.createVm({ name: 'net b', guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo', net });
      expect((await svc.getVm(a.id)).config.net).toEqual(net);
      const started = await svc.startVm(a.id);
      expect(started.state).toBe('running');
      expect(started.resolved?.commandLine).toContain(`--net user,hostfwd=tcp:127.0.0.1:${port}-:22`);

      let err: unknown;
      try { await svc.startVm(b.id); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).code).toBe('host');
      expect((err as Error).message).toMatch(new RegExp(`^host port ${port} \\(tcp on 127\\.0\\.0\\.1\\) is already in use or cannot be bound: hostfwd=tcp:127\\.0\\.0\\.1:${port}-:22 \\(EADDRINUSE\\)$`));
      expect((await svc.getVm(b.id)).status.state).toBe('stopped');
      expect((await svc.getVm(a.id)).status.state).toBe('running');

      await svc.forceStopVm(a.id);
      expect((await svc.startVm(b.id)).state).toBe('running');
      await svc.forceStopVm(b.id);
    } finally {
      await svc.shutdown();
    }
  }, 60_000);
});
