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
echo "setup: starting host mode (Ctrl-C stops it); open the URL below in a browser on this machine"
exec node bin/unhalt.mjs serve --demo
