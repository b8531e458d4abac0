#!/usr/bin/env bash
# One command from a fresh clone to the app on a live guest: Node >= 22.18 (fetched from the npm
# registry if the system's is older), dependencies, the probe guest, the UI; then host mode with
# a running 2-vCPU probe VM. Pass --linux to also build the Linux guest kit (apt-get download).
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/node-env.sh

if ! command -v gcc >/dev/null; then
  echo "setup: gcc is needed to build the probe guest: sudo apt-get install gcc" >&2
  exit 1
fi
echo "setup: node $(node --version); installing dependencies"
# Electron's postinstall downloads its binary; where that is impossible (no access to its
# download host) install without it: host mode needs no Electron.
if ! npm ci --no-audit --no-fund; then
  echo "setup: retrying without Electron's binary (host mode works without it)"
  ELECTRON_SKIP_BINARY_DOWNLOAD=1 npm ci --no-audit --no-fund
fi
npm run build:renderer
if [ "${1:-}" = "--linux" ]; then npm run build:linux; fi
node bin/unhalt.mjs doctor || true
# Where the system's Node is too old, the one fetched into .node/bin is what runs Unhalt: say so,
# since later commands in this shell (node bin/unhalt.mjs, npx unhalt, npm test) need it first on PATH.
if [ "$(command -v node)" = "$(pwd)/.node/bin/node" ]; then
  echo "setup: Unhalt runs on Node $(node --version), fetched into $(pwd)/.node/bin (the system's Node: $(PATH="${PATH#"$(pwd)/.node/bin:"}" node --version 2>/dev/null || echo none))."
  echo "setup: for later commands (node bin/unhalt.mjs, npx unhalt), put it first on PATH: export PATH=\"$(pwd)/.node/bin:\$PATH\""
fi
echo "setup: starting host mode (Ctrl-C stops it); open the URL below in a browser on this machine"
exec node bin/unhalt.mjs serve --demo
