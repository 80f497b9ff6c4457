"""The "did you mean" of an unknown tool never points at a tool with another effect or a higher risk."""

from __future__ import annotations

from typing import Any

from actionspace import Principal, Runtime


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, principal=Principal(id="p", scopes=("*",)))

    @rt.tool(effect="write", risk="high", reversible=False)
    def delete_project(project_id: str) -> str:
        return project_id

    @rt.tool(effect="external", risk="high")
    def charge_card(customer_id: str, amount_cents: int) -> str:
        return customer_id

    @rt.tool(effect="read")
    def get_project(project_id: str) -> str:
        return project_id

    @rt.tool(effect="write", risk="low")
    def rename_project(project_id: str, name: str) -> str:
        return name

    return rt


def _error(rt: Runtime, name: str, **args: object) -> tuple[str, tuple[str, ...]]:
    obs = rt.call({"name": name, "arguments": args})
    assert obs.error is not None and obs.error.category == "unknown_tool"
    return obs.error.message, obs.error.alternatives


def test_a_call_to_archive_is_never_told_to_delete() -> None:
    with _runtime() as rt:
        message, _ = _error(rt, "archive_project", project_id="p1")
    assert "delete_project" not in message
    assert "did you mean" not in message


def test_a_refund_is_never_pointed_at_a_charge() -> None:
    with _runtime() as rt:
        message, _ = _error(rt, "refund_card", customer_id="c", amount_cents=5)
    assert "charge_card" not in message


def test_a_misspelled_name_still_gets_the_tool_it_meant() -> None:
    with _runtime() as rt:
        message, alternatives = _error(rt, "delete_projet", project_id="p1")
        assert "did you mean 'delete_project'" in message
        assert alternatives[0] == "delete_project"
        message, _ = _error(rt, "get_projects", project_id="p1")
        assert "did you mean 'get_project'" in message


def test_a_read_is_only_pointed_at_reads() -> None:
    with _runtime() as rt:
        message, _ = _error(rt, "get_project_name", project_id="p1")
    assert "rename_project" not in message


def test_a_tool_not_offered_to_the_run_is_pointed_only_at_tools_as_safe() -> None:
    with _runtime() as rt:
        run = rt.new_run("r")
        rt.offer(["delete_project", "get_project"], run_id=run)
        obs = rt.call({"name": "rename_project", "arguments": {"project_id": "p", "name": "n"}}, run_id=run)
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert "delete_project" not in obs.error.message


def test_an_unknown_name_in_a_large_catalog_compares_each_verb_once_not_each_tool(monkeypatch: Any) -> None:
    """A hallucinated name is answered on the caller's thread (the event loop, for async callers):
    the verbs of 2,000 tools are a handful, and each is compared with the misspelt one once."""
    import difflib

    rt = Runtime("memory://", recover_on_start=False)
    verbs = ("list", "count", "show", "add", "sum", "view", "lookup", "check")
    for i in range(2000):
        rt.add_tool(
            name=f"{verbs[i % len(verbs)]}_items_{i}",
            input_schema={"type": "object"},
            fn=lambda: 1,
            effect="none",
        )
    made: list[int] = []

    class Counted(difflib.SequenceMatcher):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(difflib, "SequenceMatcher", Counted)
    obs = rt.call({"name": "ad_items_1", "arguments": {}})  # "ad" for "add": a misspelt verb
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert obs.error.alternatives[0].startswith("add_items_")  # its closest names, of the verb it misspelt
    assert len(made) <= 2 * len(verbs)
    rt.close()


def test_a_name_of_any_size_is_named_back_in_a_few_hundred_characters() -> None:
    # the model's text is echoed in the message the model reads and the trace keeps
    with _runtime() as rt:
        message, alternatives = _error(rt, "get_projct" + "x" * 100_000, project_id="p1")
    assert len(message) < 400 and "chars omitted" in message
    assert message.startswith("no tool 'get_projct")
    assert alternatives  # still pointed somewhere
