#!/usr/bin/env bash
# Makes a separate virtualenv holding mcp-server-sqlite, which is written against the mcp 1.x
# server API and cannot run beside the mcp 2.x that actionspace uses. The MCP client tests start
# that server from this venv (tests/adapters/mcp_fixtures.py calls this script when it is missing).
# Usage: scripts/mcp_sqlite_venv.sh [DIR]   (default: ~/.cache/actionspace/mcp-sqlite-venv)
# Prints the venv's directory.
set -euo pipefail
dir="${1:-${ACTIONSPACE_MCP_SQLITE_VENV:-$HOME/.cache/actionspace/mcp-sqlite-venv}}"
if [ -f "$dir/.complete" ] && [ -x "$dir/bin/mcp-server-sqlite" ]; then
  echo "$dir"
  exit 0
fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"${PYTHON:-python3}" -m venv "$dir"
"$dir/bin/pip" install -q "mcp-server-sqlite==2025.4.25" "mcp>=1.6,<2" >&2
touch "$dir/.complete"
echo "$dir"
