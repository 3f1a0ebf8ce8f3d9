"""The cluster: how clients connect (KafkaSettings, SASL/SSL included), the embedded
broker (BrokerSettings, its secure mode) and the topics (TopicSettings).

``KafkaSettings`` is the one place that knows how to talk to the cluster; it
renders the same connection facts for confluent-kafka (librdkafka property
names) and for faust/aiokafka (credentials objects), so SASL/SSL cannot drift
between the two clients.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator

from streams.settings.paths import CACHE_DIR, shipped

# Larger records belong in the blob store: librdkafka's consumers fetch at most 50 MiB
# by default (fetch.max.bytes, which must be at least message.max.bytes).
_MAX_RECORD_LIMIT_BYTES = 32 * 1024 * 1024

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


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
    # The one record limit: the largest record any pagestream producer sends, framing
    # included (streams/kafka/sizes.py measures every record against it). The clients'
    # message.max.bytes / max_request_size and the topics' max.message.bytes (`topics
    # apply`) derive from it. What would not fit moves to the blob store (claim checks,
    # dead-letter values); an output that still does not fit is the record's fault.
    max_record_bytes: int = Field(default=1_000_000, ge=10_000, le=_MAX_RECORD_LIMIT_BYTES)

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSettings:
        if self.uses_sasl and (
            not self.sasl_username
            or self.sasl_password is None
            or not self.sasl_password.get_secret_value()
        ):
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
            # What the gate lets through, librdkafka lets through (its own measure of a
            # record is smaller than the gate's: streams/kafka/sizes.py).
            "message.max.bytes": self.max_record_bytes,
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
    """The embedded KRaft broker (`pagestream broker ...`): one node, or a local cluster."""

    host: str = "127.0.0.1"
    # Nodes of the embedded cluster; node k listens on port + 10*(k-1) (streams/local/nodes.py).
    nodes: int = Field(default=1, ge=1, le=9)
    port: int = Field(default=9092, ge=1, le=65535)
    controller_port: int = Field(default=9093, ge=1, le=65535)
    data_dir: Path = CACHE_DIR / "broker"
    # Jars resolved by Maven land here, one folder per Kafka version (outside git).
    jars_dir: Path = CACHE_DIR / "kafka"
    pom: Path = shipped("streams.local", "pom.xml")
    heap: str = "1g"
    # The JVM's options beside the heap, for the broker and Kafka's tools. The embedded
    # broker is for one machine (a laptop, CI, `pagestream up`): the client compiler
    # only and the serial collector halve its start-up CPU (6 -> 3 s here) and cut its
    # idle CPU by a third. A broker that is benchmarked for throughput can take the
    # JVM's defaults back: PAGESTREAM_BROKER__JVM_OPTIONS='[]'.
    jvm_options: list[str] = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    start_timeout_s: float = 90.0
    # SASL_SSL (SCRAM-SHA-512) client listener, TLS from a CA made in data_dir, the
    # StandardAuthorizer refusing what no ACL allows; a password per role in
    # data_dir/credentials (see streams/local/config.py, streams/security/credentials.py).
    secure: bool = False


class TopicSettings(BaseModel):
    prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    replication_factor: int = Field(default=1, ge=1)
    # Set on every declared topic by `topics apply` (None: the cluster's default). With
    # acks=all a write needs this many copies; 2 of 3 survives one broker down.
    min_insync_replicas: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _isr_within_replicas(self) -> TopicSettings:
        if self.min_insync_replicas is not None and (
            self.min_insync_replicas > self.replication_factor
        ):
            raise ValueError(
                f"min_insync_replicas {self.min_insync_replicas} exceeds replication_factor "
                f"{self.replication_factor}: no write could ever be acknowledged"
            )
        return self
