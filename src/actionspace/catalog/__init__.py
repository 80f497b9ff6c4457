"""Tool specifications, the registry of versions, and tools built from Python functions."""

from actionspace.catalog.functions import spec_from_function
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import Cost, Labels, RetryPolicy, ToolSpec, schema_hash

__all__ = ["Catalog", "Cost", "Labels", "RetryPolicy", "ToolSpec", "schema_hash", "spec_from_function"]
