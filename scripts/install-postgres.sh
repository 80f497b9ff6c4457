#!/usr/bin/env bash
# Installs the PostgreSQL server binaries (Debian package `postgresql`) for the PostgreSQL store tests.
# Idempotent. Starts nothing: the tests start a throwaway cluster of their own from these binaries.
set -euo pipefail

have_binaries() {
  local bin
  for bin in /usr/lib/postgresql/*/bin; do
    if [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ]; then
      return 0
    fi
  done
  return 1
}

if have_binaries; then
  echo "postgresql binaries present: $(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-postgres.sh: run as root (it calls apt-get)" >&2
  exit 1
fi

# policy-rc.d exit 101 keeps the package's maintainer scripts from starting the system cluster.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  added_policy=1
fi
cleanup() {
  if [ "$added_policy" -eq 1 ]; then
    rm -f "$policy"
  fi
}
trap cleanup EXIT

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql

if ! have_binaries; then
  echo "install-postgres.sh: postgresql installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin" >&2
  exit 1
fi
echo "postgresql binaries installed: $(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
