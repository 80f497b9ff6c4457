"""The Python-function adapter's mapping from exceptions to the error taxonomy.

Defined in :mod:`actionspace.execution.errors` (the runtime, a lower layer than the adapters,
hands it to its executor); re-exported here, where adapters are looked for.
"""

from __future__ import annotations

from actionspace.execution.errors import KNOWN_EXCEPTIONS, map_exception

__all__ = ["KNOWN_EXCEPTIONS", "map_exception"]
