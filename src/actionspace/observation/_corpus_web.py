"""Generated search outputs and HTML pages for the trimming evaluation (see ``_corpus_cases``)."""

from __future__ import annotations

import random
from typing import Any

from actionspace.observation._corpus_cases import Case, Fact, stream_of

__all__ = ["search_cases", "web_cases"]

_IDENTS = (
    "config", "session", "cache", "retry", "token", "index", "shard", "queue", "order", "refund", "user",
)  # fmt: skip


def _code(rng: random.Random) -> str:
    a, b, c = rng.sample(_IDENTS, 3)
    return f"    {a}_{b} = {c}.get_{a}({b}, timeout={rng.randint(1, 90)})"


def search_cases(seed: int) -> list[Case]:
    """Seven search outputs: grep text with and without context, ripgrep headings, API records."""
    rng = random.Random(seed + 1)
    cases: list[Case] = []

    bundle = [
        f"vendor/bundle.min.js:{n}:var r{n}=function issue_refund(e,t){{return e.post('/refund',t)}}"
        for n in range(1, 3001)
    ]
    text = "\n".join(
        [
            *bundle,
            "src/billing/refund.py-41-",
            "src/billing/refund.py:42:def issue_refund(order_id: str, amount: Money) -> Refund:",
            'src/billing/refund.py-43-    """Refund part of an order."""',
            "--",
            "src/api/views.py:310:        refund = issue_refund(order.id, total)",
        ]
    )
    cases.append(
        Case(
            name="vendored-bundle",
            rule="search-v1",
            build=lambda: text,
            facts=(
                Fact(kind="hit", value="src/billing/refund.py", line=42),
                Fact(kind="hit", value="src/api/views.py", line=310),
            ),
        )
    )

    todo = [
        f"pkg/mod{f:03d}/handler.go:{line}:\t// TODO: {rng.choice(_IDENTS)} handling"
        for f in range(300)
        for line in sorted(rng.sample(range(5, 900), 3))
    ]
    todo_text = "\n".join(todo) + "\n"
    seventh = todo[18].split(":")
    cases.append(
        Case(
            name="todo-count",
            rule="search-v1",
            build=lambda: todo_text,
            facts=(
                Fact(kind="count", value=900),
                Fact(kind="hit", value=seventh[0], line=int(seventh[1])),
            ),
        )
    )

    grep_c: list[str] = []
    target = 0
    for f in range(40):
        path = f"config/svc{f:02d}/app.yaml"
        for k, line in enumerate(sorted(rng.sample(range(10, 400), 3))):
            after = f"connect_timeout_ms: {rng.randint(100, 9999)}"
            if f == 33 and k == 0:
                target, after = line, "connect_timeout_ms: 30000  # raised after incident 4711"
            grep_c += [f"{path}-{line - 2}-db:", f"{path}-{line - 1}-  host: db{f}.internal"]
            grep_c += [
                f"{path}:{line}:  timeout: {rng.randint(1, 60)}s",
                f"{path}-{line + 1}-  {after}",
                "--",
            ]
    cases.append(
        Case(
            name="grep-context",
            rule="search-v1",
            build=lambda: "\n".join(grep_c),
            facts=(
                Fact(kind="hit", value="config/svc33/app.yaml", line=target),
                Fact(kind="text", value="connect_timeout_ms: 30000  # raised after incident 4711"),
            ),
        )
    )

    records: list[dict[str, Any]] = []
    for f in range(30):
        for n in range(5):
            snippet, around = _code(rng), "\n".join(_code(rng) for _ in range(3))
            records.append(
                {"path": f"lib/svc_{f}.py", "line_number": 20 * n + f, "snippet": snippet, "context": around}
            )
    records += [dict(r) for r in records]
    rng.shuffle(records)
    records.append({"path": "src/retry/policy.py", "line_number": 12, "snippet": "class RetryPolicy:"})
    cases.append(
        Case(
            name="api-records-duplicated",
            rule="search-v1",
            build=lambda: {"query": "timeout=", "results": records},
            facts=(
                Fact(kind="hit", value="src/retry/policy.py", line=12),
                Fact(kind="count", value=151),
                Fact(kind="hit", value=str(records[0]["path"]), line=int(records[0]["line_number"])),
            ),
        )
    )

    heading: list[str] = []
    for f in range(20):
        heading += [
            f"docs/page{f:02d}.md",
            *[f"{line}:see the retry policy ({line})" for line in range(3, 60, 7)],
            "",
        ]
    cases.append(
        Case(
            name="rg-heading",
            rule="search-v1",
            build=lambda: "\n".join(heading),
            facts=(
                Fact(kind="hit", value="docs/page15.md", line=3),
                Fact(kind="hit", value="docs/page00.md", line=10),
            ),
        )
    )

    noisy = "".join(
        f"logs/app-2024-05-0{n % 5 + 1}.log:{n + 1}:WARN retry scheduled for job {rng.randint(1, 99999)}\n"
        for n in range(40_000)
    )
    noisy += "src/retry.py:77:def schedule_retry(job, attempt):\n"
    cases.append(
        Case(
            name="stream-many-hits",
            rule="search-v1",
            build=stream_of(noisy, 8191),
            facts=(Fact(kind="hit", value="src/retry.py", line=77), Fact(kind="count", value=40_001)),
        )
    )

    small = "README.md:3:Install with pip.\nREADME.md:9:Run the tests.\ndocs/setup.md:14:pip install -e .\n"
    cases.append(
        Case(
            name="small",
            rule="search-v1",
            build=lambda: small,
            facts=(
                Fact(kind="hit", value="README.md", line=3),
                Fact(kind="hit", value="README.md", line=9),
                Fact(kind="hit", value="docs/setup.md", line=14),
            ),
        )
    )
    return cases


