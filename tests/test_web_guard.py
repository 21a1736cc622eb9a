"""The SSRF guard: address classification, numeric tricks, and resolution at the DNS boundary."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from pensieve.web.guard import GuardError, parse_loose_ipv4, refusal, resolve, split_url


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("224.0.0.251", "multicast"),
        ("239.255.255.250", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.0.8", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "multicast"),
        ("::7f00:1", "reserved"),
    ],
)
def test_refused_addresses(address: str, reason: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:c0a8:0101::1",
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",
    ],
)
def test_ipv4_hidden_in_ipv6_is_checked(address: str) -> None:
    reason = refusal(ipaddress.ip_address(address))
    assert reason is not None and "inside the IPv6 address" in reason


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("3232235777", "192.168.1.1"),
    ],
)
def test_numeric_tricks_are_read_like_inet_aton(host: str, address: str) -> None:
    assert parse_loose_ipv4(host) == ipaddress.IPv4Address(address)


@pytest.mark.parametrize("host", ["example.com", "256.1.1.1", "1.2.3.4.5", "08.1.1.1", "1..1", "127.0.0.1.nip.io"])
def test_names_are_not_numbers(host: str) -> None:
    assert parse_loose_ipv4(host) is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/", "only http and https"),
        ("gopher://example.com/", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("example.com/page", "only http and https"),
        ("http:///nohost", "no host"),
        ("http://user:pw@example.com/", "user names or passwords"),
        ("http://example.com:99999/", "not a valid URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(GuardError, match=message):
        split_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://0.0.0.0:8080/",
    ],
)
async def test_literal_private_hosts_are_refused(url: str) -> None:
    from pensieve.web.guard import refusal as policy

    with pytest.raises(GuardError, match="refused to fetch"):
        await resolve(split_url(url), policy=policy)


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    """Answer getaddrinfo for the given names (the DNS boundary); other names fail."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name in answers:
            asked.append(name)
            out = []
            for address in answers[name]:
                family = socket.AF_INET6 if ":" in address else socket.AF_INET
                sockaddr: tuple[Any, ...] = (address, int(port), 0, 0) if ":" in address else (address, int(port))
                out.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
            return out
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


async def test_public_looking_name_resolving_to_private_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dns(monkeypatch, {"news.example.com": ["10.0.0.7"], "mixed.example.com": ["93.184.215.14", "127.0.0.1"]})
    with pytest.raises(GuardError, match=r"private address \(news.example.com resolves to 10.0.0.7\)"):
        await resolve(split_url("https://news.example.com/story"), policy=refusal)
    # One bad answer among good ones is enough to refuse: the dialled one could be either.
    with pytest.raises(GuardError, match="loopback"):
        await resolve(split_url("https://mixed.example.com/"), policy=refusal)


async def test_public_name_resolves_to_the_checked_address(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dns(monkeypatch, {"docs.example.org": ["93.184.215.14"]})
    target = await resolve(split_url("https://docs.example.org:8443/x"), policy=refusal)
    assert (str(target.address), target.host, target.port) == ("93.184.215.14", "docs.example.org", 8443)


async def test_allow_private_hosts_lets_everything_through() -> None:
    target = await resolve(split_url("http://0177.0.0.1:8080/"), policy=None)
    assert str(target.address) == "127.0.0.1" and target.host == "127.0.0.1"
