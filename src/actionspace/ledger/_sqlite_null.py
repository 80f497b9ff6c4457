"""SQL NULL bound without a failed attribute lookup: a ``NoneType`` entry in ``sqlite3.adapters``.

``sqlite3`` binds a parameter of exactly ``int``, ``float``, ``str`` or ``bytearray`` as it is;
any other (``None`` too) goes through its adaptation: the registry (``sqlite3.adapters``) looked
up by ``(type, PrepareProtocol)``, and when nothing is registered there,
``PrepareProtocol.__adapt__`` and the value's ``__conform__`` looked for. The first lookup, on a
type, fails with an ``AttributeError`` whose message is formatted and then dropped: some 2,000
machine instructions for every ``None`` bound. A durable call binds seven on its thread (the
intent's ``remote_id``, ``observation``, ``error`` and ``resolution``, the outcome's own), and the
trace's rows more on the flusher's.

:data:`NULL` is registered for ``NoneType`` (unless something else already is, which is then kept):
the registry answers the lookup, and ``NULL(None)`` is ``None``, bound as SQL NULL as before. It is
a C function (an empty ``dict``'s ``get``, which nothing fills), so no Python frame runs either. What
is written is unchanged: ``tests/ledger/test_w91_null_parameters.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Final

__all__ = ["NULL"]

_NOTHING: Final[dict[Any, None]] = {}
NULL: Final[Callable[[Any], None]] = _NOTHING.get
"""``NULL(None)`` is ``None``: the adapter of ``None``, answered without a frame or an exception."""

sqlite3.adapters.setdefault((type(None), sqlite3.PrepareProtocol), NULL)
