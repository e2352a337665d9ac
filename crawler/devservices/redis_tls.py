"""A ``redis-server`` that speaks TLS, with a throwaway CA and certificates made on the spot.

The certificates come from ``cryptography`` (a project dependency): a CA, a server
certificate for the host (IP and ``localhost`` in its subject alternative names) and a
client certificate; the server requires clients to present one signed by the CA
(``tls-auth-clients yes``). The plain port stays open for the readiness check only.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from crawler.devservices.redis_server import RedisServer, RedisServerConfig

VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    extensions: list[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def write_certificates(directory: Path, host: str = "127.0.0.1") -> TlsFiles:
    """A CA, a server certificate for ``host`` and a client certificate, as PEM files."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue(
        "crawler test CA", ca_key, None, [(x509.BasicConstraints(ca=True, path_length=0), True)]
    )
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    for role, cert_path, key_path, usage, extra in (
        ("server", files.server_cert, files.server_key, ExtendedKeyUsageOID.SERVER_AUTH, names),
        ("client", files.client_cert, files.client_key, ExtendedKeyUsageOID.CLIENT_AUTH, []),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        extensions: list[tuple[x509.ExtensionType, bool]] = [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([usage]), False),
        ]
        if extra:
            extensions.append((x509.SubjectAlternativeName(extra), False))
        cert = _issue(f"crawler test {role}", key, (ca.subject, ca_key), extensions)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
    files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return files


class TlsRedisServer(RedisServer):
    """``redis-server`` with a TLS port (certificates in ``<data_dir>/tls``)."""

    label = "redis-server-tls"

    def __init__(self, config: RedisServerConfig, tls_port: int) -> None:
        self.tls_port = tls_port
        self.tls = write_certificates(config.data_dir / "tls", config.host)
        tls_args = (
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(self.tls.server_cert),
            "--tls-key-file", str(self.tls.server_key),
            "--tls-ca-cert-file", str(self.tls.ca_cert),
            "--tls-auth-clients", "yes",
        )  # fmt: skip
        super().__init__(
            RedisServerConfig(
                port=config.port,
                data_dir=config.data_dir,
                host=config.host,
                appendonly=config.appendonly,
                executable=config.executable,
                extra_args=(*config.extra_args, *tls_args),
            )
        )

    @property
    def tls_url(self) -> str:
        """``rediss://`` URL of the TLS port (db 0) with the CA and the client certificate."""
        query = "&".join(
            f"{name}={quote(str(path), safe='/')}"
            for name, path in (
                ("ssl_ca_certs", self.tls.ca_cert),
                ("ssl_certfile", self.tls.client_cert),
                ("ssl_keyfile", self.tls.client_key),
            )
        )
        return f"rediss://{self.config.host}:{self.tls_port}/0?{query}"
