"""Which addresses the service may connect to when someone else chose the host: a caller's image URL, a job's
callback, the operator's edit endpoint. One rule (``reachable``) so every outbound path refuses the same inward
addresses; each path adds its own allow-list (``image_url_networks``, ``callback_hosts``,
``PORTRAIT_EDIT_ENDPOINT_HOSTS``). Its own module, free of the routes and jobs, so any of them may import it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# The only IPv6 space IANA allocates for global unicast; Python 3.11 calls some addresses outside it global (``::/96``,
# IPv4-compatible; ``64:ff9b:1::/48``, RFC 8215's local-use NAT64; ``fec0::/10``, site-local), and one inside it
# (``3fff::/20``, RFC 9637's documentation prefix) that is not.
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
_NOT_GLOBAL_V6 = (ipaddress.ip_network("3fff::/20"),)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def allow_list(hosts: Iterable[str]) -> tuple[str, ...]:
    """An operator's allow-list as the settings keep it: host names lower-cased, each ``a.b.c.d/n`` a valid network
    (a ``ValueError`` names the bad one), for ``callback_hosts`` and ``PORTRAIT_EDIT_ENDPOINT_HOSTS`` alike."""
    for host in hosts:
        if "/" in host:
            ipaddress.ip_network(host, strict=False)
    return tuple(host.lower() for host in hosts)


def reachable(address: IpAddress, trusted: Iterable[IpNetwork]) -> bool:
    """A global unicast address (what it embeds, for IPv4-mapped, 6to4 and NAT64; an IPv6 one in ``2000::/3`` only),
    or one in a ``trusted`` network. The rule for every address the service connects to on a caller's say-so (image
    URLs, job callbacks) or at a host the operator named (the edit endpoint)."""
    if any(address in network for network in trusted):
        return True
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return reachable(embedded, trusted)
    if isinstance(address, ipaddress.IPv6Address) and (
        address not in _GLOBAL_UNICAST_V6 or any(address in network for network in _NOT_GLOBAL_V6)
    ):
        return False
    return address.is_global and not address.is_multicast


def _embedded_ipv4(address: IpAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None
