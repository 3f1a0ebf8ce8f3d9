"""The embedded broker's TLS material: a private CA and a broker certificate, as PEM.

Kafka reads PEM key stores and trust stores directly (`ssl.keystore.type=PEM`), so no
keytool and no JKS passwords. Generated once into ``<data_dir>/tls`` and reused; the
keys are written 0600. Clients trust ``ca.pem`` (KafkaSettings.ssl_cafile) and check
the broker's name against the certificate (it names the broker's host, 127.0.0.1 and
localhost), so hostname verification stays on.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough that a developer's data folder never expires under them; the CA exists
# only in this folder and signs only this broker.
_VALIDITY = dt.timedelta(days=825)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path  # what clients trust
    broker_keystore: Path  # the broker's key and certificate chain, one PEM file

    @classmethod
    def under(cls, data_dir: Path) -> TlsFiles:
        tls = data_dir / "tls"
        return cls(tls / "ca.pem", tls / "broker-keystore.pem")

    def exist(self) -> bool:
        return self.ca_cert.exists() and self.broker_keystore.exists()


def ensure(data_dir: Path, hosts: list[str]) -> TlsFiles:
    """The CA and broker certificate in data_dir, made on first use."""
    files = TlsFiles.under(data_dir)
    if files.exist():
        return files
    files.ca_cert.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pagestream embedded broker CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]),
            ca_name,
            key.public_key(),
            now,
        )
        .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # The broker is a TLS server to clients and a TLS client to itself (inter-broker).
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    # PKCS#8 unencrypted: Kafka's PEM key store reads it without ssl.key.password; the
    # file's mode is the protection, as for the credentials beside it.
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_private(
        files.broker_keystore, key_pem + cert.public_bytes(pem) + ca_cert.public_bytes(pem)
    )
    files.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    return files


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def _names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys([*hosts, "127.0.0.1", "localhost"]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)
