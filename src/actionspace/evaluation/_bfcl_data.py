"""The BFCL data files: fetched as the pinned ``bfcl-eval`` wheel, unpacked once, read as JSON lines.

BFCL (``bfcl-eval``, Apache-2.0) is data this package reads. Its wheel is downloaded with pip into
a cache outside the source tree, checked against a pinned sha256, and only its ``data/`` folder and
metadata are unpacked; none of its code is installed, imported or run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from actionspace.errors import BfclDataError

__all__ = [
    "BFCL_VERSION",
    "CATEGORIES",
    "BfclDataError",
    "BfclEntry",
    "default_cache_dir",
    "fetch",
    "load",
    "load_all",
]

BFCL_VERSION: Final = "2026.3.23"
WHEEL: Final = f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"
WHEEL_SHA256: Final = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
_UNPACKED: Final = f"bfcl_eval-{BFCL_VERSION}"
_DATA: Final = "bfcl_eval/data/"

CATEGORIES: Final = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
"""The single-turn Python categories whose ground truth is a set of concrete calls."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BfclEntry:
    """One BFCL test case with its possible answer."""

    id: str
    category: str
    question: Sequence[Sequence[Mapping[str, Any]]]
    """Turns, each a list of chat messages (``role``, ``content``)."""
    functions: Sequence[Mapping[str, Any]]
    """The function docs offered, in BFCL's dialect (see ``to_input_schema``)."""
    ground_truth: Sequence[Mapping[str, Mapping[str, Any]]]
    """One ``{function: {argument: [acceptable values…]}}`` per expected call."""


def default_cache_dir() -> Path:
    """``$ACTIONSPACE_CACHE/bfcl``, else ``~/.cache/actionspace/bfcl``."""
    root = os.environ.get("ACTIONSPACE_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "actionspace") / "bfcl"


def fetch(cache_dir: Path | str | None = None) -> Path:
    """Make sure the pinned BFCL data is unpacked in the cache and return its ``data`` folder.

    Downloads the wheel with ``python -m pip download`` when it is missing (network needed once),
    verifies its sha256 and unpacks ``bfcl_eval/data`` under ``<cache>/bfcl_eval-<version>/``.
    Safe to call from several processes at once. Raises BfclDataError when any step fails.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = cache / _UNPACKED
    data = target / _DATA
    if data.is_dir():
        return data
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if wheel.exists() and not wheel.is_file():
        raise BfclDataError(f"{wheel} is not a file; delete it and fetch again")
    if not wheel.is_file():
        _download(cache)
    _verify(wheel)
    staging = Path(tempfile.mkdtemp(prefix=f".{_UNPACKED}-", dir=cache))
    try:
        try:
            _unpack(wheel, staging)
        except (OSError, zipfile.BadZipFile) as exc:
            raise BfclDataError(f"cannot unpack {wheel}: {exc}; delete it and fetch again") from exc
        staging.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:
            if not data.is_dir():  # not a concurrent unpack that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return data


def _download(cache: Path) -> None:
    """pip download into a private folder, then one atomic move: a concurrent reader never sees
    half a wheel. ``--only-binary`` keeps pip from ever building (running) an sdist."""
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as private:
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            f"bfcl-eval=={BFCL_VERSION}", "-d", private,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        downloaded = Path(private) / WHEEL
        if done.returncode != 0 or not downloaded.is_file():
            raise BfclDataError(f"could not download {WHEEL}: {(done.stderr or done.stdout).strip()[-2000:]}")
        os.replace(downloaded, cache / WHEEL)


def _verify(wheel: Path) -> None:
    try:
        with wheel.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise BfclDataError(f"cannot read {wheel}: {exc}") from exc
    if digest != WHEEL_SHA256:
        raise BfclDataError(
            f"{wheel} has sha256 {digest}, expected {WHEEL_SHA256}; delete it and fetch again"
        )


def _unpack(wheel: Path, into: Path) -> None:
    root = into.resolve()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if not (name.startswith(_DATA) or ".dist-info/" in name) or member.is_dir():
                continue
            destination = (into / name).resolve()
            if not destination.is_relative_to(root):
                raise BfclDataError(f"{wheel} holds a path outside its folder: {name!r}")
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as sink:
                shutil.copyfileobj(source, sink)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a data file, one a line; BfclDataError for anything else."""
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise BfclDataError(f"{path}:{number}: not JSON: {exc}") from exc
                    if not isinstance(record, dict):
                        raise BfclDataError(f"{path}:{number}: not a JSON object")
                    yield record
    except FileNotFoundError as exc:
        raise BfclDataError(f"missing BFCL data file {path}") from exc
    except UnicodeDecodeError as exc:
        raise BfclDataError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise BfclDataError(f"cannot read BFCL data file {path}: {exc}") from exc


def _text(record: Mapping[str, Any], name: str, where: str) -> str:
    value = record.get(name)
    if not isinstance(value, str):
        raise BfclDataError(f"{where}: {name!r} must be text, got {type(value).__name__}")
    return value


def _list(record: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = record.get(name)
    if not isinstance(value, list):
        raise BfclDataError(f"{where}: {name!r} must be a list, got {type(value).__name__}")
    return value


def _entry(category: str, raw: Mapping[str, Any], ground_truth: list[Any]) -> BfclEntry:
    """One entry, its shape checked: a hand-edited or truncated cache is a BfclDataError."""
    entry_id = _text(raw, "id", category)
    where = f"{category}: {entry_id}"
    functions = _list(raw, "function", where)
    for doc in functions:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise BfclDataError(f"{where}: every function doc needs a name")
    return BfclEntry(
        id=entry_id,
        category=category,
        question=_list(raw, "question", where),
        functions=functions,
        ground_truth=ground_truth,
    )


def load(category: str, data_dir: Path | None = None) -> list[BfclEntry]:
    """Every entry of one category, each paired with its possible answer (by id, in file order).

    ``data_dir`` defaults to :func:`fetch`'s. Raises BfclDataError for an unknown category or
    when the question and answer files do not list the same ids.
    """
    if category not in CATEGORIES:
        raise BfclDataError(f"unknown BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    data = data_dir if data_dir is not None else fetch()
    name = f"BFCL_v4_{category}.json"
    answers: dict[str, list[Any]] = {}
    for a in _lines(data / "possible_answer" / name):
        answer_id = _text(a, "id", f"{category} answers")
        answers[answer_id] = _list(a, "ground_truth", f"{category} answers: {answer_id}")
    entries = []
    for raw in _lines(data / name):
        entry_id = _text(raw, "id", category)
        if entry_id not in answers:
            raise BfclDataError(f"{category}: {entry_id} has no possible answer")
        entries.append(_entry(category, raw, answers.pop(entry_id)))
    if answers:
        raise BfclDataError(f"{category}: possible answers without a question: {sorted(answers)[:5]}")
    return entries


def load_all(data_dir: Path | None = None) -> dict[str, list[BfclEntry]]:
    """:func:`load` for every category of :data:`CATEGORIES`."""
    data = data_dir if data_dir is not None else fetch()
    return {category: load(category, data) for category in CATEGORIES}
