"""Settings of the CLI and CPU-agent processes (env prefix ``PAGESTREAM_``).

``KafkaSettings`` is the one place that knows how to talk to the cluster; it
renders the same connection facts for confluent-kafka (librdkafka property
names) and for faust/aiokafka (credentials objects), so SASL/SSL cannot drift
between the two clients. Nested values use ``__``: ``PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas import MAX_INLINE_BYTES
from streams.topics import AGENTS_APP_ID

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

_CACHE = Path.home() / ".cache" / "pagestream"
_REPO = Path(__file__).resolve().parents[1]


class KafkaSettings(BaseModel):
    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "pagestream"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSettings:
        if self.uses_sasl and (self.sasl_username is None or self.sasl_password is None):
            raise ValueError(
                f"security_protocol={self.security_protocol} needs sasl_username and sasl_password"
            )
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def confluent_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka properties shared by producers, consumers and admin clients."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol,
        }
        if self.uses_sasl:
            assert self.sasl_password is not None  # noqa: S101 - checked by the validator
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        if self.uses_ssl:
            if self.ssl_cafile:
                conf["ssl.ca.location"] = str(self.ssl_cafile)
            if self.ssl_certfile:
                conf["ssl.certificate.location"] = str(self.ssl_certfile)
            if self.ssl_keyfile:
                conf["ssl.key.location"] = str(self.ssl_keyfile)
            if self.ssl_key_password:
                conf["ssl.key.password"] = self.ssl_key_password.get_secret_value()
            conf["ssl.endpoint.identification.algorithm"] = (
                "https" if self.ssl_check_hostname else "none"
            )
        conf.update(overrides)
        return conf

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_ssl:
            return None
        ctx = ssl.create_default_context(cafile=str(self.ssl_cafile) if self.ssl_cafile else None)
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            ctx.load_cert_chain(
                str(self.ssl_certfile),
                str(self.ssl_keyfile) if self.ssl_keyfile else None,
                self.ssl_key_password.get_secret_value() if self.ssl_key_password else None,
            )
        return ctx

    def faust_broker_url(self) -> str:
        return ";".join(f"kafka://{hp.strip()}" for hp in self.bootstrap_servers.split(","))

    def faust_credentials(self) -> Any:
        """The ``broker_credentials`` argument of ``faust.App`` (None for PLAINTEXT)."""
        import faust  # local import: only agent processes need faust loaded

        if self.uses_sasl:
            assert self.sasl_password is not None  # noqa: S101 - checked by the validator
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password.get_secret_value(),
                mechanism=self.sasl_mechanism,
                ssl_context=self.ssl_context(),
            )
        if self.uses_ssl:
            return faust.SSLCredentials(self.ssl_context())
        return None


class BrokerSettings(BaseModel):
    """The embedded single-node KRaft broker (`pagestream broker ...`)."""

    host: str = "127.0.0.1"
    port: int = Field(default=9092, ge=1, le=65535)
    controller_port: int = Field(default=9093, ge=1, le=65535)
    data_dir: Path = _CACHE / "broker"
    # Jars resolved by Maven land here, one folder per Kafka version (outside git).
    jars_dir: Path = _CACHE / "kafka"
    pom: Path = _REPO / "ops" / "kafka" / "pom.xml"
    heap: str = "1g"
    start_timeout_s: float = 90.0


class TopicSettings(BaseModel):
    prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    replication_factor: int = Field(default=1, ge=1)


class BlobSettings(BaseModel):
    root: str = str(_CACHE / "blobs")
    read_roots: list[str] = Field(default_factory=list)
    max_blob_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # Payloads up to this size travel inline (base64) in the record; larger ones
    # go to the blob store (claim check).
    inline_limit_bytes: int = Field(default=256 * 1024, ge=0, le=MAX_INLINE_BYTES)
    storage_options: dict[str, Any] = Field(default_factory=dict)


class AgentSettings(BaseModel):
    """The faust CPU agents (`pagestream agents`)."""

    # Consumer group and table namespace; the topic prefix is prepended.
    app_id: str = AGENTS_APP_ID
    # A `process` page classified below this is not extracted (see streams/routing.py).
    min_confidence: float = Field(default=0.6, ge=0, le=1)
    # Rasterized or decoded pages larger than this are refused (decompression bombs).
    max_page_pixels: int = Field(default=40_000_000, gt=0)
    # How fast the group notices a dead worker and hands its partitions on. Lower
    # is faster failover but a long GC pause or CPU starvation can then evict a
    # live worker; faust's own default is 60 s.
    session_timeout_s: float = Field(default=30.0, ge=6)
    heartbeat_interval_s: float = Field(default=3.0, gt=0)
    # How long deliver remembers a delivered document to absorb redelivered pages; keep
    # it under the changelog's retention (streams/topics.py, DELIVER_TABLE_CHANGELOG).
    delivered_ttl_s: float = Field(default=24 * 3600.0, gt=0)
    web_host: str = "127.0.0.1"
    web_port: int = Field(default=6066, ge=1, le=65535)  # faust's web server: /metrics
    # HMAC-SHA256 key for webhook signatures; callbacks are refused while unset.
    webhook_secret: SecretStr | None = None
    # Loopback/private/link-local webhook hosts are refused (SSRF) unless allowed.
    webhook_allow_private: bool = False
    webhook_attempts: int = Field(default=5, ge=1)
    webhook_timeout_s: float = Field(default=10.0, gt=0)


class Settings(BaseSettings):
    """Settings of the `pagestream` CLI and the CPU agents."""

    model_config = SettingsConfigDict(
        env_prefix="PAGESTREAM_", env_nested_delimiter="__", extra="ignore"
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
