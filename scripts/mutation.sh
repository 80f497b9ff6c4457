#!/usr/bin/env bash
# Mutation testing of the information-flow policy modules (policy/flow.py, flow_policies.py,
# labels.py, and the value-provenance modules provenance.py, matching.py and arguments.py) with mutmut, configured in pyproject.toml [tool.mutmut]: only those modules are
# mutated and only the tests under tests/policy that exercise them run against each mutant.
#
# It runs in a temporary copy of the project, so the checkout gets no mutants/ directory.
# Prints mutmut's results and the score (killed / total); exits non-zero below MIN_SCORE (%).
#
#   scripts/mutation.sh            # needs the dev extra (pip install -e .[dev])
#   MIN_SCORE=90 MAX_CHILDREN=2 scripts/mutation.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python
MIN_SCORE="${MIN_SCORE:-90}"
MAX_CHILDREN="${MAX_CHILDREN:-2}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cp -r "$ROOT/src" "$ROOT/tests" "$ROOT/pyproject.toml" "$WORK/"
find "$WORK" -name __pycache__ -type d -prune -exec rm -rf {} +
cd "$WORK"
"$PYTHON" -m mutmut run --max-children "$MAX_CHILDREN" >mutmut.log 2>&1 || { tail -40 mutmut.log; exit 1; }
"$PYTHON" -m mutmut export-cicd-stats >/dev/null
status=0
"$PYTHON" - "$MIN_SCORE" <<'PY' || status=$?
import json
import sys

stats = json.load(open("mutants/mutmut-cicd-stats.json"))
killed = stats["killed"] + stats.get("timeout", 0)
total = stats["total"] - stats.get("skipped", 0)
score = 100.0 * killed / total if total else 0.0
print(json.dumps(stats))
print(f"mutation score: {killed}/{total} killed = {score:.1f} %")
sys.exit(0 if score >= float(sys.argv[1]) else 1)
PY
"$PYTHON" -m mutmut results 2>/dev/null | grep -v ": killed" | head -80 || true
exit $status
