"""Resources with versions: read isolation, write modes and transactions for tools to use.

* :mod:`~actionspace.resources.modes` — the write modes (:class:`Overwrite`, :class:`Conditional`,
  :class:`Append`), the read modes (:class:`Latest`, :class:`AtVersion`; snapshots come from a
  store), the ``stale_reference`` / ``conflict`` distinction, and :class:`Transactional`, the
  protocol a tool's declared transaction (``ToolSpec.transaction``) speaks.
* :class:`FileStore` — hash-checked files confined to a root; conditional writes through fsynced
  temporaries and ``os.replace``; :meth:`FileStore.apply_group` switches several files
  all-or-nothing, with a journal that repairs a crash between the renames.
* :class:`FileSwitchEnvironment` — a ``"switch"`` :class:`Transactional` over a :class:`FileStore`.
* :class:`RecordStore` — versioned JSON records on SQLite with history, snapshots and
  ``transaction()``; itself a ``"transaction"`` :class:`Transactional`.
"""

from actionspace.resources.files import FileSnapshot, FileStore, FileVersion, GroupWrite
from actionspace.resources.journal import Recovered, RenameStep
from actionspace.resources.modes import (
    ABSENT,
    LATEST,
    Append,
    AtVersion,
    Conditional,
    EnvironmentMode,
    Latest,
    Overwrite,
    ReadMode,
    Transaction,
    Transactional,
    WriteMode,
    sha256_hex,
)
from actionspace.resources.records import Record, RecordSnapshot, RecordStore, RecordTransaction, value_hash
from actionspace.resources.switch import FileSwitch, FileSwitchEnvironment

__all__ = [
    "ABSENT",
    "LATEST",
    "Append",
    "AtVersion",
    "Conditional",
    "EnvironmentMode",
    "FileSnapshot",
    "FileStore",
    "FileSwitch",
    "FileSwitchEnvironment",
    "FileVersion",
    "GroupWrite",
    "Latest",
    "Overwrite",
    "ReadMode",
    "Record",
    "RecordSnapshot",
    "RecordStore",
    "RecordTransaction",
    "Recovered",
    "RenameStep",
    "Transaction",
    "Transactional",
    "WriteMode",
    "sha256_hex",
    "value_hash",
]
