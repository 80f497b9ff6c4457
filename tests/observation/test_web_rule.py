from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

from actionspace.observation import WebRule, shape

PAGE = """<!doctype html><html><head><title>Checkout &amp; pay</title>
<style>.x{color:red}</style><script>var secret = "script text";</script></head>
<body><nav><a href="/">Home</a><a href="/shop">Shop</a></nav>
<main><h1>Checkout</h1><p>Total: <b>42.00</b> EUR</p>
<div hidden>hidden text</div><span aria-hidden="true">icon text</span>
<p style="display: none">collapsed text</p><noscript>enable js</noscript><template><p>tpl</p></template>
<form action="/orders/123/pay" method="post">
<label for="cp">Coupon code</label><input id="cp" name="coupon" placeholder="SAVE10">
<input type="hidden" name="csrf" value="token">
<label><input type="checkbox" name="terms" required> I accept</label>
<select name="shipping"><option>Standard</option><option selected>Express</option></select>
<textarea name="note">Leave at door</textarea>
<button type="submit">Place order</button></form>
<a href="/orders/123/cancel">Cancel order</a><div role="alert">Card expires soon</div>
</main></body></html>"""


def test_interactive_elements_are_numbered_in_document_order() -> None:
    data = shape(PAGE, rule="web-v1").data
    assert data["title"] == "Checkout & pay"
    assert data["headings"] == ["# Checkout"]
    form = {"form": 2}
    assert data["elements"] == [
        {"i": 0, "tag": "a", "href": "/", "text": "Home"},
        {"i": 1, "tag": "a", "href": "/shop", "text": "Shop"},
        {"i": 2, "tag": "form", "action": "/orders/123/pay", "method": "post"},
        {
            "i": 3,
            "tag": "input",
            "name": "coupon",
            "placeholder": "SAVE10",
            "id": "cp",
            **form,
            "label": "Coupon code",
        },
        {
            "i": 4,
            "tag": "input",
            "type": "checkbox",
            "name": "terms",
            "required": True,
            **form,
            "label": "I accept",
        },
        {
            "i": 5,
            "tag": "select",
            "name": "shipping",
            **form,
            "options": ["Standard", "Express"],
            "selected_option": "Express",
        },
        {"i": 6, "tag": "textarea", "name": "note", **form, "text": "Leave at door"},
        {"i": 7, "tag": "button", "type": "submit", **form, "text": "Place order"},
        {"i": 8, "tag": "a", "href": "/orders/123/cancel", "text": "Cancel order"},
        {"i": 9, "tag": "div", "role": "alert", "text": "Card expires soon"},
    ]


def test_only_visible_text_is_kept() -> None:
    shaped = shape(PAGE, rule="web-v1")
    assert shaped.data["text"] == [
        "Home Shop",
        "Checkout",
        "Total: 42.00 EUR",
        "Coupon code",
        "I accept",
        "Leave at door Place order",
        "Cancel order",
        "Card expires soon",
    ]
    joined = " ".join(shaped.data["text"])
    for invisible in ("script text", "hidden text", "icon text", "collapsed text", "enable js", "tpl", ".x{"):
        assert invisible not in joined
    assert shaped.complete


def test_the_url_of_a_fetched_page_rides_along() -> None:
    data = shape({"url": "https://shop.example/checkout", "status": 200, "html": PAGE}, rule="web-v1").data
    assert data["url"] == "https://shop.example/checkout"
    assert data["status"] == 200


def big_page(links: int = 400) -> str:
    nav = "".join(f'<a href="/c/{n}">Category number {n}</a>' for n in range(links))
    cards = "".join(
        f'<div><a href="/p/{n}">Product {n}</a><p>{"lorem ipsum " * 20}</p></div>' for n in range(links)
    )
    form = '<form action="/pay"><input name="card"><button>Pay now</button></form>'
    return (
        f"<html><head><title>Shop</title></head><body><nav>{nav}</nav><main>{cards}{form}"
        '<a href="/next">Next page</a></main></body></html>'
    )


def test_indices_stay_the_same_when_the_budget_shrinks() -> None:
    page = big_page(links=100)

    def key(element: dict[str, object]) -> tuple[object, ...]:
        return (element["tag"], element.get("href"), element.get("name"), element.get("text"))

    wide = {key(e): e["i"] for e in shape(page, rule="web-v1", max_bytes=200_000).data["elements"]}
    assert len(wide) == 204
    narrow = shape(page, rule="web-v1", max_bytes=2048)
    assert narrow.trimming is not None
    assert narrow.trimming.kept_bytes <= 2048
    assert narrow.data["omitted_elements"] > 0
    for element in narrow.data["elements"]:
        assert wide[key(element)] == element["i"]


def test_controls_and_content_links_outrank_navigation_under_a_tight_budget() -> None:
    data = shape(big_page(), rule="web-v1", max_bytes=4096).data
    tags = {(e["tag"], e.get("name"), e.get("text")) for e in data["elements"]}
    assert {("form", None, None), ("input", "card", None), ("button", None, "Pay now")} <= tags
    hrefs = [e.get("href") for e in data["elements"] if e["tag"] == "a"]
    assert "/next" in hrefs
    assert "/p/0" in hrefs
    assert not any(h.startswith("/c/") for h in hrefs)


def test_a_page_streamed_in_small_chunks_reads_like_the_whole_page() -> None:
    whole = shape(PAGE, rule="web-v1").data
    for size in (1, 5, 64):
        assert shape(iter(PAGE[i : i + size] for i in range(0, len(PAGE), size)), rule="web-v1").data == whole


def test_an_unterminated_comment_does_not_hold_the_stream() -> None:
    def page() -> Iterator[str]:
        yield "<html><body><p>Before</p><!-- "
        for _ in range(400):
            yield "never closed " * 5000

    tracemalloc.start()
    try:
        shaped = shape(page(), rule="web-v1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert shaped.data["text"] == ["Before"]
    assert not shaped.complete
    assert peak < 8 * 1024 * 1024


def test_malformed_markup_still_yields_elements() -> None:
    html = '<div><p>Unclosed <a href="/a">A<b>bold</a> <button>Go</div></span><![weird <input name=q>'
    data = shape(html, rule="web-v1").data
    assert [(e["tag"], e.get("href") or e.get("name") or e.get("text")) for e in data["elements"]] == [
        ("a", "/a"),
        ("button", "Go"),
    ]


def test_the_rule_can_be_driven_directly() -> None:
    rule = WebRule(max_bytes=1024)
    rule.feed("<title>T</title><a hr")
    rule.feed('ef="/x">X</a>')
    data, cut = rule.finish()
    assert data["elements"] == [{"i": 0, "tag": "a", "href": "/x", "text": "X"}]
    assert not cut
