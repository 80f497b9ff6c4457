from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

from actionspace.observation import LogRule, MemoryArtifactStore, shape


def numbered(count: int, start: int = 1) -> list[str]:
    return [f"step {n} ok" for n in range(start, start + count)]


def buried(error: list[str], total: int = 50_000, at: int = 25_000) -> str:
    lines = numbered(at - 1) + error
    lines += numbered(total - len(lines), start=len(lines) + 1)
    return "\n".join(lines) + "\n"


def test_an_error_buried_in_fifty_thousand_lines_is_kept_with_its_context() -> None:
    text = buried(["ERROR: connection refused to db-primary:5432"])
    shaped = shape({"exit_code": 2, "output": text}, rule="log-v1")
    assert shaped.data == {
        "exit_code": 2,
        "first_error_line": 25_000,
        "first_error": [
            "step 24997 ok",
            "step 24998 ok",
            "step 24999 ok",
            "ERROR: connection refused to db-primary:5432",
            *numbered(8, start=25_001),
        ],
        "tail": numbered(40, start=49_961),
        "total_lines": 50_000,
        "omitted_lines": 50_000 - 12 - 40,
    }
    assert not shaped.complete
    assert shaped.trimming is not None
    assert (shaped.trimming.rule, shaped.trimming.rule_version) == ("log", "1")
    assert shaped.trimming.original_bytes == len(text.encode())


def test_a_python_traceback_is_kept_whole() -> None:
    traceback = [
        "Traceback (most recent call last):",
        '  File "app/jobs.py", line 41, in run',
        "    order = load_order(job.order_id)",
        '  File "app/orders.py", line 88, in load_order',
        "    return rows[0]['customer_id']",
        "           ~~~~~~~^^^^^^^^^^^^^^^",
        "KeyError: 'customer_id'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "app/worker.py", line 12, in main',
        "    run(job)",
        "RuntimeError: job 4711 failed",
    ]
    data = shape(buried(traceback, total=1000, at=500), rule="log-v1").data
    assert data["first_error_line"] == 500
    block = data["first_error"]
    assert block[3 : 3 + len(traceback)] == traceback
    assert block[3 + len(traceback) :] == numbered(6, start=500 + len(traceback))


def test_a_long_java_stack_keeps_its_caused_by_line() -> None:
    stack = ['Exception in thread "main" java.lang.IllegalStateException: pool exhausted']
    stack += [f"\tat com.acme.Pool.acquire{n}(Pool.java:{n})" for n in range(150)]
    stack += ["Caused by: java.net.ConnectException: Connection refused"]
    stack += [f"\tat java.net.Socket.connect{n}(Socket.java:{n})" for n in range(150)]
    data = shape(buried(stack, total=2000, at=100), rule="log-v1").data
    block = data["first_error"]
    assert block[3 : 3 + 20] == stack[:20]
    assert block[23:26] == [
        {"_omitted_lines": 131},
        "Caused by: java.net.ConnectException: Connection refused",
        {"_omitted_lines": 98},
    ]
    assert block[26:] == stack[-52:] + numbered(8, start=402)
    assert data["omitted_lines"] == 2000 - sum(isinstance(line, str) for line in block) - len(data["tail"])


def test_the_exit_code_comes_from_a_completed_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print('building'); sys.exit('fatal: out of disk space')"],
        capture_output=True,
        text=True,
        check=False,
    )
    data = shape(done, rule="log-v1").data
    assert data["exit_code"] == 1
    assert data["first_error"] == ["building", "fatal: out of disk space"]
    assert data["first_error_line"] == 2


def test_small_fields_of_a_result_dict_ride_along() -> None:
    result = {"exit_code": 0, "command": "make test", "duration_s": 1.5, "env": {"A": "1"}, "output": "ok\n"}
    shaped = shape(result, rule="log-v1")
    assert shaped.data == {
        "exit_code": 0,
        "command": "make test",
        "duration_s": 1.5,
        "first_error_line": None,
        "first_error": [],
        "tail": ["ok"],
        "total_lines": 1,
        "omitted_lines": 0,
    }
    assert shaped.complete
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == 3


