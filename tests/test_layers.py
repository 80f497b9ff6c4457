"""Imports point one way, down the layers of DESIGN §2; ``TYPE_CHECKING`` imports included.

Every module of ``src/actionspace`` belongs to the layer of its top-level module or package
(:data:`LAYERS`). A module may import its own top-level package and anything in a lower layer,
never a higher one; the package root (``actionspace/__init__.py``) is above every layer, so no
module imports from it. Imports are read from the source (relative ones resolved, those inside
functions and ``if TYPE_CHECKING:`` blocks too), so a lazy import is no way around a layer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

PACKAGE: Final = "actionspace"
SRC: Final = Path(__file__).resolve().parent.parent / "src" / PACKAGE
ROOT: Final = "__init__"
"""The package root's entry in :data:`LAYERS`."""

LAYERS: Final[Mapping[str, int]] = {
    # 0: the error taxonomy, values that cross boundaries, canonical JSON and digests
    "errors": 0,
    "types": 0,
    "outcomes": 0,
    "_fast": 0,
    "_crash": 0,
    "_canonical": 0,
    "_encoder": 0,
    "_unicode": 0,
    "_json_values": 0,
    "_store_errors": 0,
    "_placeholders": 0,
    "_store_url": 0,
    "_extras": 0,
    "_loader": 0,
    "_version": 0,
    "_epoch": 0,
    # 1: provider formats in, tool specs and the catalog
    "parse": 1,
    "catalog": 1,
    # 2: schema, semantic types, business validators, batch items
    "validation": 2,
    # 3: principals, information flow, budgets; approval requests
    "policy": 3,
    "approval": 3,
    # 4: idempotency keys, the commit protocol, stores
    "ledger": 4,
    # 5: one attempt of a tool, handed its exception mapper
    "execution": 5,
    # 6: the envelope, trimming, artifacts; events, stores, export
    "observation": 6,
    "trace": 6,
    "verify": 6,
    # 7: candidate sets, disclosure, ranking, renderings
    "discovery": 7,
    # 8: plans, a client of the engine's public interface
    "plan": 8,
    # 9: the call engine
    "pipeline": 9,
    # 10: the runtime, how it is put together, and the agent session
    "runtime": 10,
    "_assembly": 10,
    "_closing": 10,
    "_session_gate": 10,
    "_session_output": 10,
    "session": 10,
    # 11: edges, each through public interfaces
    "adapters": 11,
    "durable": 11,
    "service": 11,
    "evaluation": 11,
    "demo": 11,
    "bench": 11,
    "cli": 11,
    "_cli_app": 0,
    "_cli_checks": 11,
    "_cli_ledger": 11,
    "_cli_plan": 11,
    "_cli_read": 11,
    "_cli_tables": 0,
    "testing": 11,
    "pgcluster": 11,
    "resources": 11,
    # above everything: the public facade
    ROOT: 12,
}
"""Top-level module or package of ``actionspace`` → its layer (DESIGN §2)."""


def _module_name(path: Path) -> str:
    parts = (PACKAGE, *path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        yield _module_name(path), path


def _top(module: str) -> str | None:
    """The entry of :data:`LAYERS` that ``module`` belongs to; None outside the package."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else ROOT


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imported(importer: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in ``path``; ``from actionspace import x`` names ``x``
    when ``x`` is a top-level module, else the package root."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(importer, is_package, node)
            if module == PACKAGE:
                for alias in node.names:
                    yield node.lineno, f"{PACKAGE}.{alias.name}" if alias.name in LAYERS else PACKAGE
            else:
                yield node.lineno, module
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def unplaced_modules() -> list[str]:
    """Modules whose top-level module or package has no layer."""
    return [module for module, _ in _modules() if _top(module) not in LAYERS]


def backward_imports() -> list[str]:
    """Every import of a higher layer, as ``importer:line -> imported (top layer -> top layer)``."""
    found = []
    for module, path in _modules():
        top = _top(module)
        if top is None or top not in LAYERS:
            continue
        for line, target in _imported(module, path):
            target_top = _top(target)
            if target_top is None or target_top == top:
                continue
            if LAYERS.get(target_top, LAYERS[ROOT]) > LAYERS[top]:
                found.append(
                    f"{module}:{line} -> {target} ({top} {LAYERS[top]} -> {target_top} "
                    f"{LAYERS.get(target_top, '?')})"
                )
    return found


def test_every_module_is_placed_in_a_layer() -> None:
    assert unplaced_modules() == []


def test_no_module_imports_a_higher_layer() -> None:
    assert backward_imports() == []


def test_the_checker_sees_relative_type_checking_and_lazy_imports(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .. import runtime\n"
        "from ..plan import refs\n"
        "import importlib\n"
        "if TYPE_CHECKING:\n"
        "    from actionspace.trace.events import TraceEvent\n"
        "def f():\n"
        "    from actionspace import Runtime\n"
        "    importlib.import_module('actionspace.observation')\n"
    )
    path = tmp_path / "flow.py"
    path.write_text(source)
    found = sorted(target for _, target in _imported("actionspace.policy.flow", path))
    assert found == [
        "actionspace",
        "actionspace.observation",
        "actionspace.plan",
        "actionspace.runtime",
        "actionspace.trace.events",
        "importlib",
        "typing",
    ]
