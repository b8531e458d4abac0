// End to end, in headless Chromium against host mode: a user adds disks in the wizard's Storage
// part (step 3, "Storage & network") — types the path of an image that does not exist yet and creates it there with a
// size, adds a second, existing image and switches it to read-only, tries a qcow2 and is told the
// qemu-img command — sees `--disk ... --disk ...,readonly=on` in the equivalent command line and
// the disks in the summary, creates and starts the VM (the probe's virtio-blk scenario), and the
// guest's console shows the new disk's capacity and its write read back; on the host the image
// holds what the guest wrote, and the read-only image is byte-identical. A qcow2 picked as a disk
// is converted by the app (qemu-img, progress shown) and the VM runs on the raw copy. A disk whose
// writes are thrown away (the snapshot checkbox, off and disabled while read-only wins over it) runs
// the guest's write-and-read-back, and the image is byte-identical with its mtime afterwards.
// Typed and clicked as a person does; screenshots in test/artifacts/virtio-blk/.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { artifact, hook, skipReason, typeInto, useApp, waitFor } from './support.ts';
import { scaled } from '../support/time-scale.ts';
import { missingTool } from '../support/tools.ts';

const reason = skipReason();
if (reason) console.warn(`[e2e] skipped: ${reason}`);

const shot = (name: string) => artifact(`virtio-blk/${name}.png`);
const step = (page: Page) => page.locator('form.step-panel').getAttribute('data-step');
const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
/** The bytes the probe's write puts at byte i (native/guest/probe/virtio_blk.c pattern(), seed 1). */
const pattern = (n: number) => Buffer.from(Uint8Array.from({ length: n }, (_, i) => (37 + i * 7 + (i >> 9)) & 0xff));

async function next(page: Page): Promise<void> {
  const before = await step(page);
  await page.locator('button[data-action="next"]').click();
  await waitFor(`the step after ${before}`, async () => (await step(page)) !== before, 10_000);
}

