#!/usr/bin/env bash
# Installs Debian's `chromium` package for the web console's browser test (tests/service/test_console_browser.py).
# Idempotent and quiet. The test drives /usr/bin/chromium through Playwright's executable_path; it never
# downloads a browser of its own.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-chromium.sh: run as root (it calls apt-get)" >&2
  exit 1
fi

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if [ ! -x /usr/bin/chromium ]; then
  echo "install-chromium.sh: chromium installed but /usr/bin/chromium is missing" >&2
  exit 1
fi
echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
