"""The call engine (DESIGN §2, layer 9): the ordered stages over one frozen input, one engine that
runs them, and the one driver of the ledger's commit protocol.

::

    pipeline/
      stages.py     CallInput, Draft, Stage; resolve → authorize → validate → approval → flow → budget
      engine.py     Engine: calls/acalls, prepare, execute/aexecute, stream, drive (the ledger driver)
      observe.py    the observe stage: outcome → Observation envelope, and its trace events
      calls.py      raw model output → calls; grouped observations
      streaming.py  streaming tools: provisional observations, one final, through the same driver
      stores.py     the stores a store URL names

Clients (Runtime, the session, plans, durable workflows, the gateway) use only ``Engine``'s
public methods.
"""

from actionspace.pipeline.engine import Engine, run_sync
from actionspace.pipeline.stages import CallInput, Draft, Stage, identity_node

__all__ = ["CallInput", "Draft", "Engine", "Stage", "identity_node", "run_sync"]
