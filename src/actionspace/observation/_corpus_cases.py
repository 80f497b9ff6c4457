"""Generated tool outputs for the trimming evaluation, each with the facts a decision needs.

Every case is built from a seeded ``random.Random``, so the same seed gives the same bytes. Noise
lines come from small per-case pools; the facts sit where trimming by "first N characters" loses
them: in the middle of 50k-line logs, after thousands of matches in a vendored file, below 100 KB
of inline scripts and navigation.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Case", "Fact", "log_cases", "stream_of"]

FactKind = Literal["text", "exit_code", "hit", "link", "field", "count"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """Something the model must still be able to read after trimming.

    ``text``: a string leaf contains ``value``. ``exit_code``: ``data["exit_code"] == value``.
    ``hit``: a hit at ``value`` (a path) and ``line``, or the grep line ``path:line:`` in a
    string. ``link``: an element whose ``href`` is ``value``, or ``href="value"`` in a string.
    ``field``: an element whose ``name`` is ``value``, or ``name="value"`` in a string.
    ``count``: ``data["total_hits"] == value``.
    """

    kind: FactKind
    value: str | int
    line: int | None = None

    def kept_in(self, data: Any) -> bool:
        """Whether the fact survives in ``data`` (shaped output or a baseline)."""
        if self.kind == "exit_code":
            return isinstance(data, Mapping) and data.get("exit_code") == self.value
        if self.kind == "count":
            return isinstance(data, Mapping) and data.get("total_hits") == self.value
        needle = {
            "text": str(self.value),
            "hit": f"{self.value}:{self.line}:",
            "link": f'href="{self.value}"',
            "field": f'name="{self.value}"',
        }[self.kind]
        return any(self._matches(leaf, needle) for leaf in _leaves(data))

    def _matches(self, leaf: Any, needle: str) -> bool:
        if isinstance(leaf, str):
            return needle in leaf
        if self.kind == "hit":
            line = leaf.get("line", leaf.get("line_number"))
            return bool(leaf.get("path") == self.value and line == self.line)
        if self.kind == "link":
            return bool(leaf.get("href") == self.value)
        if self.kind == "field":
            return bool(leaf.get("name") == self.value)
        return False


def _leaves(data: Any) -> Iterator[Any]:
    """Every string and every object in ``data``."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, Mapping):
        yield data
        for item in data.values():
            yield from _leaves(item)
    elif isinstance(data, list):
        for item in data:
            yield from _leaves(item)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One tool output, the rule meant for it, and its facts."""

    name: str
    rule: str
    build: Callable[[], object]
    """A fresh tool result each call (a streamed result can be consumed only once)."""
    facts: tuple[Fact, ...]


def stream_of(text: str, size: int) -> Callable[[], object]:
    """A result that arrives as UTF-8 byte chunks of ``size``, cut anywhere."""
    raw = text.encode()
    return lambda: (raw[i : i + size] for i in range(0, len(raw), size))


# -- logs ------------------------------------------------------------------------------------

_WORDS = (
    "worker", "request", "handled", "cache", "hit", "miss", "queue", "job", "batch", "flush", "sync",
    "user", "session", "token", "shard", "replica", "index", "compaction", "checkpoint", "upload",
    "chunk", "retry", "scheduled",
)  # fmt: skip
_HERRINGS = (
    "INFO health check ok errors=0 warnings=0",
    "DEBUG error_rate=0.000 p99=41ms",
    "INFO 0 failed, 12 skipped in this shard",
    "tests/test_errors.py::test_error_mapping PASSED",
    "INFO option --fail-fast disabled",
    "INFO rotating /var/log/app/error.log",
)


def _noise(rng: random.Random, count: int) -> list[str]:
    """Timestamped INFO lines, with lines that mention errors without being errors mixed in."""
    pool = [
        f"INFO {' '.join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))} id={rng.randint(1, 99999)}"
        for _ in range(400)
    ]
    pool.extend(_HERRINGS)
    return [
        f"2024-05-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z {line}"
        for i, line in enumerate(rng.choices(pool, k=count))
    ]


def _log(rng: random.Random, block: list[str], tail: list[str], lines: int = 50_000) -> str:
    body = _noise(rng, lines)
    at = rng.randint(lines // 3, 2 * lines // 3)
    return "\n".join([*body[:at], *block, *body[at:], *tail]) + "\n"


def log_cases(seed: int) -> list[Case]:
    """Eleven command logs: compilers, test runners, package managers, services, a clean deploy."""
    rng = random.Random(seed)
    cases: list[Case] = []

    def add(
        name: str, code: int, block: list[str], tail: list[str], facts: list[Fact], stream: bool = False
    ) -> None:
        text = _log(rng, block, tail)
        output = stream_of(text, 4093) if stream else (lambda: text)
        cases.append(
            Case(
                name=name,
                rule="log-v1",
                build=lambda: {"exit_code": code, "output": output()},
                facts=(Fact(kind="exit_code", value=code), *facts),
            )
        )

    add(
        "pytest-failure",
        1,
        ["FAILED tests/test_refunds.py::test_partial_refund - AssertionError: expected 200, got 500"],
        ["=========== 1 failed, 49873 passed in 312.45s ==========="],
        [
            Fact(kind="text", value="AssertionError: expected 200, got 500"),
            Fact(kind="text", value="1 failed, 49873 passed"),
        ],
    )
    frames = [
        f'  File "app/{m}.py", line {rng.randint(10, 400)}, in {m}_step\n    result = {m}(payload)'
        for m in ("api", "jobs", "orders")
    ]
    add(
        "python-traceback",
        1,
        [
            "ERROR [worker-7] job 4711 crashed",
            "Traceback (most recent call last):",
            *frames,
            '  File "app/orders.py", line 88, in load_order',
            "    return rows[0]['customer_id']",
            "KeyError: 'customer_id'",
        ],
        ["INFO worker-7 exiting with status 1"],
        [
            Fact(kind="text", value="KeyError: 'customer_id'"),
            Fact(kind="text", value='File "app/orders.py", line 88, in load_order'),
        ],
    )
    add(
        "gcc-error",
        2,
        [
            "src/parser.c: In function 'parse_expr':",
            "src/parser.c:214:17: error: 'tok' undeclared (first use in this function)",
            "  214 |     return tok->kind;",
            "      |            ^~~",
        ],
        ["make: *** [Makefile:31: build/parser.o] Error 1", "make: *** [Makefile:12: all] Error 2"],
        [
            Fact(kind="text", value="src/parser.c:214:17: error: 'tok' undeclared"),
            Fact(kind="text", value="[Makefile:12: all] Error 2"),
        ],
    )
    add(
        "npm-eresolve",
        1,
        [
            "npm ERR! code ERESOLVE",
            "npm ERR! ERESOLVE unable to resolve dependency tree",
            "npm ERR! Found: react@18.2.0",
            "npm ERR! Could not resolve dependency:",
            'npm ERR! peer react@"^17.0.0" from react-router@5.3.4',
        ],
        ["npm ERR! A complete log of this run can be found in: /root/.npm/_logs/debug-0.log"],
        [
            Fact(kind="text", value="npm ERR! code ERESOLVE"),
            Fact(kind="text", value='peer react@"^17.0.0" from react-router@5.3.4'),
        ],
    )
    add(
        "go-panic",
        2,
        [
            "panic: runtime error: index out of range [5] with length 3",
            "",
            "goroutine 1 [running]:",
            "main.process(...)",
            "\t/app/main.go:42 +0x1d",
            "main.main()",
            "\t/app/main.go:17 +0x25",
        ],
        ["exit status 2"],
        [
            Fact(kind="text", value="index out of range [5] with length 3"),
            Fact(kind="text", value="/app/main.go:42"),
        ],
    )
    add(
        "git-fatal",
        128,
        ["fatal: refusing to merge unrelated histories"],
        ["hint: use --allow-unrelated-histories"],
        [Fact(kind="text", value="refusing to merge unrelated histories")],
    )
    add(
        "cargo-error",
        101,
        [
            "error[E0308]: mismatched types",
            "  --> src/lib.rs:17:5",
            "   |",
            "17 |     count",
            "   |     ^^^^^ expected `u64`, found `i32`",
        ],
        ["error: could not compile `ledger` (lib) due to 1 previous error"],
        [
            Fact(kind="text", value="error[E0308]: mismatched types"),
            Fact(kind="text", value="src/lib.rs:17:5"),
        ],
    )
    java = [f"\tat com.acme.pool.Pool.acquire{n}(Pool.java:{100 + n})" for n in range(40)]
    add(
        "java-caused-by",
        1,
        [
            'Exception in thread "main" java.lang.IllegalStateException: pool exhausted',
            *java,
            "Caused by: java.net.ConnectException: Connection refused (db-primary:5432)",
            *[f"\tat java.net.Socket.connect{n}(Socket.java:{600 + n})" for n in range(15)],
            "\t... 12 more",
        ],
        ["INFO shutdown complete"],
        [
            Fact(kind="text", value="java.lang.IllegalStateException: pool exhausted"),
            Fact(
                kind="text",
                value="Caused by: java.net.ConnectException: Connection refused (db-primary:5432)",
            ),
        ],
    )
    add(
        "deploy-success",
        0,
        [],
        ["INFO Deployed release v4.2.1 to production (12 instances)"],
        [Fact(kind="text", value="Deployed release v4.2.1 to production (12 instances)")],
    )
    add(
        "docker-build-stream",
        1,
        [
            "#12 8.412 ERROR: Could not find a version that satisfies the requirement torch==9.9",
            "#12 8.413 ERROR: No matching distribution found for torch==9.9",
        ],
        [
            'ERROR: failed to solve: process "/bin/sh -c pip install -r requirements.txt" did not '
            "complete successfully: exit code: 1"
        ],
        [
            Fact(kind="text", value="satisfies the requirement torch==9.9"),
            Fact(kind="text", value="did not complete successfully: exit code: 1"),
        ],
        stream=True,
    )
    add(
        "segfault",
        139,
        ["Segmentation fault (core dumped) in ./bin/indexer --shard 7"],
        ["ERROR indexer exited abnormally"],
        [Fact(kind="text", value="Segmentation fault (core dumped) in ./bin/indexer --shard 7")],
    )
    return cases
