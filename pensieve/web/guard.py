"""The SSRF guard: which URLs and addresses a fetch may reach.

A model chooses the URLs, and a web page chooses where its redirects lead, so neither may
point Pensieve at the machine it runs on or at the network behind it. A host is resolved
once, every address it resolves to is checked, and the connection then goes to the
checked address (never to a second, possibly different, DNS answer).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})

# Ranges that `is_global` lets through but that are not ordinary public hosts.
_EXTRA_BLOCKED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "192.0.0.0/24",  # IETF protocol assignments
        "::/96",  # deprecated IPv4-compatible IPv6 (::127.0.0.1)
        "64:ff9b:1::/48",  # local-use NAT64
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class GuardError(Exception):
    """A URL or address the fetcher refuses to reach."""


@dataclass(frozen=True)
class Target:
    """A URL split into what the connection needs: the checked address to dial."""

    scheme: str
    host: str  # ASCII host name (or address text) as in the URL, for Host and SNI
    port: int
    address: IPAddress

    @property
    def default_port(self) -> bool:
        return self.port == (443 if self.scheme == "https" else 80)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address hidden in a mapped, 6to4, Teredo or NAT64 IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why this address may not be fetched, or None when it is an ordinary public one."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            reason = refusal(inner)
            return f"{reason} (inside the IPv6 address {ip})" if reason else None
    checks = (
        (ip.is_unspecified, "unspecified"),
        (ip.is_loopback, "loopback"),
        (ip.is_link_local, "link-local"),
        (ip.is_multicast, "multicast"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"), "carrier-grade NAT"),
        (ip.is_reserved, "reserved"),
        (ip.is_private, "private"),
        (any(ip.version == net.version and ip in net for net in _EXTRA_BLOCKED), "reserved"),
        (not ip.is_global, "not a public address"),
    )
    for hit, name in checks:
        if hit:
            return name
    return None


def parse_loose_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Read a host the way inet_aton does: `2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`.

    Resolvers and some HTTP stacks accept these forms, so the guard must see through them
    rather than hand them to DNS and hope.
    """
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or any(not p for p in parts):
        return None
    values: list[int] = []
    for part in parts:
        text = part.lower()
        try:
            if text.startswith("0x"):
                values.append(int(text[2:] or "0", 16))
            elif len(text) > 1 and text.startswith("0"):
                values.append(int(text[1:], 8))
            else:
                values.append(int(text, 10))
        except ValueError:
            return None
    # All parts but the last are single bytes; the last fills the remaining bytes.
    *head, last = values
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (5 - len(values))):
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    number = number << (8 * (5 - len(values))) | last
    return ipaddress.IPv4Address(number)


def split_url(url: str) -> SplitResult:
    """Refuse anything but an absolute http(s) URL with a host and no credentials."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise GuardError(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        shown = f"{scheme}:" if scheme else "no scheme"
        raise GuardError(f"only http and https URLs can be fetched, not {shown}")
    if not parts.hostname:
        raise GuardError("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise GuardError("URLs with user names or passwords are not fetched")
    if port == 0:
        raise GuardError("port 0 is not a valid port")
    return parts


AddressPolicy = Callable[[IPAddress], str | None]


async def resolve(parts: SplitResult, *, policy: AddressPolicy | None) -> Target:
    """Resolve the URL's host and return the address to connect to.

    `policy` says why an address is refused (normally `refusal`); None allows every
    address (fetch.allow_private_hosts). Every address of the host must pass, not just the
    one dialled, so a host cannot mix a public and a private answer.
    """
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    try:
        ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise GuardError(f"{host!r} is not a valid host name") from None
    literal: IPAddress | None
    try:
        literal = ipaddress.ip_address(ascii_host)
    except ValueError:
        literal = parse_loose_ipv4(ascii_host)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        addresses = await _lookup(ascii_host, port)
    if policy is not None:
        for address in addresses:
            reason = policy(address)
            if reason:
                via = "" if literal is not None else f" ({ascii_host} resolves to {address})"
                raise GuardError(
                    f"refused to fetch a {reason} address{via}; only public hosts can be fetched "
                    "(fetch.allow_private_hosts is false)"
                )
    # A literal that was written in a numeric trick is dialled (and named) as the real address.
    shown = str(literal) if literal is not None else ascii_host
    return Target(scheme, shown, port, addresses[0])


async def _lookup(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise GuardError(f"cannot resolve host {host!r} ({exc})") from None
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        # IPv6 scope ids ("fe80::1%eth0") are not part of the address itself.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    if not found:
        raise GuardError(f"host {host!r} has no address")
    return found
