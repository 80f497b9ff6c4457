"""The catalog: every registered ToolSpec, keyed by ``name@version``, with its lifecycle."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from actionspace._epoch import bump
from actionspace.catalog.spec import Lifecycle, ToolSpec
from actionspace.errors import DuplicateToolError, UnknownToolError

__all__ = ["Catalog"]


class Catalog:
    """Registered tools. Thread-safe; a version once registered is never replaced.

    Lifecycle: ``active`` tools are offered; ``deprecated`` ones are still offered (with their
    successor named) and callable; ``retired`` ones are never offered to a new run.
    """

    def __init__(self) -> None:
        self._specs: dict[str, ToolSpec] = {}
        self._order: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[ToolSpec], None]] = []
        self.generation = 0
        """Incremented on every change, so resolutions can be cached until the catalog changes."""
        self._offerable: tuple[int, tuple[ToolSpec, ...]] = (-1, ())

    def register(self, spec: ToolSpec) -> ToolSpec:
        """Add a tool version. Raises DuplicateToolError if ``name@version`` exists."""
        with self._lock:
            if spec.key in self._specs:
                raise DuplicateToolError(
                    f"tool {spec.key} is already registered: give this one another name (name='...') "
                    "or, for a new version of it, version='...'"
                )
            self._specs[spec.key] = spec
            self._order.setdefault(spec.name, []).append(spec.version)
            self.generation += 1
            bump()  # a kept precompiled entry is checked again
        for listener in self._listeners:
            listener(spec)
        return spec

    def on_change(self, listener: Callable[[ToolSpec], None]) -> None:
        """Call ``listener(spec)`` whenever a version is registered, changes lifecycle or is dropped."""
        self._listeners.append(listener)

    def get(self, name: str, version: str | None = None) -> ToolSpec:
        """A version of a tool; without ``version`` the newest one not retired.

        Raises UnknownToolError when there is none.
        """
        if version is not None:
            spec = self._specs.get(f"{name}@{version}")
            if spec is None:
                raise UnknownToolError(f"no tool {name}@{version}")
            return spec
        found = self.current(name)
        if found is None:
            raise UnknownToolError(f"no tool named {name!r} is registered and not retired")
        return found

    def find(self, key: str) -> ToolSpec | None:
        """The spec for ``name@version``, or None."""
        return self._specs.get(key)

    def current(self, name: str) -> ToolSpec | None:
        """The most recently registered version of ``name`` that is not retired."""
        for version in reversed(self._order.get(name, ())):
            spec = self._specs[f"{name}@{version}"]
            if spec.lifecycle != "retired":
                return spec
        return None

    def versions(self, name: str) -> list[ToolSpec]:
        """Every registered version of ``name``, oldest first."""
        return [self._specs[f"{name}@{v}"] for v in self._order.get(name, ())]

    def offerable(self) -> list[ToolSpec]:
        """The current version of every tool that is not retired, in registration order.

        Kept until the catalog changes: an agent loop asks for it every turn.
        """
        generation, specs = self._offerable
        if generation != self.generation:
            with self._lock:
                generation = self.generation
                current = (self.current(name) for name in list(self._order))
                specs = tuple(spec for spec in current if spec is not None)
                self._offerable = (generation, specs)
        return list(specs)

    def set_lifecycle(self, key: str, lifecycle: Lifecycle, *, deprecated_by: str | None = None) -> ToolSpec:
        """Move ``name@version`` to another lifecycle state; returns the new spec."""
        with self._lock:
            spec = self._specs.get(key)
            if spec is None:
                raise UnknownToolError(f"no tool {key}")
            spec = spec.evolve(lifecycle=lifecycle, deprecated_by=deprecated_by or spec.deprecated_by)
            self._specs[key] = spec
            self.generation += 1
            bump()  # a kept precompiled entry is checked again
        for listener in self._listeners:
            listener(spec)
        return spec

    def drop(self, key: str) -> ToolSpec:
        """Forget the retired version ``name@version``; returns its spec.

        For a source whose tools churn (an MCP server), so retired versions do not pile up. What
        holds only the key keeps working as for a retired version: a run pinned to it gets
        ``version_mismatch``, a ledger entry keeps its key. Raises UnknownToolError when there is
        no such version, ValueError when it is not retired (an offered tool is never dropped).
        """
        with self._lock:
            spec = self._specs.get(key)
            if spec is None:
                raise UnknownToolError(f"no tool {key}")
            if spec.lifecycle != "retired":
                raise ValueError(f"tool {key} is {spec.lifecycle}; only a retired version is dropped")
            del self._specs[key]
            order = self._order[spec.name]
            order.remove(spec.version)
            if not order:
                del self._order[spec.name]
            # No move of the epoch (actionspace/_epoch.py): only a retired version is dropped, and
            # retiring it moved the counter; no entry of a retired version is kept after that (a
            # run resolves it as version_mismatch), and current() skipped it already.
            self.generation += 1
        for listener in self._listeners:
            listener(spec)
        return spec

    def deprecate(self, key: str, *, by: str | None = None) -> ToolSpec:
        return self.set_lifecycle(key, "deprecated", deprecated_by=by)

    def retire(self, key: str) -> ToolSpec:
        return self.set_lifecycle(key, "retired")

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(list(self._specs.values()))

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, key: object) -> bool:
        return key in self._specs