describe.skipIf(reason !== null)('virtio-blk disks from the wizard to the guest', () => {
  const app = useApp({ width: 1440, height: 1500 });

  it('a disk created in the wizard, a read-only one picked, a qcow2 refused: the guest writes the first, the second stays as it was', async () => {
    const { page } = app;
    // Inside UNHALT_HOME: a folder Unhalt may give to a guest.
    const disks = join(app.home, 'disks');
    mkdirSync(disks);
    const created = join(disks, 'new.img');
    const ro = join(disks, 'shared.img');
    writeFileSync(ro, Uint8Array.from({ length: 64 * 1024 }, (_, i) => (i * 5 + 3) & 0xff));
    const roBefore = sha(ro);
    const qcow2 = join(disks, 'guest.qcow2');
    writeFileSync(qcow2, Buffer.concat([Buffer.from([0x51, 0x46, 0x49, 0xfb, 0, 0, 0, 3]), Buffer.alloc(4088)]));

    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    const name = `blk-${randomBytes(2).toString('hex')}`;
    await typeInto(page, 'Name', name);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('virtio-blk');
    await next(page);
    expect(await step(page)).toBe('resources');
    await next(page);
    expect(await step(page)).toBe('storage');

    // Disk 1: a path where nothing is yet -> "no such file" at the field, and a way to create it.
    await page.getByRole('button', { name: 'Add a disk' }).click();
    await typeInto(page, 'Disk 1 (vda): raw image file', created, { leave: true });
    // The field and, once the service has answered, the step's check line both say it: either will do.
    await page.getByText(`disk ${created}: no such file`).first().waitFor();
    await typeInto(page, 'Size of a new image (MiB)', '4');
    await page.getByRole('button', { name: 'Create image' }).click();
    await page.getByText('Created an empty 4 MiB raw image.').waitFor();
    expect(statSync(created).size).toBe(4 * 1024 * 1024);
    // Nothing on the page still says the file is missing (the service's check line asked again).
    await waitFor('no "no such file" left', async () => (await page.getByText(/no such file/).count()) === 0, 10_000);

    // Disk 2: a qcow2 first — refused with the command that makes it raw — then an existing raw image, read-only.
    await page.getByRole('button', { name: 'Add a disk' }).click();
    await typeInto(page, 'Disk 2 (vdb): raw image file', qcow2, { leave: true });
    await page.getByText(`disk ${qcow2}: is a qcow2 image; disks are raw images: convert it with qemu-img convert -f qcow2 -O raw ${qcow2} ${join(disks, 'guest.raw')}`).first().waitFor();
    await page.screenshot({ path: shot('wizard-qcow2'), fullPage: true });
    await typeInto(page, 'Disk 2 (vdb): raw image file', ro, { leave: true });
    const roSwitch = page.locator('[data-disk="1"]').getByRole('switch', { name: /Read-only/ });
    await roSwitch.click();
    expect(await roSwitch.isChecked()).toBe(true);
    await waitFor('the qcow2 message gone', async () => (await page.getByText(/is a qcow2 image/).count()) === 0, 10_000);
    // The step itself shows its equivalent command line as the disks are picked.
    await waitFor('both disks in the step\'s command line', async () => ((await page.getByTestId('step-cmdline').textContent({ timeout: 1_000 }).catch(() => '')) ?? '').includes(`--disk ${created} --disk ${ro},readonly=on`), 15_000);
    await page.screenshot({ path: shot('wizard-storage'), fullPage: true });

    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await cmd.waitFor({ timeout: 15_000 });
    await waitFor('both disks in the command line', async () => ((await cmd.textContent()) ?? '').includes(`--disk ${created} --disk ${ro},readonly=on`), 15_000);
    expect(await page.locator('dl.summary').textContent()).toContain(`Disksvda ${created}, vdb ${ro} (read-only)`);
    await page.screenshot({ path: shot('wizard-summary'), fullPage: true });
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    expect(await page.getByTestId('config-panel').textContent()).toContain(`Disksvda ${created}, vdb ${ro} (read-only)`);

    await page.locator('button[data-action="start"]').click();
    const text = await waitFor('the guest to use its disk', async () => {
      const t = await hook<string>(page, 'consoleText', vmId);
      return /virtio-blk id new\.img/.test(t) ? t : undefined;
    }, 60_000);
    expect(text).toMatch(/virtio-blk 00:08\.0 capacity 8192 sectors, blk_size 512/);
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    await page.screenshot({ path: shot('console'), fullPage: true });

    // On the host: the guest's pattern at sector 8 of the disk made in the wizard; the read-only one untouched.
    const img = readFileSync(created);
    expect(img.subarray(8 * 512, 16 * 512).equals(pattern(8 * 512))).toBe(true);
    expect(img.subarray(0, 8 * 512).every((b) => b === 0)).toBe(true);
    expect(sha(ro)).toBe(roBefore);
  }, scaled(240_000));

  it('a disk whose writes are thrown away (snapshot): the guest writes and reads back, the image file is unchanged', async () => {
    const { page } = app;
    const dir = join(app.home, 'snap');
    mkdirSync(dir);
    const base = join(dir, 'base.img');
    writeFileSync(base, Uint8Array.from({ length: 256 * 1024 }, (_, i) => (i * 7 + 1) & 0xff));
    const before = sha(base);
    const mtime = statSync(base).mtimeMs;

    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    await typeInto(page, 'Name', `snap-${randomBytes(2).toString('hex')}`);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('virtio-blk');
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');
    await page.getByRole('button', { name: 'Add a disk' }).click();
    await typeInto(page, 'Disk 1 (vda): raw image file', base, { leave: true });
    const disk = page.locator('[data-disk="0"]');
    const snapshot = disk.getByRole('checkbox', { name: /Throw away the guest's writes \(snapshot\)/ });
    const readOnly = disk.getByRole('switch', { name: /Read-only/ });
    await snapshot.click();
    expect(await snapshot.isChecked()).toBe(true);
    // Read-only wins (diskMode): the box goes off and cannot be ticked; switched back, the snapshot is as it was.
    await readOnly.click();
    await waitFor('the snapshot box off and disabled', async () => !(await snapshot.isChecked()) && await snapshot.isDisabled(), 5_000);
    expect(await disk.textContent()).toContain('a read-only disk is never written anyway');
    await waitFor('read-only in the step\'s command line', async () => ((await page.getByTestId('step-cmdline').textContent({ timeout: 1_000 }).catch(() => '')) ?? '').includes(`--disk ${base},readonly=on,snapshot=on`), 15_000);
    await readOnly.click();
    await waitFor('the snapshot box back on', async () => await snapshot.isChecked() && !(await snapshot.isDisabled()), 5_000);
    await waitFor('snapshot=on in the step\'s command line', async () => ((await page.getByTestId('step-cmdline').textContent({ timeout: 1_000 }).catch(() => '')) ?? '').includes(`--disk ${base},snapshot=on`), 15_000);
    await page.screenshot({ path: shot('wizard-snapshot'), fullPage: true });

    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await waitFor('the snapshot disk in the command line', async () => ((await cmd.textContent()) ?? '').includes(`--disk ${base},snapshot=on`), 15_000);
    expect(await page.locator('dl.summary').textContent()).toContain(`Disksvda ${base} (snapshot: the guest's writes are thrown away)`);
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    expect(await page.getByTestId('config-panel').textContent()).toContain(`Disksvda ${base} (snapshot: the guest's writes are thrown away)`);
    // Saved as given: the library keeps the flag.
    const saved = await hook<{ vms: { id: string; config: Record<string, unknown> }[] }>(page, 'state');
    expect(saved.vms.find((v) => v.id === vmId)?.config.disks).toEqual([{ path: base, snapshot: true }]);

    await page.locator('button[data-action="start"]').click();
    const text = await waitFor('the guest to use its disk', async () => {
      const t = await hook<string>(page, 'consoleText', vmId);
      return /virtio-blk id base\.img/.test(t) ? t : undefined;
    }, 60_000);
    // A writable disk to the guest (no ", read-only"), its write and read-back without a failure.
    expect(text).toMatch(/virtio-blk 00:08\.0 capacity 512 sectors, blk_size 512\r?\n/);
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
    expect(await hook<string>(page, 'consoleText', vmId)).not.toMatch(/FAILED/);
    await page.screenshot({ path: shot('snapshot-console'), fullPage: true });
    expect(sha(base)).toBe(before);
    expect(statSync(base).mtimeMs).toBe(mtime);
  }, scaled(240_000));

  it.skipIf(missingTool('qemu-img', 'qemu-utils') !== undefined)('a qcow2 picked as a disk is converted in the app (progress shown), and the VM uses the raw copy', async () => {
    const { page } = app;
    const dir = join(app.home, 'convert');
    mkdirSync(dir);
    const original = join(dir, 'src.img');
    const bytes = Uint8Array.from({ length: 8 * 1024 * 1024 }, (_, i) => (i * 11 + (i >> 10)) & 0xff);
    writeFileSync(original, bytes);
    const qcow2 = join(dir, 'distro.qcow2');
    expect(spawnSync('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', original, qcow2]).status).toBe(0);
    const raw = join(dir, 'distro.raw');

    await app.goto();
    await page.getByRole('button', { name: 'New VM', exact: true }).click();
    await page.getByRole('heading', { name: 'New virtual machine' }).waitFor();
    await typeInto(page, 'Name', `conv-${randomBytes(2).toString('hex')}`);
    await page.getByRole('radio', { name: /Probe/ }).check();
    await page.getByLabel('Scenario', { exact: true }).selectOption('virtio-blk');
    await typeInto(page, 'Parameters', 'sector=0 sectors=8 write=0');
    await next(page);
    await next(page);
    expect(await step(page)).toBe('storage');
    await page.getByRole('button', { name: 'Add a disk' }).click();
    const path = page.getByLabel('Disk 1 (vda): raw image file', { exact: true });
    await typeInto(page, path, qcow2, { leave: true });
    await page.getByText(/is a qcow2 image; disks are raw images: convert it with qemu-img convert/).first().waitFor();
    await page.getByRole('button', { name: 'Convert to a raw image (qemu-img)' }).click();
    await page.getByText(`Converted to ${raw}.`).waitFor({ timeout: 60_000 });
    expect(await page.getByRole('progressbar', { name: 'Converting disk 1' }).getAttribute('value')).toBe('100');
    await waitFor('the disk to take the raw copy', async () => (await path.inputValue()) === raw, 10_000);
    await waitFor('no qcow2 message left', async () => (await page.getByText(/is a qcow2 image/).count()) === 0, 10_000);
    await page.screenshot({ path: shot('wizard-converted'), fullPage: true });
    expect(readFileSync(raw).equals(Buffer.from(bytes))).toBe(true);

    while ((await step(page)) !== 'summary') await next(page);
    const cmd = page.getByTestId('cmdline');
    await waitFor('the raw disk in the command line', async () => ((await cmd.textContent()) ?? '').includes(`--disk ${raw}`), 15_000);
    await page.locator('button[data-action="create"]').click();
    await page.locator('section.vm-view').waitFor();
    const vmId = (await page.locator('section.vm-view').getAttribute('data-vm-id'))!;
    await page.locator('button[data-action="start"]').click();
    const text = await waitFor('the guest to read the converted disk', async () => {
      const t = await hook<string>(page, 'consoleText', vmId);
      return /virtio-blk id distro\.raw/.test(t) ? t : undefined;
    }, 60_000);
    expect(text).toMatch(/virtio-blk 00:08\.0 capacity 16384 sectors/);
    await waitFor('the VM to power off', async () => (await page.getByTestId('vm-state').first().textContent()) === 'stopped', 30_000);
  }, scaled(240_000));
});
