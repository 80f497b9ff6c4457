"""An observation cut while its full output could not be stored says why, on every call path."""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

import pytest

import actionspace.pipeline._run as fast_module
from actionspace import Observation, Runtime
from actionspace.observation import MemoryArtifactStore, shape
from actionspace.pipeline.observe import plain_observation

BIG_ROWS = {"rows": [{"id": i, "text": "row text " * 8} for i in range(400)]}
BIG_TEXT = "a line of output\n" * 4000
BIG_STREAM_TEXT = "x" * (600 * 1024)


class FullDisk(MemoryArtifactStore):
    """A store on a full disk: every write fails with ENOSPC."""

    def put(self, data: bytes) -> str:
        raise OSError(errno.ENOSPC, "No space left on device", "/srv/artifacts/tmp1234")

    def put_stream(self, chunks: Iterable[bytes]) -> str:
        for _ in chunks:  # fails after reading some of it, as a real full disk does
            raise OSError(errno.ENOSPC, "No space left on device", "/srv/artifacts/tmp5678")
        raise AssertionError("unreachable")


def _runtime(store: Any, value: Any) -> Runtime:
    rt = Runtime("memory://", artifacts=store, recover_on_start=False)

    @rt.tool(effect="read")
    def dump(n: int) -> Any:
        """Dump a large value."""
        return value() if callable(value) else value

    return rt


def _assert_says_not_stored(obs: Observation, reason: str) -> None:
    assert obs.ok and not obs.complete
    assert obs.trimming is not None
    assert obs.artifact_ref is None
    said = obs.diagnostics.get("artifact")
    assert isinstance(said, str) and said.startswith("not stored: "), obs.diagnostics
    assert reason in said
    assert "/srv/artifacts" not in said  # the store's own paths are not shown


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    "value", [BIG_ROWS, BIG_TEXT, lambda: iter([BIG_STREAM_TEXT])], ids=["rows", "text", "stream"]
)
def test_a_full_disk_is_named_in_the_cut_observation(
    fast: bool, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    original = plain_observation

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(fast_module, "plain_observation", spy)
    rt = _runtime(FullDisk(), value)
    rt.engine.fast.enabled = fast
    run = rt.new_run()
    for n in range(3):  # the first call of a tool in a run takes the stages, later ones may not
        obs = rt.call({"name": "dump", "arguments": {"n": n}}, run_id=run)
        _assert_says_not_stored(obs, "No space left on device")
    if fast and not callable(value):
        assert seen, "the precompiled path was not taken"


def test_an_observation_that_was_stored_says_nothing_about_it() -> None:
    store = MemoryArtifactStore()
    rt = _runtime(store, BIG_ROWS)
    obs = rt.call({"name": "dump", "arguments": {"n": 1}})
    assert obs.artifact_ref is not None and not obs.complete
    assert "artifact" not in obs.diagnostics
    small = _runtime(store, {"ok": True}).call({"name": "dump", "arguments": {"n": 1}})
    assert "artifact" not in small.diagnostics


def test_a_cut_without_any_store_says_so() -> None:
    shaped = shape(BIG_ROWS, artifacts=None)
    assert not shaped.complete and shaped.artifact_ref is None
    assert shaped.not_stored == "no artifact store"


def test_the_reason_is_kept_for_each_shape_path() -> None:
    full = FullDisk()
    for value, rule in ((BIG_ROWS, "json-v1"), (BIG_TEXT, "log-v1"), (iter([BIG_STREAM_TEXT]), "log-v1")):
        shaped = shape(value, rule=rule, artifacts=full)
        assert shaped.artifact_ref is None and not shaped.complete
        assert shaped.not_stored is not None and "No space left on device" in shaped.not_stored
