from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest
from pydantic import ValidationError

from streams.settings import BrokerSettings, KafkaSettings, ModelSettings, Settings


def test_env_vars_reach_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    monkeypatch.setenv("PAGESTREAM_TOPICS__PREFIX", "stage.")
    monkeypatch.setenv("PAGESTREAM_BLOBS__INLINE_LIMIT_BYTES", "1024")
    s = Settings()
    assert s.kafka.bootstrap_servers == "k1:9092,k2:9092"
    assert s.topics.prefix == "stage."
    assert s.blobs.inline_limit_bytes == 1024
    assert s.kafka.faust_broker_url() == "kafka://k1:9092;kafka://k2:9092"


def test_plaintext_has_no_security_options() -> None:
    conf = KafkaSettings().confluent_config()
    assert conf["security.protocol"] == "PLAINTEXT"
    assert not any(k.startswith(("sasl.", "ssl.")) for k in conf)
    assert KafkaSettings().faust_credentials() is None


def test_sasl_ssl_reaches_both_clients(tmp_path: Path) -> None:
    s = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="svc",
        sasl_password="s3cret",  # type: ignore[arg-type]
    )
    conf = s.confluent_config(**{"group.id": "g"})
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "svc" and conf["sasl.password"] == "s3cret"
    assert conf["ssl.endpoint.identification.algorithm"] == "https"
    assert conf["group.id"] == "g"

    creds = s.faust_credentials()
    assert isinstance(creds, faust.SASLCredentials)
    assert creds.username == "svc" and creds.password == "s3cret"
    assert creds.mechanism.value == "SCRAM-SHA-512"
    assert isinstance(creds.ssl_context, ssl.SSLContext)
    assert "s3cret" not in repr(s)  # SecretStr keeps it out of logs


def test_ssl_only_gives_faust_an_ssl_context() -> None:
    s = KafkaSettings(security_protocol="SSL", ssl_check_hostname=False)
    assert s.confluent_config()["ssl.endpoint.identification.algorithm"] == "none"
    creds = s.faust_credentials()
    assert isinstance(creds, faust.SSLCredentials)
    assert creds.context.check_hostname is False


def test_sasl_without_credentials_is_refused() -> None:
    with pytest.raises(ValidationError, match="needs sasl_username and sasl_password"):
        KafkaSettings(security_protocol="SASL_PLAINTEXT")


def test_inline_limit_cannot_exceed_what_a_record_can_carry() -> None:
    with pytest.raises(ValidationError, match="inline_limit_bytes"):
        Settings(blobs={"inline_limit_bytes": 10 * 1024 * 1024})  # type: ignore[arg-type]


def test_an_env_file_named_by_pagestream_env_file_is_read_under_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = tmp_path / "producer.env"
    creds.write_text(
        "PAGESTREAM_KAFKA__SECURITY_PROTOCOL=SASL_SSL\n"
        "PAGESTREAM_KAFKA__SASL_MECHANISM=SCRAM-SHA-512\n"
        "PAGESTREAM_KAFKA__SASL_USERNAME=producer\n"
        "PAGESTREAM_KAFKA__SASL_PASSWORD=from-the-file\n"
    )
    monkeypatch.setenv("PAGESTREAM_ENV_FILE", str(creds))
    monkeypatch.setenv("PAGESTREAM_KAFKA__SASL_USERNAME", "from-the-environment")
    kafka = Settings().kafka
    assert kafka.security_protocol == "SASL_SSL" and kafka.sasl_mechanism == "SCRAM-SHA-512"
    assert kafka.sasl_password is not None
    assert kafka.sasl_password.get_secret_value() == "from-the-file"
    assert kafka.sasl_username == "from-the-environment"
    monkeypatch.setenv("PAGESTREAM_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(ValueError, match="env_file"):
        Settings()


def test_defaults_that_name_repository_files_find_them() -> None:
    # The sections live in streams/settings/; their paths must still start at the repository.
    assert BrokerSettings().pom.is_file()
    assert ModelSettings().classifier_checkpoint.is_file()


def test_the_node_refuses_its_old_record_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ignored, it would leave a node on a limit its operator thinks changed.
    monkeypatch.setenv("PAGESTREAM_NODE__MAX_OUTPUT_BYTES", "2000000")
    with pytest.raises(ValidationError, match="PAGESTREAM_KAFKA__MAX_RECORD_BYTES"):
        Settings()


def test_the_keys_file_is_the_pipelines_beside_its_broker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue 34: `pagestream up`'s gateway kept its keys beside the broker while
    # `api-keys create` wrote to ~/.cache: a key made as the README says answered 401.
    monkeypatch.setenv("PAGESTREAM_BROKER__DATA_DIR", str(tmp_path / "one" / "broker"))
    assert Settings().api.keys_file == tmp_path / "one" / "api" / "keys.json"
    monkeypatch.setenv("PAGESTREAM_API__KEYS_FILE", str(tmp_path / "mounted.json"))
    assert Settings().api.keys_file == tmp_path / "mounted.json"  # named: that one
    monkeypatch.delenv("PAGESTREAM_API__KEYS_FILE")
    monkeypatch.delenv("PAGESTREAM_BROKER__DATA_DIR")
    assert Settings().api.keys_file == Path.home() / ".cache" / "pagestream" / "api" / "keys.json"