def _head(rng: random.Random, title: str, kilobytes: int) -> str:
    css = "".join(
        f".c{n}{{margin:{rng.randint(0, 9)}px;color:#{rng.randint(0, 0xFFFFFF):06x}}}"
        for n in range(kilobytes * 30)
    )
    js = "".join(f"window.t{n}=function(a){{return a*{rng.randint(2, 99)}}};" for n in range(kilobytes * 20))
    return (
        f"<!doctype html><html><head><title>{title}</title><style>{css}</style><script>{js}</script></head>"
    )


def _nav(rng: random.Random, links: int) -> str:
    items = "".join(f'<li><a href="/c/{n}">{rng.choice(_IDENTS).title()} {n}</a></li>' for n in range(links))
    return f'<header><nav><ul>{items}</ul></nav><input type="search" name="q" placeholder="Search"></header>'


def web_cases(seed: int) -> list[Case]:
    """Six pages: checkout, login, a declined payment, search results, settings, a docs article."""
    rng = random.Random(seed + 2)
    cases: list[Case] = []

    def add(name: str, html: str, facts: tuple[Fact, ...], stream: bool = False) -> None:
        build = stream_of(html, 8192) if stream else (lambda: html)
        cases.append(Case(name=name, rule="web-v1", build=build, facts=facts))

    add(
        "checkout",
        _head(rng, "Checkout", 80) + "<body>" + _nav(rng, 200) + "<main><h1>Checkout</h1>"
        '<p>Total: <b>42.00 EUR</b></p><form action="/orders/123/pay" method="post">'
        '<label for="cp">Coupon code</label><input id="cp" name="coupon">'
        '<select name="shipping"><option>Standard</option><option selected>Express</option></select>'
        '<button type="submit">Place order</button></form>'
        '<a href="/orders/123/cancel">Cancel order</a></main>'
        "<footer>"
        + "".join(f'<a href="/legal/{n}">Legal {n}</a>' for n in range(100))
        + "</footer></body></html>",
        (
            Fact(kind="text", value="Place order"),
            Fact(kind="link", value="/orders/123/cancel"),
            Fact(kind="field", value="coupon"),
            Fact(kind="text", value="Total: 42.00 EUR"),
        ),
        stream=True,
    )
    add(
        "login",
        _head(rng, "Sign in", 120) + "<body>" + _nav(rng, 80) + '<main><form action="/session" method="post">'
        '<input type="email" name="email" placeholder="you@example.com">'
        '<input type="password" name="password">'
        '<input type="hidden" name="csrf" value="x"><button>Sign in</button></form>'
        '<a href="/account/recover">Forgot password?</a></main></body></html>',
        (
            Fact(kind="field", value="email"),
            Fact(kind="field", value="password"),
            Fact(kind="text", value="Sign in"),
            Fact(kind="link", value="/account/recover"),
        ),
    )
    cards = "".join(
        f'<div class="card"><a href="/p/{n}">Product {n}</a>'
        f"<p>{' '.join(rng.choices(_IDENTS, k=12))}</p></div>"
        for n in range(400)
    )
    add(
        "payment-declined",
        _head(rng, "Your basket", 20) + "<body>" + _nav(rng, 50) + f"<main>{cards}"
        '<div role="alert">Payment declined: card expired (code 51)</div>'
        '<a href="/checkout/payment">Update payment method</a></main></body></html>',
        (
            Fact(kind="text", value="Payment declined: card expired (code 51)"),
            Fact(kind="link", value="/checkout/payment"),
        ),
    )
    results = "".join(
        f'<div class="r"><h3><a href="https://example.org/{n}">Router guide part {n}</a></h3>'
        f"<p>{' '.join(rng.choices(_IDENTS, k=30))}</p></div>"
        for n in range(100)
    )
    add(
        "search-results",
        _head(rng, "router - Search", 30) + "<body>" + _nav(rng, 30) + "<main><p>About 12,400 results</p>"
        f'{results}<a href="/search?q=router&page=2">Next</a></main></body></html>',
        (
            Fact(kind="text", value="About 12,400 results"),
            Fact(kind="link", value="https://example.org/0"),
            Fact(kind="link", value="/search?q=router&page=2"),
        ),
    )
    zones = "".join(f"<option>Zone/{n:03d}</option>" for n in range(400))
    add(
        "settings",
        _head(rng, "Settings", 40) + "<body>" + _nav(rng, 60) + '<main><h1>Settings</h1><form method="post">'
        f'<div style="display: none">Delete account permanently</div><select name="timezone">{zones}'
        '<option selected>Europe/Berlin</option></select><label><input type="checkbox" name="newsletter"> '
        "Newsletter</label><button>Save changes</button></form></main></body></html>",
        (
            Fact(kind="field", value="timezone"),
            Fact(kind="field", value="newsletter"),
            Fact(kind="text", value="Save changes"),
        ),
    )
    sections = "".join(
        f"<h2>{'Breaking changes in 3.0' if n == 17 else f'Section {n}'}</h2>"
        f"<p>{' '.join(rng.choices(_IDENTS, k=300))}</p>"
        for n in range(30)
    )
    add(
        "docs-article",
        _head(rng, "Release notes", 10) + "<body>" + _nav(rng, 40) + f"<main><h1>Release notes</h1>{sections}"
        '<a href="/downloads/3.0">Download 3.0</a></main></body></html>',
        (Fact(kind="text", value="Breaking changes in 3.0"), Fact(kind="link", value="/downloads/3.0")),
        stream=True,
    )
    return cases
