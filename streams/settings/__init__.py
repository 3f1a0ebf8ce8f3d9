"""Settings of every pagestream process: one root, one section per concern.

Env prefix ``PAGESTREAM_``; nested values use ``__``:
``PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS``, ``PAGESTREAM_NODE__MAX_BATCH=32``,
``PAGESTREAM_EXTRACTION__VLLM__MODEL=/models/qwen2.5-vl``. Each process reads the
sections it uses: the CLI and the agents (kafka, broker, topics, blobs, agents, dlq),
the GPU node (kafka, topics, blobs, models, extraction, node). Secrets are SecretStr.
Sections are plain pydantic models (no torch, no Kafka clients), so every package
can import this module.

``KafkaSettings`` (kafka.py) is the one place that knows how to talk to the cluster,
for confluent-kafka and for faust alike.

    root.py        Settings (the root), the env file, child_environment
    kafka.py       KafkaSettings, BrokerSettings, TopicSettings: the cluster
    blobs.py       BlobSettings: the blob store
    agents.py      AgentSettings: the faust CPU agents
    api.py         ApiSettings: the HTTP gateway (`pagestream api`)
    operations.py  DlqSettings, ExporterSettings, TracingSettings
    node.py        the GPU node: models, VLM engines, document OCR, the loop
    paths.py       default folders (cache; files shipped in packages: weights, pom)

Import from here (``from streams.settings import Settings``), not from the modules.
"""

from __future__ import annotations

from streams.settings.agents import AgentSettings
from streams.settings.api import ApiSettings
from streams.settings.blobs import BlobSettings
from streams.settings.kafka import (
    BrokerSettings,
    KafkaSettings,
    SaslMechanism,
    SecurityProtocol,
    TopicSettings,
)
from streams.settings.node import (
    DocOcrPreset,
    DocOcrSettings,
    ExtractionSettings,
    ModelSettings,
    NodeSettings,
    OpenAISettings,
    VllmSettings,
)
from streams.settings.operations import DlqSettings, ExporterSettings, TracingSettings
from streams.settings.paths import WEIGHTS_DIR
from streams.settings.root import Settings, child_environment

__all__ = [
    "WEIGHTS_DIR",
    "AgentSettings",
    "ApiSettings",
    "BlobSettings",
    "BrokerSettings",
    "DlqSettings",
    "DocOcrPreset",
    "DocOcrSettings",
    "ExporterSettings",
    "ExtractionSettings",
    "KafkaSettings",
    "ModelSettings",
    "NodeSettings",
    "OpenAISettings",
    "SaslMechanism",
    "SecurityProtocol",
    "Settings",
    "TopicSettings",
    "TracingSettings",
    "VllmSettings",
    "child_environment",
]
