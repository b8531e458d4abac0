// Child process for the SIGKILL test: rewrites the VM library as fast as it can, each write a
// complete "generation" (every VM named g<N>-<i>, 1 + N % 7 of them), until it is killed.
import { LibraryStore } from '../../electron/service/library-store.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';

export function generationOf(names: string[]): number {
  return names.length ? Number(/^g(\d+)-/.exec(names[0]!)![1]) : 0;
}

export function generationNames(gen: number): string[] {
  return Array.from({ length: 1 + (gen % 7) }, (_, i) => `g${gen}-${i}`);
}

if (process.argv[1]?.endsWith('library-writer.ts')) {
  const store = await LibraryStore.open(process.argv[2]!, { lock: { timeoutMs: 10_000 } });
  let gen = generationOf(store.list().map((r) => r.config.name));
  // Some bulk so a write takes a while: the kill should land inside one.
  const padding = 'x'.repeat(3000);
  process.stdout.write('ready\n');
  for (;;) {
    gen++;
    const names = generationNames(gen);
    await store.mutate((vms) => {
      vms.length = 0;
      for (const name of names) {
        vms.push({ id: `${name}-id`, config: validateConfig({ name, guest: 'probe', append: `pad=${padding}` }), createdAt: gen, updatedAt: gen });
      }
    });
  }
}
