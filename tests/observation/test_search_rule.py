from __future__ import annotations

from collections.abc import Iterator

from actionspace.observation import shape


def test_grep_hits_keep_path_line_and_text() -> None:
    grep = "src/a.py:3:import os\nsrc/a.py:10:    os.remove(path)\ndocs/b.md:7:Call os.remove with care.\n"
    shaped = shape(grep, rule="search-v1")
    assert shaped.data == {
        "total_hits": 3,
        "files": 2,
        "hits": [
            {"path": "src/a.py", "line": 3, "text": "import os"},
            {"path": "src/a.py", "line": 10, "text": "    os.remove(path)"},
            {"path": "docs/b.md", "line": 7, "text": "Call os.remove with care."},
        ],
        "omitted_hits": 0,
    }
    assert shaped.complete
    assert shaped.trimming is not None
    assert shaped.trimming.rule == "search"


def test_a_noisy_file_cannot_hide_the_matches_in_other_files() -> None:
    bundle = [f"vendor/bundle.min.js:{n}:function issue_refund(e){{}}" for n in range(1, 3001)]
    tail = [
        "src/billing/refund.py:42:def issue_refund(order_id):",
        "src/api/views.py:310:    issue_refund(order.id)",
    ]
    data = shape("\n".join(bundle + tail), rule="search-v1").data
    assert data["total_hits"] == 3002
    assert data["files"] == 3
    assert [(h["path"], h["line"]) for h in data["hits"]] == [
        *[("vendor/bundle.min.js", n) for n in range(1, 6)],
        ("src/billing/refund.py", 42),
        ("src/api/views.py", 310),
    ]
    assert data["omitted_hits"] == 2995
    assert "omitted_files" not in data


def test_context_lines_attach_before_and_after_their_hit() -> None:
    grep = "\n".join(
        [
            "cfg/app.yaml-16-db:",
            "cfg/app.yaml-17-  host: db1",
            "cfg/app.yaml:18:  timeout: 5s",
            "cfg/app.yaml-19-  retries: 3",
            "cfg/app.yaml-20-cache:",
            "--",
            "cfg/ci.yaml:4:timeout: 30m",
        ]
    )
    data = shape(grep, rule="search-v1").data
    assert data["hits"] == [
        {
            "path": "cfg/app.yaml",
            "line": 18,
            "text": "  timeout: 5s",
            "before": ["16-db:", "17-  host: db1"],
            "after": ["19-  retries: 3", "20-cache:"],
        },
        {"path": "cfg/ci.yaml", "line": 4, "text": "timeout: 30m"},
    ]


def test_duplicate_records_are_counted_once() -> None:
    records = [
        {
            "file": "lib/x.py",
            "line_number": 5,
            "snippet": "retry(timeout=3)",
            "context": "a\nretry(timeout=3)\nb",
        },
        {"file": "lib/y.py", "line_number": "9", "snippet": "timeout = 10"},
    ]
    shaped = shape({"query": "timeout", "results": records * 3}, rule="search-v1")
    assert shaped.data == {
        "query": "timeout",
        "total_hits": 2,
        "files": 2,
        "hits": [
            {
                "path": "lib/x.py",
                "line": 5,
                "text": "retry(timeout=3)",
                "context": ["a", "retry(timeout=3)", "b"],
            },
            {"path": "lib/y.py", "line": 9, "text": "timeout = 10"},
        ],
        "omitted_hits": 0,
        "duplicates": 4,
    }
    assert shaped.complete


def test_ripgrep_heading_groups_are_read() -> None:
    rg = "docs/a.md\n3:retry policy\n9:retry budget\n\nsrc/retry.py\n77:def schedule_retry(job):\n"
    data = shape(rg, rule="search-v1").data
    assert [(h["path"], h["line"], h["text"]) for h in data["hits"]] == [
        ("docs/a.md", 3, "retry policy"),
        ("docs/a.md", 9, "retry budget"),
        ("src/retry.py", 77, "def schedule_retry(job):"),
    ]
    assert "unparsed_lines" not in data


def test_files_past_the_kept_ones_are_counted_and_named() -> None:
    grep = "".join(f"pkg/m{n:03d}.go:1:// TODO\n" for n in range(100))
    shaped = shape(grep, rule="search-v1")
    data = shaped.data
    assert data["total_hits"] == 100
    assert data["files"] == 100
    shown = [h["path"] for h in data["hits"]]
    assert shown == [f"pkg/m{n:03d}.go" for n in [*range(25), *range(75, 100)]]
    assert data["omitted_files"] == {"count": 50, "paths": [f"pkg/m{n:03d}.go" for n in range(25, 45)]}
    assert not shaped.complete


def test_lines_that_are_not_hits_are_counted_and_make_it_incomplete() -> None:
    shaped = shape("a.py:1:x = 1\nBinary file blob.bin matches\n", rule="search-v1")
    assert shaped.data["unparsed_lines"] == 1
    assert not shaped.complete


def test_a_streamed_search_keeps_the_last_file() -> None:
    def lines() -> Iterator[bytes]:
        for n in range(40_000):
            yield f"logs/app-{n % 5}.log:{n + 1}:WARN retry\n".encode()
        yield b"src/retry.py:77:def schedule_retry(job):\n"

    data = shape(lines(), rule="search-v1").data
    assert data["total_hits"] == 40_001
    assert {"path": "src/retry.py", "line": 77, "text": "def schedule_retry(job):"} in data["hits"]


def test_a_tight_budget_keeps_fewer_hits_within_it() -> None:
    grep = "".join(f"src/f{n}.py:{n}:value = {'x' * 200}\n" for n in range(60))
    shaped = shape(grep, rule="search-v1", max_bytes=1024)
    assert shaped.trimming is not None
    assert shaped.trimming.kept_bytes <= 1024
    assert shaped.data["total_hits"] == 60
    assert 0 < len(shaped.data["hits"]) < 60
    assert shaped.data["hits"][0]["text"].endswith("chars]")
