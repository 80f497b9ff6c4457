"""An observation's repr and str never raise, stay bounded, and show a secret value as the trace views do."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Labels, Observation, Runtime
from actionspace.policy.redaction import REDACTED
from actionspace.types import Provenance


class Sealed(str):
    """A text whose repr raises (a tool's own str subclass)."""

    def __repr__(self) -> str:
        raise RuntimeError("sealed")


class SealedRow(tuple[Any, ...]):
    """A tuple whose repr raises."""

    def __repr__(self) -> str:
        raise ValueError("row")


class Loud:
    """An object whose repr is huge."""

    def __repr__(self) -> str:
        return "x" * 10_000_000


def _runtime(returned: Any, *, secret: bool = False) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    labels = Labels(confidentiality="secret") if secret else Labels()

    @rt.tool(effect="read", labels=labels)
    def fetch(n: int) -> Any:
        """Fetch a value."""
        return returned

    return rt


def test_repr_of_an_observation_holding_a_raising_str_subclass_does_not_raise() -> None:
    rt = _runtime({"name": Sealed("alice"), "row": (1, Sealed("b"))})
    obs = rt.call({"name": "fetch", "arguments": {"n": 1}})
    assert obs.ok
    assert type(obs.data["name"]) is Sealed  # the tool's own object is kept, not copied
    text = repr(obs)
    assert text.startswith("Observation(")
    assert "call_id=" in text and "'fetch'" in text
    assert "Sealed" in text  # the unshowable parts are named
    assert str(obs) == text


def test_a_tuple_subclass_whose_repr_raises_is_copied_and_shown() -> None:
    """A container subclass's iteration is its own code, which the C encoder would run: the
    result is written by the normalizing pass instead, as plain values (``_encoder.check_plain``)."""
    rt = _runtime({"row": SealedRow((1, Sealed("b")))})
    obs = rt.call({"name": "fetch", "arguments": {"n": 1}})
    assert obs.ok
    assert obs.data == {"row": [1, "b"]}
    text = repr(obs)
    assert text.startswith("Observation(") and str(obs) == text


def test_repr_of_a_huge_result_is_bounded() -> None:
    rt = _runtime([Loud()] * 3)
    obs = rt.call({"name": "fetch", "arguments": {"n": 1}})
    assert len(repr(obs)) < 4_000
    rows = Observation(call_id="c", tool="t", data={f"k{i}": "v" * 1000 for i in range(10_000)})
    assert len(repr(rows)) < 4_000


def test_repr_of_a_cyclic_result_is_bounded() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    obs = Observation(call_id="c", tool="t", data=cyclic, diagnostics={"self": cyclic})
    assert len(repr(obs)) < 4_000


def test_repr_of_a_secret_observation_redacts_its_values_as_trace_views_do() -> None:
    rt = _runtime({"password": "hunter2"}, secret=True)
    obs = rt.call({"name": "fetch", "arguments": {"n": 1}})
    assert "secret" in obs.provenance.labels
    text = repr(obs)
    assert "hunter2" not in text
    assert f"data={REDACTED!r}" in text
    assert "'fetch'" in text and obs.content_hash is not None and obs.content_hash in text


def test_reader_restricted_and_unreadable_labels_redact_too() -> None:
    for labels in (("internal", "reader:bob"), ("public", "readers:none"), (object(),)):
        obs = Observation(
            call_id="c",
            tool="t",
            data="hunter2",
            diagnostics={"k": "hunter2"},
            provenance=Provenance(labels=labels),  # type: ignore[arg-type]
        )
        assert "hunter2" not in repr(obs), labels


def test_items_of_a_group_are_shown_each_with_its_own_label() -> None:
    secret = Observation(call_id="a", tool="t", data="hunter2", provenance=Provenance(labels=("secret",)))
    public = Observation(call_id="b", tool="t", data=Sealed("visible"))
    group = Observation(call_id="g", tool="*", items=(secret, public))
    text = repr(group)
    assert "hunter2" not in text
    assert "call_id='a'" in text and "call_id='b'" in text


class Hostile:
    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc

    def __repr__(self) -> str:
        if self.exc is None:
            return "Hostile()"
        raise self.exc


hostile_leaves = st.one_of(
    st.text(max_size=5).map(Sealed),
    st.builds(Hostile, st.sampled_from([None, RuntimeError("r"), TypeError("t"), RecursionError()])),
    st.integers(),
    st.just(5000).map(lambda n: 10**n),  # its repr raises ValueError
    st.floats(allow_nan=True),
    st.text(max_size=20),
)
hostile_values = st.recursive(
    hostile_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(SealedRow),
        st.dictionaries(st.text(max_size=5), inner, max_size=5),
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(data=hostile_values, diagnostics=st.dictionaries(st.text(max_size=5), hostile_values, max_size=3))
def test_repr_never_raises_whatever_the_data(data: Any, diagnostics: dict[str, Any]) -> None:
    obs = Observation(call_id=Sealed("c"), tool="t", data=data, diagnostics=diagnostics)
    text = repr(obs)
    assert isinstance(text, str) and len(text) < 4_000
    assert str(obs) == text
