"""Which address a request came from, when the service runs behind reverse proxies it is told to trust.

Limits keyed on a client address (unknown tokens, see :mod:`actionspace.service.auth`) see only the
connecting address; behind a reverse proxy that is the proxy's, shared by every client. With
:class:`TrustedProxies` the address is read from ``X-Forwarded-For`` instead, but only from a
connection whose peer is a trusted proxy, and only as far as trusted proxies vouch for it: the hops
are read from the right (each proxy appends the address it saw) and the first one that is not a
trusted proxy is the client. Whatever a client writes into the header itself sits left of that hop
and is never read. Without trusted proxies (the default) the header is ignored entirely.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from actionspace.errors import ConfigurationError

__all__ = ["TrustedProxies", "client_address", "guess_key"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_HOPS: Final = 64
"""Most ``X-Forwarded-For`` hops looked at, from the right (a chain of proxies is short)."""
IPV6_PREFIX: Final = 64
"""An IPv6 client is counted by its /64: a site is handed at least that much, and picks any address
of it (privacy addresses rotate by themselves), so a single address is no client's own."""


@dataclass(frozen=True, slots=True)
class TrustedProxies:
    """The networks (CIDR) whose connections may say, in ``X-Forwarded-For``, whom they forward."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, cidrs: Iterable[str]) -> TrustedProxies:
        """``["10.0.0.0/8", "::1", ...]`` (a bare address is one host). Raises ConfigurationError."""
        networks = []
        for cidr in [cidrs] if isinstance(cidrs, str) else cidrs:
            try:
                networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
            except ValueError as exc:
                raise ConfigurationError(f"a trusted proxy is an address or a CIDR network: {exc}") from exc
        return cls(tuple(networks))

    def __contains__(self, address: Address | None) -> bool:
        return address is not None and any(address in network for network in self.networks)


def client_address(peer: str, forwarded_for: Sequence[str], proxies: TrustedProxies) -> str:
    """The client's address: ``peer``, or when it is a trusted proxy, the right-most untrusted hop.

    ``forwarded_for``: every ``X-Forwarded-For`` header of the request, in order. A hop that is not
    an address stops the walk at the proxy that wrote it (what it vouches for cannot be read), and
    a chain of trusted proxies only ends at the left-most of them.
    """
    nearest = _address(peer)
    if not proxies.networks or nearest not in proxies:
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
    for hop in reversed(hops[-_HOPS:]):
        address = _address(hop)
        if address is None:
            break
        nearest = address
        if address not in proxies:
            break
    return str(nearest)


def _address(text: str) -> Address | None:
    """An address as a proxy writes it (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``), else None."""
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # the same host, however the socket spelled it
    return address


def guess_key(client: str) -> str:
    """What a client's guesses are counted by (:mod:`actionspace.service.auth`): the network it
    controls, however its address is spelled.

    An IPv4 address is itself; an IPv6 address is its /64 (:data:`IPV6_PREFIX`), its zone
    (``%eth0``) dropped; an IPv4-mapped IPv6 address (``::ffff:1.2.3.4``, as a dual-stack socket
    names an IPv4 peer) is the IPv4 address. Text that is no address (a Unix socket, a test
    client's name) is itself.
    """
    address = _address(client.strip())
    if address is None:
        return client
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    network = int(address) >> (128 - IPV6_PREFIX) << (128 - IPV6_PREFIX)
    return str(ipaddress.IPv6Network((network, IPV6_PREFIX)))
