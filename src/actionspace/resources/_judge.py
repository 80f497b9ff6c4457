"""The switch journal's text: written as lines, read back as what can be trusted of it.

A journal is lines of JSON (ASCII; no line holds a newline)::

    {"journal": 2, "key": <str | null>, "count": N}
    {"path": …, "temp": …, "new_hash": …, "backup": …}      N times, in rename order
    {"end": <sha256 hex of every byte before this line>}

:func:`parse` tells three things apart:

* **intact** — every line there and the check matching (or a whole one-document journal of the
  first format, which had no check);
* **torn** — complete lines that are a prefix of such a journal, the rest cut off (a crash, a file
  system that lost the tail): the entries read are trusted, the rest is unknown;
* **unjudgeable** (:class:`Unjudgeable`) — anything else: a complete line that is not JSON, a
  check that does not match, an entry naming a path outside the root, through the state
  directory, or a temporary or backup where the store never puts one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from actionspace.errors import ToolError
from actionspace.resources._beneath import components
from actionspace.resources.modes import sha256_hex

__all__ = ["STATE_DIR", "TEMP_SUFFIX", "Entry", "Manifest", "Unjudgeable", "manifest_text", "parse"]

STATE_DIR = ".actionspace"
"""Directory under the root holding the lock file and the journal; never readable as a resource."""

TEMP_SUFFIX = ".as-tmp"
"""Suffix of the temporaries a store writes next to their targets."""

_HASH = re.compile(r"[0-9a-f]{64}")


class Unjudgeable(Exception):
    """A journal whose content cannot be trusted enough to act on (the message says why)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        """The switch's key when it could be read, so its outcome is reported unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One file of a journaled switch; every path relative to the root and normalized."""

    path: str
    temp: str
    """The temporary holding the new content, in the same directory as ``path``."""
    new_hash: str
    backup: str | None
    """The hard link (or copy) of the replaced file; None when the file did not exist."""

    def line(self) -> str:
        fields = {"path": self.path, "temp": self.temp, "new_hash": self.new_hash, "backup": self.backup}
        return json.dumps(fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What a journal says: its key, how many entries it announced, the entries read."""

    key: str | None
    count: int | None
    """None when even the header was cut off."""
    entries: list[Entry] = field(default_factory=list)
    intact: bool = False


def manifest_text(key: str | None, entries: list[Entry]) -> str:
    """The journal of a switch of ``entries`` recorded with ``key``."""
    lines = [json.dumps({"journal": 2, "key": key, "count": len(entries)}), *(e.line() for e in entries)]
    body = "".join(line + "\n" for line in lines)
    return body + json.dumps({"end": sha256_hex(body.encode("ascii"))}) + "\n"


def parse(data: bytes, jid: str) -> Manifest:
    """Read a journal (see the module docstring); raises :class:`Unjudgeable`."""
    whole = _json(data)
    if isinstance(whole, dict) and "entries" in whole:  # the first format: one document
        entries, key = whole["entries"], whole.get("key")
        if not isinstance(entries, list) or not isinstance(key, (str, type(None))):
            raise Unjudgeable("its entries or key have the wrong shape")
        return Manifest(key=key, count=len(entries), entries=_entries(entries, jid, key), intact=True)
    *complete, torn = data.split(b"\n")
    records = []
    for line in complete:
        record = _json(line)
        if not isinstance(record, dict):
            raise Unjudgeable("a complete line of it is not a JSON object")
        records.append(record)
    if not records:
        return Manifest(key=None, count=None)
    header, *rest = records
    key, count = header.get("key"), header.get("count")
    if header.get("journal") != 2 or not isinstance(key, (str, type(None))) or not _count(count):
        raise Unjudgeable("its header is not a journal header")
    assert isinstance(count, int)
    end = rest.pop() if rest and "end" in rest[-1] else None
    entries = _entries(rest, jid, key)
    if len(entries) > count:
        raise Unjudgeable(f"it holds {len(entries)} entries where its header announced {count}", key=key)
    if end is None:
        return Manifest(key=key, count=count, entries=entries)
    checked = b"".join(line + b"\n" for line in complete[:-1])
    if torn or len(entries) != count or end != {"end": sha256_hex(checked)}:
        raise Unjudgeable("its check does not match its content", key=key)
    return Manifest(key=key, count=count, entries=entries, intact=True)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def _count(count: object) -> bool:
    return isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= 1_000_000


def _entries(raw: list[Any], jid: str, key: str | None) -> list[Entry]:
    try:
        return [_entry(item, n, jid) for n, item in enumerate(raw)]
    except Unjudgeable as exc:
        raise Unjudgeable(str(exc), key=key) from None


def _entry(raw: Any, n: int, jid: str) -> Entry:
    """One entry, refused unless it names only places the store itself would have written."""
    if not isinstance(raw, dict) or set(raw) != {"path", "temp", "new_hash", "backup"}:
        raise Unjudgeable(f"entry {n} has the wrong shape")
    path, temp, new_hash, backup = raw["path"], raw["temp"], raw["new_hash"], raw["backup"]
    if not _normal(path) or path.split("/")[0] == STATE_DIR or path.endswith(TEMP_SUFFIX):
        raise Unjudgeable(f"entry {n} names a path the store never writes: {path!r}")
    folder, _, name = path.rpartition("/")
    temp_folder, _, temp_name = temp.rpartition("/") if isinstance(temp, str) else ("", "", "")
    beside = temp_folder == folder and temp_name.startswith(f".{name}.")
    if not _normal(temp) or not beside or not temp_name.endswith(TEMP_SUFFIX):
        raise Unjudgeable(f"entry {n} names a temporary the store never writes: {temp!r}")
    if not isinstance(new_hash, str) or not _HASH.fullmatch(new_hash):
        raise Unjudgeable(f"entry {n} has no sha256 hex new hash")
    if backup is not None and backup != f"{STATE_DIR}/journal/{jid}/{n}.bak":
        raise Unjudgeable(f"entry {n} names a backup the store never writes: {backup!r}")
    return Entry(path=path, temp=temp, new_hash=new_hash, backup=backup)


def _normal(path: Any) -> bool:
    """Whether ``path`` is text naming a file below the root, already in normal form."""
    try:
        return isinstance(path, str) and "/".join(components(path)) == path
    except ToolError:
        return False
