// The API's calls on the host's files a guest may be given: the folders added in the settings
// (besides the library's folder, the guest kits and the home folder, always allowed:
// allowed-folders.ts), and disk images made or converted there (raw images, qcow2 -> raw).
import { realpathSync } from 'node:fs';
import type { AllowedFolder, DiskConversionDto } from './api.ts';
import { checkDisk } from '../vmm/config/vm-config.ts';
import { createRawImage } from '../vmm/devices/virtio/disk-image.ts';
import { checkFolderToAdd, confineNewFileToAllowedFolders, confineToAllowedFolders, folderId } from './allowed-folders.ts';
import { DiskConversions } from './disk-conversion.ts';
import { ApiError, toApiError } from './errors.ts';
import type { ServiceState } from './service-state.ts';
import { MAX_ALLOWED_FOLDERS, SettingsFileError, readSettings, writeSettings } from './settings.ts';
import { textArg } from './validate.ts';

export class HostFileCalls {
  private readonly s: ServiceState;
  /** qcow2 -> raw conversions the wizard started (convertDiskImage). */
  private readonly conversions: DiskConversions;

  constructor(state: ServiceState) {
    this.s = state;
    this.conversions = new DiskConversions((conversion) => state.broadcast({ type: 'disk-conversion', conversion }));
  }

  listAllowedFolders(): AllowedFolder[] {
    return this.s.folderStates();
  }

  /** Adds a folder by its real path, pinned to its identity now (a folder added again is pinned anew). */
  addAllowedFolder(rawPath: unknown): AllowedFolder[] {
    const path = checkFolderToAdd(textArg(rawPath, 'folder', 4096));
    const settings = settingsToChange(this.s.layout.home);
    const id = folderId(path);
    if (!settings.allowedFolders.includes(path) && settings.allowedFolders.length >= MAX_ALLOWED_FOLDERS) throw new ApiError('conflict', `at most ${MAX_ALLOWED_FOLDERS} folders can be added`);
    const allowedFolders = settings.allowedFolders.includes(path) ? settings.allowedFolders : [...settings.allowedFolders, path];
    const allowedFolderIds = { ...(settings.allowedFolderIds ?? {}), ...(id ? { [path]: id } : {}) };
    saveSettings(this.s.layout.home, { ...settings, allowedFolders, allowedFolderIds });
    return this.s.folderStates();
  }

  removeAllowedFolder(rawPath: unknown): AllowedFolder[] {
    const given = textArg(rawPath, 'folder', 4096);
    const settings = settingsToChange(this.s.layout.home);
    // Folders are stored by real path; the caller may name one by the path it was added with.
    const path = settings.allowedFolders.includes(given) ? given : realPathOr(given);
    if (!settings.allowedFolders.includes(path)) {
      throw new ApiError('not-found', `${given.slice(0, 200)} is not a folder added in the settings (the library's folder, the guest kits and your home folder are always allowed)`);
    }
    const { [path]: _, ...allowedFolderIds } = settings.allowedFolderIds ?? {};
    saveSettings(this.s.layout.home, { ...settings, allowedFolders: settings.allowedFolders.filter((f) => f !== path), allowedFolderIds });
    return this.s.folderStates();
  }

  async createDiskImage(rawPath: unknown, sizeMiB: unknown): Promise<void> {
    try {
      const path = checkDisk({ path: rawPath }).path;
      // Where a guest may be given files from (the file is not there yet: its folder is resolved).
      confineNewFileToAllowedFolders(path, 'disk', this.s.allowedFolders());
      createRawImage(path, sizeMiB);
    } catch (e) {
      throw toApiError(e, 'invalid');
    }
  }

  async convertDiskImage(rawSource: unknown): Promise<DiskConversionDto> {
    const folders = this.s.allowedFolders();
    try {
      return this.conversions.start(rawSource, {
        existing: (p) => confineToAllowedFolders(p, 'disk', folders),
        created: (p) => confineNewFileToAllowedFolders(p, 'disk', folders),
      });
    } catch (e) {
      throw toApiError(e, 'invalid');
    }
  }

  /** The service shuts down: conversions in progress end (their half-written files removed). */
  stopConversions(): void {
    this.conversions.stopAll();
  }
}

function realPathOr(path: string): string {
  try { return realpathSync.native(path); } catch { return path; }
}

/** The settings about to be changed: a damaged file is refused (never written over), naming its fault. */
function settingsToChange(home: string): ReturnType<typeof readSettings> {
  const settings = readSettings(home);
  if (settings.damaged) throw new ApiError('conflict', settings.damaged);
  return settings;
}

/** writeSettings with a damaged file's refusal (a race with a hand edit) as the API's conflict. */
function saveSettings(home: string, settings: Parameters<typeof writeSettings>[1]): void {
  try {
    writeSettings(home, settings);
  } catch (e) {
    if (e instanceof SettingsFileError) throw new ApiError('conflict', e.message);
    throw e;
  }
}
