"""A second process continuing a run (another runtime on the same store) knows what the run was
last offered: the tools, their pinned versions and what was described, whatever the change's size."""

from __future__ import annotations

from pathlib import Path

from actionspace import Runtime, ToolCall


def _runtime(url: str, version: str = "1") -> Runtime:
    rt = Runtime(url)
    for name in ("tool_a", "tool_b", "tool_c", "tool_d"):
        rt.add_tool(
            name=name,
            input_schema={"type": "object"},
            fn=lambda name=name: name,
            effect="read",
            description=f"Read {name}.",
            version=version,
        )
    return rt


def _status(rt: Runtime, run: str, name: str) -> str:
    obs = rt.call(ToolCall(name=name, arguments={}), run_id=run)
    return obs.status if obs.error is None else obs.error.category


def test_a_second_process_may_call_only_the_tools_of_the_latest_offer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    first = _runtime(url)
    run = first.new_run()
    first.offer(["tool_a", "tool_b"], run_id=run)
    assert _status(first, run, "tool_a") == "ok"
    first.offer(["tool_c", "tool_d"], run_id=run)  # as many tools as before, other ones
    assert _status(first, run, "tool_a") == "unknown_tool"
    first.close()
    second = _runtime(url)
    assert _status(second, run, "tool_a") == "unknown_tool"
    assert _status(second, run, "tool_c") == "ok"
    second.close()


def test_a_second_process_keeps_the_version_a_mismatch_pinned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    first = _runtime(url)
    run = first.new_run()
    first.offer(["tool_a"], run_id=run)
    first.add_tool(
        name="tool_a", input_schema={"type": "object"}, fn=lambda: "v2", effect="read", version="2"
    )
    first.catalog.retire("tool_a@1")
    assert _status(first, run, "tool_a") == "version_mismatch"  # the model is told, the run now has @2
    assert _status(first, run, "tool_a") == "ok"
    first.close()
    second = _runtime(url)
    second.add_tool(
        name="tool_a", input_schema={"type": "object"}, fn=lambda: "v2", effect="read", version="2"
    )
    second.catalog.retire("tool_a@1")
    assert _status(second, run, "tool_a") == "ok"  # the pin to @2 the first process made holds
    second.close()


def test_offering_the_same_tools_again_saves_nothing_and_another_set_saves_once(tmp_path: Path) -> None:
    rt = _runtime(f"sqlite:///{tmp_path / 'run.db'}")
    run = rt.new_run()
    rt.offer(["tool_a", "tool_b"], run_id=run)
    saves: list[str] = []
    save = rt.engine.runs.run_states.save

    def counted(run_id: str, state: object, texts: object = ()) -> None:
        saves.append(run_id)
        save(run_id, state, texts)  # type: ignore[arg-type]

    rt.engine.runs.run_states.save = counted  # type: ignore[method-assign]
    for _ in range(5):  # an agent loop offering the same tools every turn
        rt.offer(["tool_b", "tool_a"], run_id=run)
    assert saves == []
    rt.offer(["tool_c", "tool_d"], run_id=run)
    rt.offer(["tool_c", "tool_d"], run_id=run)
    assert saves == [run]
    rt.close()
