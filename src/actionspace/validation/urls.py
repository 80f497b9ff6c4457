"""URL checks: the host a URL names, compared as an HTTP client will reach it.

A :class:`~actionspace.validation.semantic.UrlRule` is checked by :func:`url_check`. The host is
read once, the way clients read it, and compared in canonical form:

- a name is lower-cased, loses the root's trailing dot (``EXAMPLE.com.`` is ``example.com``) and
  is written in IDNA A-labels (``bücher.de`` is ``xn--bcher-kva.de``), so a lookalike in another
  script (``ex\\u0430mple.com``, a Cyrillic ``a``) is another host. A label that IDNA would
  rewrite beyond its case (fullwidth letters, ``ß``) is refused: clients disagree on what it names;
- a host ending in a number is an IPv4 address as the WHATWG URL standard reads it (``2130706433``,
  ``0x7f.1``, ``0177.0.0.1`` and ``127.1`` are all ``127.0.0.1``), or no host at all;
- userinfo that could be read as a host (``example.com:443@evil.com``, ``a@b@host``) or that
  carries a password is refused; a plain user name (``user@host``) is not;
- unless the rule says ``allow_internal``, a host that is not a public address is refused: IP
  literals (whatever their spelling, IPv6 ones too, and IPv4 addresses embedded in IPv6 ones:
  mapped, compatible, 6to4, Teredo, NAT64) that are loopback, private, link-local (cloud metadata
  at ``169.254.169.254``), shared, reserved, unspecified or multicast, and the names reserved for
  the local host and private networks (``localhost``, ``*.localhost``, ``*.internal``, ``*.local``,
  ``*.home.arpa``). An address or name the rule's ``hosts`` lists itself is allowed: the list is
  explicit. Names are not resolved here: a public name whose DNS points inside is the network's
  to stop (egress rules), not the validator's.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from urllib.parse import SplitResult, urlsplit

from actionspace.errors import ConfigurationError

__all__ = ["canonical_host", "url_check"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_AMBIGUOUS = re.compile(r"[\\\s\x00-\x1f\x7f]")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_INTERNAL_NAMES = ("localhost",)
_INTERNAL_SUFFIXES = (".localhost", ".internal", ".local", ".home.arpa")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


class _Refused(ValueError):
    """Why a host is refused (the field error's message)."""


def canonical_host(host: str) -> str:
    """``host`` as the client reaches it: an IP address in its standard text, or a lower-case
    name in A-labels without the trailing dot. Raises ``ValueError`` (its message says why) when
    it names no host."""
    if ":" in host:
        return str(_ipv6(host.strip("[]")))
    if "%" in host:
        raise _Refused("URL host holds a percent-escape; write the host plainly")
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if any(not label for label in labels):
        raise _Refused(f"URL host {host!r} has an empty label")
    if _numeric(labels[-1]):
        return str(_ipv4(labels))
    out = [_a_label(label, host) for label in labels]
    return ".".join(out)


def _a_label(label: str, host: str) -> str:
    if label.isascii():
        ascii_label = label.lower()
    else:
        try:
            ascii_label = label.encode("idna").decode("ascii")
            plain = ascii_label.encode("ascii").decode("idna")
        except UnicodeError as exc:
            raise _Refused(f"URL host {host!r} is not a valid internationalised name") from exc
        if plain != label.lower():
            raise _Refused(
                f"URL host {host!r} is not written plainly (IDNA rewrites {label!r}); write {plain!r}"
            )
    if not _LABEL.match(ascii_label):
        raise _Refused(f"URL host {host!r} is not a host name")
    return ascii_label


def _numeric(label: str) -> bool:
    """WHATWG "ends in a number": the last label is digits, or a 0x hex number."""
    if label.isascii() and label.isdigit():
        return True
    return label[:2] in ("0x", "0X") and all(c in "0123456789abcdefABCDEF" for c in label[2:])


def _ipv4(labels: Sequence[str]) -> ipaddress.IPv4Address:
    """The WHATWG IPv4 parser: up to four parts, each decimal, octal (leading 0) or hex (0x)."""
    if len(labels) > 4:
        raise _Refused("URL host ends in a number but is no IPv4 address (more than four parts)")
    parts = [_ipv4_part(p) for p in labels]
    if any(p > 255 for p in parts[:-1]) or parts[-1] >= 256 ** (5 - len(parts)):
        raise _Refused("URL host ends in a number but is no IPv4 address (a part out of range)")
    value = parts[-1]
    for i, part in enumerate(parts[:-1]):
        value += part << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _ipv4_part(part: str) -> int:
    base, digits = 10, part
    if part[:2] in ("0x", "0X"):
        base, digits = 16, part[2:] or "0"
    elif len(part) > 1 and part.startswith("0"):
        base, digits = 8, part[1:]
    if not digits.isascii() or not digits.isalnum():
        raise _Refused(f"URL host part {part!r} is no number")
    try:
        return int(digits, base)
    except ValueError:
        raise _Refused(f"URL host part {part!r} is no number in base {base}") from None


def _ipv6(text: str) -> ipaddress.IPv6Address:
    if "%" in text:
        raise _Refused("URL host names an IPv6 zone; zones are refused")
    try:
        return ipaddress.IPv6Address(text)
    except ValueError as exc:
        raise _Refused(f"URL host is no IPv6 address: {exc}") from None


def _internal(host: str) -> bool:
    """True when the canonical ``host`` is not a public place to reach."""
    if host in _INTERNAL_NAMES or host.endswith(_INTERNAL_SUFFIXES):
        return True
    try:
        addr: Address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return _internal_address(addr)


def _internal_address(addr: Address) -> bool:
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:  # the client connects to the IPv4 address itself
            return _internal_address(addr.ipv4_mapped)
        inner = [addr.sixtofour, addr.teredo[1] if addr.teredo else None]
        if addr in _NAT64 or (addr in _COMPATIBLE and int(addr) > 1):
            inner.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
        if any(a is not None and _internal_address(a) for a in inner):
            return True
    return not addr.is_global or addr.is_multicast


def _userinfo(parts: SplitResult) -> str | None:
    """Why the URL's userinfo is refused, or None."""
    if "@" not in parts.netloc:
        return None
    info = parts.netloc.rpartition("@")[0]
    if any(c in info for c in ":@.%"):
        return (
            "URL userinfo (before '@') holds ':', '@', '.' or '%': a reader may take it for the host; "
            "drop the userinfo"
        )
    return None


def url_check(
    schemes: Sequence[str], hosts: Sequence[str] | None, *, allow_internal: bool = False
) -> Callable[[object], str | None]:
    """The check of a URL marker: None when ``value`` is acceptable, else why not. Raises
    :class:`~actionspace.errors.ConfigurationError` when a listed host names no host."""
    allowed: frozenset[str] | None = None
    if hosts is not None:
        try:
            allowed = frozenset(canonical_host(str(h).lower()) for h in hosts)
        except ValueError as exc:
            raise ConfigurationError(f"UrlRule hosts: {exc}") from None
    wanted = frozenset(s.lower() for s in schemes)

    def check(value: object) -> str | None:
        if not isinstance(value, str):
            return None
        odd = _AMBIGUOUS.search(value)
        if odd is not None:
            # read one way here (urlsplit drops some, keeps the rest in the userinfo) and another
            # by clients: WHATWG reads a backslash as "/", so with one between "evil.com" and
            # "@allowed.com" urlsplit names allowed.com while a browser goes to evil.com
            return f"URL holds {odd.group(0)!r} (a backslash, whitespace or a control character)"
        try:
            parts = urlsplit(value)
            host = parts.hostname
            parts.port  # noqa: B018 - reading it checks it (a port out of range raises)
        except ValueError as exc:
            return f"not a URL (bad host or port): {exc}"
        if parts.scheme not in wanted:
            return f"URL scheme must be one of {sorted(wanted)}, got {parts.scheme!r}"
        if not host:
            return "URL has no host"
        why = _userinfo(parts)
        if why is not None:
            return why
        try:
            canonical = canonical_host(host)
        except ValueError as exc:
            return str(exc)
        if allowed is not None and canonical not in allowed:
            return f"URL host {canonical!r} is not allowed; use one of {sorted(allowed)}"
        if allowed is None and not allow_internal and _internal(canonical):
            return (
                f"URL host {canonical!r} is an internal address (loopback, private, link-local or "
                "reserved); use a public host"
            )
        return None

    return check
