// User-named output paths (issue 13, finding 2): a device, a FIFO or a symlink is written
// through and never replaced; a symlink to a regular file keeps the link; a full device is one
// line naming "disk full"; a stream output is not emptied before begin(). Device nodes are our
// own mknod copies in a temp folder, so a regression can never replace the real /dev/null.
import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OutputError, OutputStream, checkOutputPath, writeOutputFile } from '../../electron/service/output-file.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';

afterAll(removeTempHomes);

/** Character-device copies of /dev/null (1,3) and /dev/full (1,7); undefined where mknod is not allowed. */
function devices(dir: string): { null: string; full: string } | undefined {
  const made = spawnSync('sh', ['-c', `mknod ${dir}/null c 1 3 && mknod ${dir}/full c 1 7`]);
  return made.status === 0 ? { null: join(dir, 'null'), full: join(dir, 'full') } : undefined;
}

const isCharDevice = (p: string) => lstatSync(p).isCharacterDevice();

describe('writeOutputFile', () => {
  const dir = tempHome('out');
  const dev = devices(dir);

  it.skipIf(!dev)('writes through a device node and leaves it a device', () => {
    writeOutputFile(dev!.null, 'result\n', 'the bench output');
    expect(isCharDevice(dev!.null)).toBe(true);
  });

  it.skipIf(!dev)('a full device is "disk full", and stays a device', () => {
    expect(() => writeOutputFile(dev!.full, 'result\n', 'the bench output')).toThrow(OutputError);
    expect(() => writeOutputFile(dev!.full, 'result\n', 'the bench output')).toThrow(/^cannot write the bench output .*full: disk full \(ENOSPC\)$/);
    expect(isCharDevice(dev!.full)).toBe(true);
  });

  it.skipIf(!dev)('a symlink to a device is written through and stays a symlink', () => {
    const link = join(dir, 'to-null');
    symlinkSync(dev!.null, link);
    writeOutputFile(link, 'x');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(isCharDevice(dev!.null)).toBe(true);
  });

  it('a symlink to a regular file updates the file and keeps the link', () => {
    const file = join(dir, 'real.txt');
    const link = join(dir, 'to-real');
    writeFileSync(file, 'old\n');
    symlinkSync(file, link);
    writeOutputFile(link, 'new\n');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(file);
    expect(readFileSync(file, 'utf8')).toBe('new\n');
  });

  it('a dangling symlink creates the file it names', () => {
    const target = join(dir, 'made-through-link.txt');
    const link = join(dir, 'dangling');
    symlinkSync(target, link);
    writeOutputFile(link, 'hello\n');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, 'utf8')).toBe('hello\n');
  });

  it('a FIFO is written through (its reader gets the data) and stays a FIFO', async () => {
    const fifo = join(dir, 'fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const reader = spawn('cat', [fifo]);
    let got = '';
    reader.stdout.on('data', (d) => { got += d; });
    const closed = new Promise((r) => reader.on('close', r));
    writeOutputFile(fifo, 'through the fifo\n');
    await closed;
    expect(got).toBe('through the fifo\n');
    expect(lstatSync(fifo).isFIFO()).toBe(true);
  });

  it('refuses a folder and a missing folder with one line, before any work', () => {
    expect(() => checkOutputPath(dir, 'the bench output')).toThrow(/it is a folder/);
    expect(() => checkOutputPath(join(dir, 'no-such-dir', 'out.md'), 'the bench output')).toThrow(/the folder .*no-such-dir does not exist/);
  });

  it('a regular file is replaced atomically (no temp file left)', () => {
    const sub = join(dir, 'atomic');
    mkdirSync(sub);
    const file = join(sub, 'out.md');
    writeFileSync(file, 'old');
    writeOutputFile(file, 'new');
    expect(readFileSync(file, 'utf8')).toBe('new');
    expect(spawnSync('ls', ['-A', sub]).stdout.toString().trim()).toBe('out.md');
  });
});

describe('OutputStream', () => {
  const dir = tempHome('stream');
  const dev = devices(dir);

  it('opening does not truncate an existing file; begin() does', async () => {
    const file = join(dir, 'agent.log');
    writeFileSync(file, 'previous run\n');
    const out = await OutputStream.open(file, 'the agent log');
    out.stream.write('new run\n'); // held back until begin()
    expect(readFileSync(file, 'utf8')).toBe('previous run\n');
    await out.close(); // a failed start: closed without begin()
    expect(readFileSync(file, 'utf8')).toBe('previous run\n');
    const again = await OutputStream.open(file, 'the agent log');
    await again.begin();
    again.stream.write('this run\n');
    await again.close();
    expect(readFileSync(file, 'utf8')).toBe('this run\n');
  });

  it.skipIf(!dev)('a write error on a full device is kept as one line and reported once', async () => {
    const out = await OutputStream.open(dev!.full, 'the stats file');
    const seen: string[] = [];
    out.onError((m) => seen.push(m));
    await out.begin();
    out.stream.write('{"t":1}\n');
    await out.close();
    expect(seen).toEqual([`cannot write the stats file ${dev!.full}: disk full (ENOSPC)`]);
    expect(out.failure()).toBe(seen[0]);
    expect(isCharDevice(dev!.full)).toBe(true);
  });
});
