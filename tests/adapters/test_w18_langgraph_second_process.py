"""LangGraph: a graph stopped at actionspace's approval interrupt, its checkpoint saved, is resumed
in another process (tools and graph built again there, the store shared): the approved charge runs
once. A second process resuming the same saved checkpoint again (a worker retrying a resume whose
end it never saw) replays the charge, never sends it twice. Real child processes."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.proc import run_child

GRAPH = """
import json, pickle, sys
from pathlib import Path
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tools

def build(url, ledger, saver, *, proposes=True):
    rt = Runtime(url)

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict:
        "Charge a card, in cents."
        with open(ledger, "a") as f:  # the bank: what was sent, whatever the process
            f.write(card + "\\n")
        return {"charged": cents}

    call = {"name": "charge", "args": {"card": "4242", "cents": 500}, "id": "c1", "type": "tool_call"}
    said = [AIMessage(content="", tool_calls=[call])] if proposes else []  # the model, past the call
    llm = FakeMessagesListChatModel(responses=[*said, AIMessage(content="Paid.")])
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(governed_tools(rt)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return rt, graph.compile(checkpointer=saver)
"""

RESUME = (
    GRAPH
    + """
from langgraph.types import Command
url, ledger, saved, request_id = sys.argv[1:5]
saver = InMemorySaver()
storage, writes, blobs = pickle.loads(Path(saved).read_bytes())
saver.storage.update(storage); saver.writes.update(writes); saver.blobs.update(blobs)
rt, app = build(url, ledger, saver, proposes=False)
if len(app.get_state({"configurable": {"thread_id": "t1"}}).interrupts) != 1:  # the saved pause
    raise SystemExit("the saved checkpoint holds no pause")
thread = {"configurable": {"thread_id": "t1"}, "recursion_limit": 10}
out = app.invoke(Command(resume={"approved": True, "request_id": request_id, "by": "alice"}), thread)
answers = [json.loads(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]
[request] = rt.approvals.list(status=None)
rt.close()
print(json.dumps({"final": out["messages"][-1].content, "answers": answers, "status": request.status,
                  "by": request.decided_by}), flush=True)
"""
)


def test_a_graph_paused_for_approval_resumes_in_other_processes_and_charges_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    ledger = tmp_path / "bank.txt"
    saved = tmp_path / "checkpoint.pickle"
    scope: dict[str, Any] = {}
    exec(GRAPH, scope)
    saver = InMemorySaver()
    rt, app = scope["build"](url, str(ledger), saver)
    out = app.invoke({"messages": [HumanMessage("Charge order 7")]}, {"configurable": {"thread_id": "t1"}})
    [pause] = out["__interrupt__"]
    saved.write_bytes(pickle.dumps((dict(saver.storage), dict(saver.writes), dict(saver.blobs))))
    rt.close()
    assert not ledger.exists()  # nothing sent before the person's answer

    first = run_child(RESUME, url, str(ledger), str(saved), pause.value["request_id"])
    assert first["final"] == "Paid." and first["status"] == "consumed" and first["by"] == "alice"
    assert [a["status"] for a in first["answers"]] == ["ok"]
    assert ledger.read_text().splitlines() == ["4242"]

    again = run_child(RESUME, url, str(ledger), str(saved), pause.value["request_id"])
    assert again["final"] == "Paid." and [a.get("replayed") for a in again["answers"]] == [True]
    assert ledger.read_text().splitlines() == ["4242"]  # sent once, whatever resumed it
