// The tools disk's agent files (the workloads disk, label unhalt-workloads, built by
// build-workloads-disk.mjs): what a distribution's guest needs to run Unhalt's agent from it.
//
//   agent/unhalt-agent          the kit's static agent (build-workloads.mjs, gcc -static)
//   agent/unhalt-agent.service  systemd: ExecStart=/opt/workloads/agent/unhalt-agent /dev/ttyS1,
//                               Restart=always
//   agent/start-agent           POSIX sh for sysvinit / busybox init: the same, in a restart loop
//
// The NoCloud seed (electron/vmm/image/nocloud-seed.ts) mounts the disk at /opt/workloads and
// starts one of them. A module of its own so tests can read the list without running the build.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workloadInputs } from './build-workloads.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const AGENT_UNIT_SRC = join(here, 'agent', 'unhalt-agent.service');
export const START_AGENT_SRC = join(here, 'agent', 'start-agent');
/** Where the disk is mounted in a guest (the kit's /init and the seed agree). */
export const TOOLS_MOUNT = '/opt/workloads';

/**
 * The agent files on the disk: `path` inside the disk, `from` the file to copy, `mode`.
 * `agentBinary` is the static agent built for the guest.
 */
export function toolsDiskAgentFiles(agentBinary) {
  return [
    { path: 'agent/unhalt-agent', from: agentBinary, mode: 0o755 },
    { path: 'agent/unhalt-agent.service', from: AGENT_UNIT_SRC, mode: 0o644 },
    { path: 'agent/start-agent', from: START_AGENT_SRC, mode: 0o755 },
  ];
}

/** Every source whose change means a new disk: the agent's sources, the unit, the script, this. */
export function toolsDiskInputs() {
  return [...workloadInputs(), AGENT_UNIT_SRC, START_AGENT_SRC, fileURLToPath(import.meta.url)];
}
