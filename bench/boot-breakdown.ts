// Where `unhalt run` spends its time until the guest's first ttyS0 line: the real CLI path
// (the same compile-cache set-up as bin/unhalt.mjs, then electron/cli.ts's main()) with
// timestamps taken around VirtualMachine's phases by wrapping its methods from outside (no file
// of the VMM changes). Run by bench/boot-time.ts in a child process, or by hand:
//
//   node bench/boot-breakdown.ts MARKS.json -- run --append scenario=hello [...unhalt run options]
//
// MARKS.json gets milliseconds since this process's time origin (performance.now()).
// A phase whose method is not found (renamed) is simply absent.
import module from 'node:module';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { currentBundle } from '../bin/bundle.mjs';

const marks: Record<string, number> = { script: performance.now() };
const mark = (name: string) => { marks[name] ??= performance.now(); };
const [marksFile, sep, ...cliArgs] = process.argv.slice(2);
if (!marksFile || sep !== '--') {
  process.stderr.write('usage: node bench/boot-breakdown.ts MARKS.json -- run [unhalt run options]\n');
  process.exit(1);
}
process.on('exit', () => {
  mark('processExitEvent');
  writeFileSync(marksFile, JSON.stringify(marks));
});

// As bin/unhalt.mjs does: the compile cache, the bundle while it is current (else the sources).
// (An older bin/unhalt.mjs also started vCPU 0's worker here; `unhalt run` now runs vCPU 0 on the
// main thread first and starts workers itself: electron/cli/run.ts.)
process.env.NODE_COMPILE_CACHE ??= `${tmpdir()}/unhalt-compile-cache`;
module.enableCompileCache?.(process.env.NODE_COMPILE_CACHE);
const root = new URL('../', import.meta.url);
const bundle = process.env.UNHALT_SOURCES === '1' ? null : currentBundle(root);
const entry = (name: string, source: string) => (bundle ? new URL(`${name}.mjs`, bundle) : new URL(source, root)).href;
marks.fromBundle = bundle ? 1 : 0;

const { main } = await import(entry('cli', 'electron/cli.ts')) as typeof import('../electron/cli.ts');
const { VirtualMachine } = await import(entry('vm', 'electron/vmm/vm.ts')) as typeof import('../electron/vmm/vm.ts');
mark('imported');

type AnyFn = (this: unknown, ...a: unknown[]) => unknown;
const proto = VirtualMachine.prototype as unknown as Record<string, AnyFn>;
function wrap(target: Record<string, AnyFn>, name: string, enter: string, leave: string): void {
  const f = target[name];
  if (typeof f !== 'function') return;
  target[name] = function (this: unknown, ...a: unknown[]) {
    mark(enter);
    const r = f.apply(this, a);
    if (r instanceof Promise) return r.then((v) => { mark(leave); return v; });
    mark(leave);
    return r;
  };
}
wrap(VirtualMachine as unknown as Record<string, AnyFn>, 'start', 'startEnter', 'startDone');
wrap(proto, 'build', 'buildEnter', 'buildDone');
// Since the builder/runtime split the build is the builder's (reading the boot files included):
// from the runtime's launch to its attach of the built machine.
for (const [name, at] of [['launch', 'buildEnter'], ['attach', 'buildDone']] as const) {
  const f = proto[name];
  if (typeof f === 'function') proto[name] = function (this: unknown, ...a: unknown[]) { mark(at); return f.apply(this, a); };
}
wrap(proto, 'launchWorkers', 'launchEnter', 'workersReady');
wrap(proto, 'teardown', 'teardownEnter', 'teardownDone');
// vCPU 0 on the main thread (VirtualMachine's firstVcpuOnMainThread): when it first runs there,
// and when (if the guest lives long enough) its worker is started to take it over.
wrap(proto, 'runVcpu0Here', 'vcpu0OnMain', 'vcpu0OnMainReturned');
wrap(proto, 'startVcpu0Worker', 'handoverWorkerSpawn', 'handoverWorkerSpawned');
const spawnWorkers = proto.spawnWorkers;
if (typeof spawnWorkers === 'function') {
  proto.spawnWorkers = function (this: unknown, ...a: unknown[]) {
    mark('spawnEnter');
    const r = spawnWorkers.apply(this, a);
    mark('spawnDone');
    const workers = (this as { workers?: { once(e: string, f: () => void): void }[] }).workers;
    // A prewarmed worker may be online already (then spawn -> online is not on this path).
    workers?.[0]?.once('online', () => mark('worker0Online'));
    return r;
  };
}

// When the first bytes of ttyS1 (the guest's `@u1 boot` line) and of ttyS0 reach the main thread.
const emit = proto.emit;
if (typeof emit === 'function') {
  proto.emit = function (this: unknown, ...a: unknown[]) {
    if (a[0] === 'agent-bytes') mark('firstAgentBytes');
    else if (a[0] === 'console') mark('firstConsoleBytes');
    return emit.apply(this, a);
  };
}

// The first '\n' of ttyS0 as it reaches stdout (what the parent's clock sees).
const write = process.stdout.write.bind(process.stdout) as (...a: unknown[]) => boolean;
process.stdout.write = ((chunk: unknown, ...rest: unknown[]) => {
  if (marks.firstLine === undefined && (typeof chunk === 'string' ? chunk.includes('\n') : (chunk as Uint8Array).includes(0x0a))) mark('firstLine');
  return write(chunk, ...rest);
}) as typeof process.stdout.write;

const code = await main(cliArgs);
mark('mainReturned');
process.exitCode = code;
