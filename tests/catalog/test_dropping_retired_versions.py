"""Retired versions can be dropped from the catalog; offered ones never are."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.catalog import Catalog, ToolSpec
from actionspace.errors import UnknownToolError


def _noop(**_: Any) -> None:
    return None


def _spec(version: str, name: str = "t") -> ToolSpec:
    schema = {"type": "object", "properties": {f"x{version}": {"type": "integer"}}}
    return ToolSpec(name=name, version=version, fn=_noop, effect="read", input_schema=schema)


def test_a_dropped_retired_version_is_gone_from_every_view_and_listeners_hear_of_it() -> None:
    cat = Catalog()
    heard: list[str] = []
    cat.register(_spec("1"))
    cat.register(_spec("2"))
    cat.retire("t@1")
    cat.on_change(lambda spec: heard.append(f"{spec.key}:{spec.lifecycle}"))
    before = cat.generation
    dropped = cat.drop("t@1")
    assert dropped.key == "t@1"
    assert cat.find("t@1") is None and "t@1" not in cat
    assert [s.key for s in cat.versions("t")] == ["t@2"]
    assert cat.generation > before
    assert heard == ["t@1:retired"]
    with pytest.raises(UnknownToolError):
        cat.get("t", "1")
    # the key is free again only in the catalog: the name keeps its current version
    assert cat.get("t").key == "t@2"


def test_an_active_or_deprecated_version_is_never_dropped() -> None:
    cat = Catalog()
    cat.register(_spec("1"))
    cat.register(_spec("2"))
    cat.deprecate("t@1", by="t@2")
    for key in ("t@1", "t@2"):
        with pytest.raises(ValueError, match="only a retired version"):
            cat.drop(key)
    assert len(cat) == 2
    with pytest.raises(UnknownToolError):
        cat.drop("t@9")


def test_dropping_the_last_version_forgets_the_name() -> None:
    cat = Catalog()
    cat.register(_spec("1", name="gone"))
    cat.register(_spec("1", name="kept"))
    cat.retire("gone@1")
    cat.drop("gone@1")
    assert cat.versions("gone") == []
    assert [s.key for s in cat.offerable()] == ["kept@1"]
    assert cat.register(_spec("2", name="gone")).key == "gone@2"