def test_stdout_and_stderr_are_read_in_turn() -> None:
    data = shape({"returncode": 3, "stdout": "compiling", "stderr": b"error: boom\n"}, rule="log-v1").data
    assert data["exit_code"] == 3
    assert data["first_error"] == ["compiling", "error: boom"]
    assert data["total_lines"] == 2


def test_words_that_only_look_like_errors_are_not_errors() -> None:
    herrings = [
        "checks passed, errors=0",
        "error_rate=0.000",
        "0 failed, 3 skipped",
        "tests/test_errors.py::test_error_mapping PASSED",
        "option --fail-fast disabled",
        "rotating /var/log/app/error.log",
        "no error found",
    ]
    data = shape("\n".join(herrings), rule="log-v1").data
    assert data["first_error_line"] is None
    assert data["tail"] == herrings


def test_coloured_errors_are_found_and_shown_without_escape_codes() -> None:
    data = shape("ok\n\x1b[31mERROR\x1b[0m disk full\n", rule="log-v1").data
    assert data["first_error"] == ["ok", "ERROR disk full"]


def test_long_lines_are_clipped_with_their_full_length() -> None:
    data = shape("x" * 5000 + "\nerror: " + "y" * 1000, rule="log-v1").data
    assert data["first_error"][0] == "x" * 400 + "…[+4600 chars]"
    assert data["first_error"][1] == "error: " + "y" * 393 + "…[+607 chars]"


def test_chunks_split_anywhere_give_the_same_result() -> None:
    text = buried(
        ["Traceback (most recent call last):", '  File "a.py", line 1', "ValueError: bad"], 3000, 1500
    )
    whole = shape(text, rule="log-v1")
    for size in (1, 7, 64, 4096):
        parts = (text[i : i + size] for i in range(0, len(text), size))
        assert shape(parts, rule="log-v1").data == whole.data
    raw = text.encode()
    assert shape((raw[i : i + 5] for i in range(0, len(raw), 5)), rule="log-v1").data == whole.data


def test_a_character_split_across_byte_chunks_is_decoded_whole() -> None:
    raw = "naïve error: café\n".encode()
    split = raw.index("é".encode()) + 1
    assert shape(iter([raw[:split], raw[split:]]), rule="log-v1").data["first_error"] == ["naïve error: café"]


def test_an_unterminated_huge_line_is_counted_not_held() -> None:
    def one_line() -> Iterator[str]:
        for _ in range(100):
            yield "z" * 100_000

    data = shape(one_line(), rule="log-v1").data
    assert data["total_lines"] == 1
    assert data["tail"] == ["z" * 400 + f"…[+{10_000_000 - 400} chars]"]


def test_a_tight_budget_keeps_the_error_line_before_the_tail() -> None:
    text = buried(["E" + "rror: " + "q" * 300], total=200, at=100).replace("ok", "ok " + "w" * 200)
    shaped = shape(text, rule="log-v1", max_bytes=256)
    assert shaped.trimming is not None
    assert shaped.trimming.kept_bytes <= 256
    assert shaped.data["first_error_line"] == 100
    assert shaped.data["first_error"][0].startswith("Error: qqq")


def test_the_full_log_goes_to_the_artifact_store_when_cut() -> None:
    store = MemoryArtifactStore()
    text = buried(["FAILED tests/test_api.py::test_refund"], total=5000, at=10)
    shaped = shape(iter(text.splitlines(keepends=True)), rule="log-v1", artifacts=store)
    assert shaped.artifact_ref is not None
    assert store.get(shaped.artifact_ref) == text.encode()


def test_the_rule_can_be_driven_directly() -> None:
    rule = LogRule(max_bytes=4096, fields={"exit_code": 1})
    for piece in ("one\ntw", "o\nfatal: no", " space\nthree"):
        rule.feed(piece)
    data, cut = rule.finish()
    assert data["first_error"] == ["one", "two", "fatal: no space", "three"]
    assert data["exit_code"] == 1
    assert not cut
