"""FileStore: hash-checked reads and writes, atomic switch groups, journal recovery."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actionspace.errors import ToolError
from actionspace.resources import (
    ABSENT,
    Append,
    AtVersion,
    Conditional,
    FileStore,
    FileSwitchEnvironment,
    GroupWrite,
    Overwrite,
    RenameStep,
    Transactional,
    sha256_hex,
)
from actionspace.resources.journal import TEMP_SUFFIX


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    (tmp_path / "c.txt").write_text("gamma")
    return FileStore(tmp_path)


def _category(exc: pytest.ExceptionInfo[ToolError]) -> str:
    return exc.value.error.category


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX) or p.suffix in (".bak", ".json")]


def test_a_read_returns_content_with_its_sha256_and_a_version(store: FileStore) -> None:
    found = store.read("a.txt")
    assert found.content == b"alpha"
    assert found.hash == sha256_hex(b"alpha")
    assert found.version and found.path == "a.txt"


def test_a_path_outside_the_root_or_into_the_state_directory_is_invalid(
    store: FileStore, tmp_path: Path
) -> None:
    for path in ("../escape.txt", "/etc/passwd", ".actionspace/lock", "."):
        with pytest.raises(ToolError) as exc:
            store.read(path)
        assert _category(exc) == "invalid_arguments", path
    (tmp_path / "link").symlink_to("/etc")
    with pytest.raises(ToolError) as exc:
        store.read("link/hostname")
    assert _category(exc) == "invalid_arguments"


def test_a_conditional_write_on_the_hash_read_replaces_the_file(store: FileStore, tmp_path: Path) -> None:
    base = store.read("a.txt")
    after = store.write("a.txt", "ALPHA", mode=Conditional(content_hash=base.hash))
    assert (tmp_path / "a.txt").read_text() == "ALPHA"
    assert after.hash == sha256_hex(b"ALPHA") and after.version != base.version
    assert _leftovers(tmp_path) == []


def test_a_conditional_write_on_an_outdated_hash_is_stale_with_the_current_hash(
    store: FileStore, tmp_path: Path
) -> None:
    base = store.read("a.txt")
    (tmp_path / "a.txt").write_text("edited by hand")
    with pytest.raises(ToolError) as exc:
        store.write("a.txt", "mine", mode=Conditional(content_hash=base.hash))
    assert _category(exc) == "stale_reference"
    assert exc.value.error.current_version == sha256_hex(b"edited by hand")
    assert (tmp_path / "a.txt").read_text() == "edited by hand"
    assert _leftovers(tmp_path) == []


def test_a_conditional_write_accepts_the_version_token_too(store: FileStore, tmp_path: Path) -> None:
    base = store.read("b.txt")
    store.write("b.txt", "BETA", mode=Conditional(version=base.version))
    with pytest.raises(ToolError) as exc:
        store.write("b.txt", "again", mode=Conditional(version=base.version))
    assert _category(exc) == "stale_reference"
    assert (tmp_path / "b.txt").read_text() == "BETA"


def test_conditional_create_fails_when_someone_created_the_file_first(store: FileStore) -> None:
    store.write("new.txt", "first", mode=Conditional(content_hash=ABSENT))
    with pytest.raises(ToolError) as exc:
        store.write("new.txt", "second", mode=Conditional(content_hash=ABSENT))
    assert _category(exc) == "stale_reference"
    assert exc.value.error.current_version == sha256_hex(b"first")


def test_overwrite_and_append_need_no_base(store: FileStore, tmp_path: Path) -> None:
    store.write("a.txt", "one\n", mode=Overwrite())
    store.write("a.txt", "two\n", mode=Append())
    assert (tmp_path / "a.txt").read_text() == "one\ntwo\n"


def test_a_read_at_an_old_version_is_stale_and_names_the_current_hash(store: FileStore) -> None:
    base = store.read("c.txt")
    assert store.read("c.txt", mode=AtVersion(version=base.hash)).content == b"gamma"
    store.write("c.txt", "GAMMA", mode=Overwrite())
    with pytest.raises(ToolError) as exc:
        store.read("c.txt", mode=AtVersion(version=base.version))
    assert _category(exc) == "stale_reference"
    assert exc.value.error.current_version == sha256_hex(b"GAMMA")


def test_two_threads_racing_on_one_base_exactly_one_wins(store: FileStore, tmp_path: Path) -> None:
    base = store.read("a.txt").hash
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def writer(name: str) -> None:
        barrier.wait(timeout=10)
        try:
            store.write("a.txt", name, mode=Conditional(content_hash=base))
            outcomes[name] = "ok"
        except ToolError as exc:
            outcomes[name] = exc.error.category

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(outcomes.values()) in (["ok", "stale_reference"], ["conflict", "ok"])
    winner = next(n for n, o in outcomes.items() if o == "ok")
    assert (tmp_path / "a.txt").read_text() == winner


def test_a_writer_that_cannot_get_the_lock_in_time_gets_conflict(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    slow = FileStore(tmp_path, lock_timeout_s=0.05)
    base = slow.read("a.txt").hash
    with FileStore(tmp_path).snapshot() as snap:  # holds the shared lock, which excludes writers
        snap.read("a.txt")
        with pytest.raises(ToolError) as exc:
            slow.write("a.txt", "mine", mode=Conditional(content_hash=base))
    assert _category(exc) == "conflict"
    assert (tmp_path / "a.txt").read_text() == "alpha"


def test_a_switch_group_changes_every_file_together(store: FileStore, tmp_path: Path) -> None:
    writes = [
        GroupWrite(path=p, content=p.upper().encode(), expected_hash=store.read(p).hash)
        for p in ("a.txt", "b.txt", "c.txt")
    ]
    store.apply_group(writes, key="k1")
    assert [(tmp_path / p).read_text() for p in ("a.txt", "b.txt", "c.txt")] == ["A.TXT", "B.TXT", "C.TXT"]
    assert store.committed("k1") and not store.committed("k2")
    assert _leftovers(tmp_path) == []


def test_a_switch_group_with_one_outdated_hash_switches_nothing(store: FileStore, tmp_path: Path) -> None:
    writes = [
        GroupWrite(path=p, content=b"new", expected_hash=store.read(p).hash)
        for p in ("a.txt", "b.txt", "c.txt")
    ]
    (tmp_path / "b.txt").write_text("edited")
    with pytest.raises(ToolError) as exc:
        store.apply_group(writes, key="k1")
    assert _category(exc) == "stale_reference"
    assert exc.value.error.details["mismatched"] == {"b.txt": sha256_hex(b"edited")}
    assert [(tmp_path / p).read_text() for p in ("a.txt", "b.txt", "c.txt")] == ["alpha", "edited", "gamma"]
    assert not store.committed("k1")
    assert _leftovers(tmp_path) == []


class Crash(Exception):
    """Stands for the process dying between two renames."""


def _crash_at(index: int) -> Callable[[RenameStep], None]:
    def hook(step: RenameStep) -> None:
        if step.index == index:
            raise Crash(step.path)

    return hook


@pytest.mark.parametrize("crash_at", [1, 2])
def test_a_crash_between_renames_is_replayed_on_the_next_open(
    tmp_path: Path, store: FileStore, crash_at: int
) -> None:
    crashing = FileStore(tmp_path, between_renames=_crash_at(crash_at))
    writes = [
        GroupWrite(path=p, content=b"new " + p.encode(), expected_hash=None)
        for p in ("a.txt", "b.txt", "c.txt")
    ]
    with pytest.raises(Crash):
        crashing.apply_group(writes, key="switch-1")
    half = [(tmp_path / p).read_text() for p in ("a.txt", "b.txt", "c.txt")]
    assert half.count("alpha") + half.count("beta") + half.count("gamma") == 3 - crash_at  # really half done

    reopened = FileStore(tmp_path)
    assert [r.action for r in reopened.recovered] == ["replayed"]
    assert [(tmp_path / p).read_text() for p in ("a.txt", "b.txt", "c.txt")] == [
        "new a.txt",
        "new b.txt",
        "new c.txt",
    ]
    assert reopened.committed("switch-1")
    assert _leftovers(tmp_path) == []


def test_a_crash_that_lost_a_temporary_is_rolled_back_from_the_backups(
    tmp_path: Path, store: FileStore
) -> None:
    crashing = FileStore(tmp_path, between_renames=_crash_at(1))
    writes = [GroupWrite(path=p, content=b"new", expected_hash=None) for p in ("a.txt", "b.txt", "c.txt")]
    with pytest.raises(Crash):
        crashing.apply_group(writes, key="switch-2")
    for temp in tmp_path.glob(f".c.txt.*{TEMP_SUFFIX}"):
        temp.unlink()  # the new content of c.txt is gone: the switch cannot be finished
    reopened = FileStore(tmp_path)
    assert [r.action for r in reopened.recovered] == ["rolled_back"]
    assert [(tmp_path / p).read_text() for p in ("a.txt", "b.txt", "c.txt")] == ["alpha", "beta", "gamma"]
    assert not reopened.committed("switch-2")
    assert _leftovers(tmp_path) == []


def test_the_switch_environment_speaks_the_transactional_protocol(store: FileStore, tmp_path: Path) -> None:
    env = FileSwitchEnvironment(store)
    assert isinstance(env, Transactional)
    tx = env.begin("g1")
    tx.stage("a.txt", "A", expected_hash=store.read("a.txt").hash)
    with pytest.raises(ToolError) as exc:
        tx.stage("b.txt", "B", expected_hash=sha256_hex(b"not what is there"))
    assert _category(exc) == "stale_reference"
    tx.rollback()
    assert (tmp_path / "a.txt").read_text() == "alpha" and env.committed("g1") is False
    tx = env.begin("g2")
    tx.stage("a.txt", "A", expected_hash=store.read("a.txt").hash)
    tx.stage("b.txt", "B", expected_hash=None)
    tx.commit()
    assert (tmp_path / "a.txt").read_text() == "A" and (tmp_path / "b.txt").read_text() == "B"
    assert env.committed("g2") is True


def test_a_snapshot_never_sees_a_group_half_switched(store: FileStore, tmp_path: Path) -> None:
    rounds = 60
    store.apply_group([GroupWrite(path=p, content=b"start", expected_hash=None) for p in ("a.txt", "b.txt")])
    stop = threading.Event()

    def switcher() -> None:
        for n in range(rounds):
            store.apply_group(
                [GroupWrite(path=p, content=str(n).encode(), expected_hash=None) for p in ("a.txt", "b.txt")]
            )
        stop.set()

    thread = threading.Thread(target=switcher)
    thread.start()
    seen = 0
    while not stop.is_set() or seen == 0:
        with store.snapshot() as snap:
            assert snap.read("a.txt").content == snap.read("b.txt").content
        seen += 1
    thread.join(timeout=30)
    assert (tmp_path / "a.txt").read_text() == str(rounds - 1)
