"""Tool specifications, the registry of versions, and tools built from Python functions."""

from actionspace.catalog.functions import as_spec, spec_from_function, spec_from_schema
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import Cost, Labels, RetryPolicy, ToolSpec, schema_hash

__all__ = [
    "Catalog",
    "Cost",
    "Labels",
    "RetryPolicy",
    "ToolSpec",
    "as_spec",
    "schema_hash",
    "spec_from_function",
    "spec_from_schema",
]
