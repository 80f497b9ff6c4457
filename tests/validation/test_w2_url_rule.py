"""A URL allowlist as a demanding user expects it: hosts compared as a client reaches them.

Hosts are compared after case, trailing-dot and IDNA normalisation (a Cyrillic lookalike is
another host); userinfo that dresses up as a host, ports out of range and internal addresses given
as IP literals in any spelling a client accepts (decimal, octal, hex, short, IPv6, IPv4-mapped)
are refused with ``invalid_arguments``.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.catalog import ToolSpec, spec_from_function
from actionspace.errors import ConfigurationError
from actionspace.validation.semantic import URL, UrlRule, compile_checkers
from actionspace.validation.validator import Validated, compile_tool, validate
from actionspace.validation.verdicts import Accepted, Rejected


def _check(spec: ToolSpec, args: Any) -> Validated:
    return validate(compile_tool(spec), args, {}, None)


def _reason(spec: ToolSpec, url: str) -> str | None:
    result = _check(spec, {"url": url})
    if isinstance(result.verdict, Accepted):
        return None
    assert isinstance(result.verdict, Rejected)
    error = result.verdict.error
    assert error.category == "invalid_arguments" and error.recovery
    assert [f.path for f in error.field_errors] == ["/url"]
    return error.field_errors[0].message


def fetch_allowed(url: Annotated[str, UrlRule(hosts=("example.com", "bücher.de", "10.0.0.7"))]) -> None:
    """Fetch from a few hosts."""


def fetch_any(url: URL) -> None:
    """Fetch any public page."""


ALLOWED = spec_from_function(fetch_allowed, effect="read")
ANY = spec_from_function(fetch_any, effect="read")


@functools.cache
def _lan() -> ToolSpec:
    def fetch_lan(url: Annotated[str, UrlRule(allow_internal=True)]) -> None:
        """Fetch from the local network too."""

    return spec_from_function(fetch_lan, effect="read")


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/a",
        "https://EXAMPLE.com./a",  # case and the root's trailing dot name the same host
        "https://Example.COM:443/",
        "https://bücher.de/x",  # an allowed internationalised name, as typed
        "https://xn--bcher-kva.de/x",  # and as its A-label
        "https://BÜCHER.de/",
        "http://10.0.0.7/",  # an address the allowlist names itself
        "http://0x0a.0.0.07/",  # the same address, spelled in hex and octal
        "http://167772167/",
    ],
)
def test_an_allowed_host_is_reached_whatever_its_spelling(url: str) -> None:
    assert _reason(ALLOWED, url) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://ex\u0430mple.com/", "not allowed"),  # a Cyrillic "a"
        ("https://xn--exmple-4nf.com/", "not allowed"),
        ("https://example.com../", "empty label"),
        ("https://\uff45xample.com/", "plain"),  # fullwidth: clients disagree on what it names
        ("https://example.com:99999/", "port"),
        ("https://example.com:0x50/", "port"),
        ("https://example.com%2e/", "percent"),
        ("https://user:secret@example.com/", "userinfo"),
        ("https://example.com:443@evil.com/", "userinfo"),
        ("https://evil.com@example.com/", "userinfo"),
        ("https://a@b@example.com/", "userinfo"),
        ("https://10.0.0.8/", "not allowed"),
    ],
)
def test_a_host_that_only_looks_allowed_is_refused(url: str, why: str) -> None:
    reason = _reason(ALLOWED, url)
    assert reason is not None and why in reason, reason


def test_a_plain_user_name_before_an_allowed_host_is_still_accepted() -> None:
    assert _reason(ALLOWED, "https://user@EXAMPLE.com:8443/a?b#c") is None


INTERNAL = [
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[0:0:0:0:0:ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/",
    "http://192.168.0.1/",
    "http://172.16.0.1/",
    "http://100.100.100.200/",
    "http://0.0.0.0/",
    "http://0/",
    "http://224.0.0.1/",
    "http://localhost:8080/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://metadata.google.internal/computeMetadata/v1/",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_an_internal_address_in_any_spelling_is_refused_by_default(url: str) -> None:
    reason = _reason(ANY, url)
    assert reason is not None and "internal" in reason, reason
    assert _reason(_lan(), url) is None


@pytest.mark.parametrize(
    "url", ["http://256.0.0.1/", "http://1.2.3.4.5/", "http://0x1g.0.0.1/", "http://1.2.3.09/"]
)
def test_a_host_ending_in_a_number_that_is_no_address_is_refused(url: str) -> None:
    assert _reason(ANY, url) is not None
    assert _reason(_lan(), url) is not None


@pytest.mark.parametrize(
    "url", ["https://93.184.215.14/", "https://[2606:4700::1111]/", "https://example.org/"]
)
def test_a_public_address_is_accepted(url: str) -> None:
    assert _reason(ANY, url) is None


def test_the_marker_says_allow_internal_only_when_it_is_set() -> None:
    assert UrlRule().marker() == {"type": "url", "schemes": ["http", "https"]}
    assert UrlRule(allow_internal=True).marker()["allow_internal"] is True


def test_a_hand_written_marker_with_a_host_that_is_no_host_is_refused_at_registration() -> None:
    schema = {
        "type": "object",
        "properties": {"u": {"type": "string", "x-actionspace": {"type": "url", "hosts": ["a b.com"]}}},
    }
    with pytest.raises(ConfigurationError):
        compile_checkers(schema)
    with pytest.raises(ConfigurationError):
        UrlRule(hosts=("http://example.com/",))


def _spelled(addr: int, form: str) -> str:
    parts = [(addr >> s) & 0xFF for s in (24, 16, 8, 0)]
    if form == "dec":
        return str(addr)
    if form == "hex":
        return hex(addr)
    if form == "octal":
        return ".".join("0" + oct(p)[2:] for p in parts)
    if form == "short":
        return f"{parts[0]}.{addr & 0xFFFFFF}"
    if form == "mapped":
        return f"[::ffff:{'.'.join(map(str, parts))}]"
    return ".".join(map(str, parts))


@settings(max_examples=300, deadline=None)
@given(
    addr=st.integers(0, 2**32 - 1),
    form=st.sampled_from(["dotted", "dec", "hex", "octal", "short", "mapped"]),
    path=st.sampled_from(["/", "/a?b=1", ":8080/x", "#f"]),
)
def test_every_spelling_of_an_ipv4_address_is_judged_as_that_address(addr: int, form: str, path: str) -> None:
    ip = ipaddress.IPv4Address(addr)
    url = f"http://{_spelled(addr, form)}{path}"
    refused = _reason(ANY, url) is not None
    assert refused == (not ip.is_global or ip.is_multicast), url


@settings(max_examples=400, deadline=None)
@given(
    host=st.text(alphabet=st.sampled_from(list("aZ09.-_:[]%@x\u0430\uff45\u00df\u200b/")), max_size=24),
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp"]),
)
def test_any_host_text_ends_in_a_verdict_never_an_exception(host: str, scheme: str) -> None:
    for spec in (ANY, ALLOWED, _lan()):
        reason = _reason(spec, f"{scheme}://{host}/p")
        assert reason is None or isinstance(reason, str)
