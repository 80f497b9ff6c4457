"""``actionspace --help`` (and every command's own ``--help``, a typo, a shell completion) builds
the command line without loading the runtime: each command imports what it runs when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("actionspace.runtime", "actionspace.pipeline", "actionspace.plan", "actionspace.discovery", "numpy")
"""What a call needs and the command line does not (numpy alone took 60 ms to import here)."""


def _loaded_by(*argv: str) -> list[str]:
    script = (
        "import sys\n"
        f"sys.argv = ['actionspace', *{list(argv)!r}]\n"
        "from actionspace.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import json\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m in {HEAVY!r})))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_top_level_help_loads_none_of_the_runtime() -> None:
    assert _loaded_by("--help") == []


def test_a_command_s_help_loads_none_of_the_runtime() -> None:
    commands = (("eval", "agentdojo"), ("plan",), ("serve",), ("worker",), ("bench",), ("gateway",))
    for argv in commands:
        assert _loaded_by(*argv, "--help") == [], argv


def test_a_command_that_runs_still_finds_what_it_needs() -> None:
    argv = [sys.executable, "-m", "actionspace.cli", "plan", "schema"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["type"] == "object"
