"""A call's validation context: resource versions read by kind, and the state its holder has now."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from actionspace import Principal
from actionspace.errors import ConfigurationError
from actionspace.validation.context import ResourceVersions

ALICE = Principal(id="alice", scopes=("read:*",))


@dataclass
class _Holder:
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Run:
    run_id: str


def test_a_context_reads_each_version_through_the_reader_of_its_kind() -> None:
    versions = ResourceVersions(_Holder())
    versions.add("doc", lambda rid: f"v-{rid}")
    ctx = versions.context(_Run("r1"), "n1", "c1", ALICE)
    assert ctx.resource_version("doc", "7") == "v-7"
    assert (ctx.run_id, ctx.node_id, ctx.call_id, ctx.principal_id) == ("r1", "n1", "c1", "alice")
    assert ctx.allows("read:doc")
    assert not ctx.allows("write:doc")


def test_a_kind_without_a_reader_is_a_configuration_error() -> None:
    ctx = ResourceVersions(_Holder()).context(_Run("r1"), "n1", "c1", ALICE)
    with pytest.raises(ConfigurationError, match=r"rt\.resource"):
        ctx.resource_version("doc", "7")


def test_a_context_sees_the_state_its_holder_has_when_it_is_built() -> None:
    holder = _Holder({"balance": 1})
    versions = ResourceVersions(holder)
    holder.state = {"balance": 2}
    assert versions.context(_Run("r1"), "n1", "c1", ALICE).state == {"balance": 2}
