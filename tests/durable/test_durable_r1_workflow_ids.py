"""Node workflow ids: one per (run, node), never a plan's."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from actionspace.durable import node_workflow_id, plan_workflow_id

_IDS = st.text(alphabet="a/%2F:", max_size=8) | st.text(max_size=8)


@example("r/x", "y", "r", "x/y")
@given(_IDS, _IDS, _IDS, _IDS)
def test_node_workflow_ids_differ_whenever_their_run_or_node_does(r1: str, n1: str, r2: str, n2: str) -> None:
    if (r1, n1) != (r2, n2):
        assert node_workflow_id(r1, n1) != node_workflow_id(r2, n2)
    assert node_workflow_id(r1, n1) not in (plan_workflow_id(r1), plan_workflow_id(r2))


def test_a_node_workflow_id_escapes_its_slashes_and_percent_signs() -> None:
    assert node_workflow_id("run_1", "n3") == "as-node:run_1/n3"
    assert node_workflow_id("r/x", "y") == "as-node:r%2Fx/y"
    assert node_workflow_id("r", "x/y") == "as-node:r/x%2Fy"
    assert node_workflow_id("100%", "a%2Fb") == "as-node:100%25/a%252Fb"
