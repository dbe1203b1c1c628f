"""A callback receiver on 127.0.0.1 over HTTPS, and the certificates it needs, made for the test: a private CA and
server certificates it signs (with ``cryptography``, else the ``openssl`` command; neither: the tests skip)."""

from __future__ import annotations

import datetime as dt
import http.server
import shutil
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass(frozen=True)
class ServerCert:
    cert: Path
    key: Path


def make_pki(folder: Path, names: dict[str, list[str]]) -> tuple[Path, dict[str, ServerCert]]:
    """(the CA's PEM, a certificate per entry of ``names``: its subjectAltNames, "DNS:x" or "IP:1.2.3.4")."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import cryptography  # noqa: F401
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl command is here to make certificates")
        return _openssl_pki(folder, names)
    return _cryptography_pki(folder, names)


def _cryptography_pki(folder: Path, names: dict[str, list[str]]) -> tuple[Path, dict[str, ServerCert]]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "portrait-serve test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = folder / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    certs = {}
    for label, alt_names in names.items():
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [
            x509.IPAddress(ipaddress.ip_address(name[3:])) if name.startswith("IP:") else x509.DNSName(name[4:])
            for name in alt_names
        ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, label)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        certs[label] = ServerCert(folder / f"{label}.pem", folder / f"{label}.key")
        certs[label].cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        certs[label].key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return ca_path, certs


def _openssl_pki(folder: Path, names: dict[str, list[str]]) -> tuple[Path, dict[str, ServerCert]]:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    openssl(
        "req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
        "-subj", "/CN=portrait-serve test CA",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    certs = {}
    for label, alt_names in names.items():
        cert = ServerCert(folder / f"{label}.pem", folder / f"{label}.key")
        request, extensions = folder / f"{label}.csr", folder / f"{label}.ext"
        extensions.write_text(f"subjectAltName={','.join(alt_names)}\nextendedKeyUsage=serverAuth\n")
        openssl("req", *curve, "-keyout", str(cert.key), "-out", str(request), "-subj", f"/CN={label}")
        openssl(
            "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert.cert), "-days", "1", "-extfile", str(extensions),
        )  # fmt: skip
        certs[label] = cert
    return ca, certs


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class HttpsReceiver:
    """``with HttpsReceiver(cert) as receiver``: an HTTPS server on 127.0.0.1 answering 204 to every POST."""

    cert: ServerCert
    requests: list[Received] = field(default_factory=list)

    def __enter__(self) -> HttpsReceiver:
        received = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                received.append(Received(self.path, headers, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
                return  # quiet: the test reads ``requests``

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.cert.cert, self.cert.key)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = tls.wrap_socket(self._server.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"
