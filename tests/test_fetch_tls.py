"""HTTPS through the SSRF guard: the connection goes to the checked address while TLS
still verifies the certificate against the host name (SNI), over a real TLS server."""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pensieve.web.fetcher import Fetcher, FetchError
from tests.fakes.http import QuietHandler, close, serve

NAME = "secure.pensieve.test"


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class TLSSite:
    def __init__(self, cert: Path, key: Path) -> None:
        self.sni: list[str | None] = []  # server names sent in TLS handshakes
        self.hosts: list[str] = []  # Host headers of the requests
        site = self
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)

        def remember_sni(sock: ssl.SSLSocket | ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
            site.sni.append(server_name)

        context.sni_callback = remember_sni

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                site.hosts.append(self.headers.get("host", ""))
                body = b"<html><head><title>Secure</title></head><body><p>Over TLS.</p></body></html>"
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = serve(Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]


@pytest.fixture
def resolve_test_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DNS boundary: *.pensieve.test resolves to 127.0.0.1."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host).endswith(".pensieve.test"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port)))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[tuple[TLSSite, Path]]:
    cert, key = self_signed(tmp_path, NAME)
    site = TLSSite(cert, key)
    yield site, cert
    close(site.server)


async def test_https_dials_the_checked_address_and_verifies_the_name(
    tls_site: tuple[TLSSite, Path], resolve_test_names: None
) -> None:
    site, cert = tls_site
    fetcher = Fetcher(policy=None, max_redirects=2, timeout_s=5, ca_file=str(cert))
    try:
        response = await fetcher.get(f"https://{NAME}:{site.port}/page", max_bytes=100_000)
    finally:
        await fetcher.aclose()
    assert response.status == 200 and b"Over TLS." in response.body
    # Dialled 127.0.0.1 (the checked address), yet TLS and HTTP both carried the name.
    assert site.sni == [NAME] and site.hosts == [f"{NAME}:{site.port}"]


async def test_a_certificate_for_another_name_is_refused(tmp_path: Path, resolve_test_names: None) -> None:
    cert, key = self_signed(tmp_path, "other.pensieve.test")
    site = TLSSite(cert, key)
    fetcher = Fetcher(policy=None, max_redirects=2, timeout_s=5, ca_file=str(cert))
    try:
        with pytest.raises(FetchError):
            await fetcher.get(f"https://{NAME}:{site.port}/page", max_bytes=100_000)
    finally:
        await fetcher.aclose()
        close(site.server)
    assert site.hosts == []


async def test_an_unknown_authority_is_refused(tls_site: tuple[TLSSite, Path], resolve_test_names: None) -> None:
    site, _cert = tls_site
    fetcher = Fetcher(policy=None, max_redirects=2, timeout_s=5)  # the usual authorities only
    try:
        with pytest.raises(FetchError):
            await fetcher.get(f"https://{NAME}:{site.port}/page", max_bytes=100_000)
    finally:
        await fetcher.aclose()
    assert site.hosts == []


def test_a_bad_ca_file_is_a_config_error(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from pensieve.config import FetchSettings

    bad = tmp_path / "not-a-cert.pem"
    bad.write_text("hello")
    with pytest.raises(ValidationError, match="cannot load certificates"):
        FetchSettings(ca_file=str(bad))
