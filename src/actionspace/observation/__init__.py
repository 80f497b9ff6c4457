"""Observations: shaping tool output into bounded data, and the artifact store for the rest.

``shape(value, rule=..., max_bytes=..., artifacts=...)`` returns a ``Shaped``: the ``data`` the
model sees (canonical JSON at most ``max_bytes``), whether it is ``complete``, the ``trimming``
record and, when something was cut, an ``artifact_ref`` to the full raw output. Rules are
deterministic, versioned and chosen by content kind (``RULES``): ``log-v1``, ``search-v1``,
``web-v1`` and the default ``json-v1``. ``corpus.evaluate_rules()`` measures how many
decision-relevant facts each rule keeps.
"""

from actionspace._canonical import canonical_bytes, content_hash
from actionspace.observation._artifacts import (
    ARTIFACT_SCHEME,
    ArtifactStore,
    FolderArtifactStore,
    MemoryArtifactStore,
)
from actionspace.observation._shape import Shaped, shape
from actionspace.observation.rules import (
    RULES,
    JsonRule,
    LogRule,
    SearchRule,
    Source,
    TrimRule,
    WebRule,
    is_stream,
)

__all__ = [
    "ARTIFACT_SCHEME",
    "RULES",
    "ArtifactStore",
    "FolderArtifactStore",
    "JsonRule",
    "LogRule",
    "MemoryArtifactStore",
    "SearchRule",
    "Shaped",
    "Source",
    "TrimRule",
    "WebRule",
    "canonical_bytes",
    "content_hash",
    "is_stream",
    "shape",
]
