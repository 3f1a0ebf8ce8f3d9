"""What `broker start --secure` writes before any JVM runs: TLS material, credentials and
server.properties (the integration tests start it: test_secure.py)."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from pydantic import SecretStr

from streams.kafka.errors import mask
from streams.local import broker, config
from streams.security import acls, credentials
from streams.security import tls as broker_tls
from streams.settings import BrokerSettings, KafkaSettings


def _props(s: BrokerSettings, password: str | None) -> dict[str, str]:
    (node,) = broker.layout(s)
    text = config.server_properties(s, node, [node], password)
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_secure_node_authenticates_and_authorizes_every_listener(tmp_path: Path) -> None:
    s = BrokerSettings(data_dir=tmp_path, port=9092, controller_port=9093, secure=True)
    props = _props(s, "pw-123")
    assert props["listeners"] == "SECURE://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    protocols = dict(p.split(":") for p in props["listener.security.protocol.map"].split(","))
    assert protocols == {"SECURE": "SASL_SSL", "CONTROLLER": "SASL_PLAINTEXT"}
    assert "PLAINTEXT" not in props["advertised.listeners"]
    assert props["authorizer.class.name"] == config.AUTHORIZER
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"


def test_a_plaintext_node_is_unchanged(tmp_path: Path) -> None:
    props = _props(BrokerSettings(data_dir=tmp_path), None)
    assert props["listeners"].startswith("PLAINTEXT://")
    assert "authorizer.class.name" not in props


def test_the_broker_certificate_names_the_host_and_keys_are_private(tmp_path: Path) -> None:
    files = broker_tls.ensure(tmp_path, ["broker.example"])
    cert = x509.load_pem_x509_certificates(files.broker_keystore.read_bytes())[0]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert {"broker.example", "localhost"} <= set(san.get_values_for_type(x509.DNSName))
    assert stat.S_IMODE(files.broker_keystore.stat().st_mode) == 0o600
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert broker_tls.ensure(tmp_path, ["other"]) == files  # made once, then reused
    assert files.ca_cert.read_bytes() == ca.public_bytes(Encoding.PEM)


def test_each_role_gets_its_own_password_in_a_private_file(tmp_path: Path) -> None:
    s = BrokerSettings(data_dir=tmp_path, secure=True)
    passwords = credentials.ensure(s)
    assert set(passwords) == set(acls.ROLES)
    assert len({p.get_secret_value() for p in passwords.values()}) == len(acls.ROLES)
    assert stat.S_IMODE(credentials.folder(s).stat().st_mode) == 0o700
    for role in acls.ROLES:
        path = credentials.folder(s) / f"{role}.env"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        kafka = credentials.role_kafka(s, KafkaSettings(), role)
        assert kafka.sasl_username == role and kafka.security_protocol == "SASL_SSL"
        assert kafka.sasl_password == passwords[role]
    assert credentials.ensure(s) == passwords  # kept, not regenerated


def test_errors_never_carry_the_password() -> None:
    conf = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="producer",
        sasl_password=SecretStr("s3cr3t-pw"),
    )
    assert mask("login s3cr3t-pw failed", conf) == "login ********** failed"
    assert "s3cr3t-pw" not in repr(conf) and "s3cr3t-pw" not in str(conf.model_dump())


def test_sasl_without_a_password_is_refused_when_settings_load() -> None:
    with pytest.raises(ValueError, match="sasl_password"):
        KafkaSettings(security_protocol="SASL_SSL", sasl_username="agents",
                      sasl_password=SecretStr(""))  # fmt: skip
