"""The one settings root, ``Settings``: a section per concern (the section models live
in the sibling modules), read from PAGESTREAM_* variables and an optional env file;
and the environment a child process started by pagestream inherits."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from pydantic import Field, FilePath, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from streams.settings.agents import AgentSettings
from streams.settings.api import ApiSettings
from streams.settings.blobs import BlobSettings
from streams.settings.kafka import BrokerSettings, KafkaSettings, TopicSettings
from streams.settings.node import ExtractionSettings, ModelSettings, NodeSettings
from streams.settings.operations import DlqSettings, ExporterSettings, TracingSettings
from streams.topics import Topology


class _EnvFile(BaseSettings):
    """PAGESTREAM_ENV_FILE: a file of PAGESTREAM_* lines read under the environment (which
    wins), e.g. a role's credentials of the secure embedded broker:
    ``PAGESTREAM_ENV_FILE=~/.cache/pagestream/broker/credentials/producer.env``."""

    model_config = SettingsConfigDict(env_prefix="PAGESTREAM_", extra="ignore")
    env_file: FilePath | None = None


class Settings(BaseSettings):
    """The settings of every pagestream process (each reads the sections it uses)."""

    model_config = SettingsConfigDict(
        env_prefix="PAGESTREAM_", env_nested_delimiter="__", extra="ignore"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env_file = _EnvFile().env_file
        if env_file is not None:
            dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=env_file)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    dlq: DlqSettings = Field(default_factory=DlqSettings)
    exporter: ExporterSettings = Field(default_factory=ExporterSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    node: NodeSettings = Field(default_factory=NodeSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)

    @model_validator(mode="after")
    def _keys_file_of_this_pipeline(self) -> Settings:
        """Unless PAGESTREAM_API__KEYS_FILE names one, the keys file is the pipeline's:
        `api/keys.json` beside its broker's data (~/.cache/pagestream/api/keys.json by
        default). `pagestream up`'s gateway, `pagestream api` and `pagestream api-keys`
        run with the same settings all find the one file."""
        if "keys_file" not in self.api.model_fields_set:
            self.api.keys_file = self.broker.data_dir.parent / "api" / "keys.json"
        return self

    @property
    def topology(self) -> Topology:
        """Topic names, consumer groups and the agents' app id on this cluster."""
        return Topology(self.topics.prefix, self.agents.app_id)

    @property
    def gpu_group(self) -> str:
        """The GPU node's consumer group on the cluster (`node.group_id` behind the prefix)."""
        return self.topology.own(self.node.group_id)

    @property
    def gpu_transactional_id(self) -> str:
        """This GPU node's transactional id on the cluster (behind the prefix)."""
        return self.topology.own(self.node.transactional_id)

    @property
    def dlq_replay_group(self) -> str:
        """`pagestream dlq replay`'s consumer group on the cluster (behind the prefix)."""
        return self.topology.own(self.dlq.replay_group)


def child_environment(
    overrides: Mapping[str, str], without: Collection[str] = ()
) -> dict[str, str]:
    """This process's environment less `without` and with `overrides` (a child's own
    settings, such as the file of its role's credentials): what a child process started
    by pagestream inherits."""
    return {k: v for k, v in os.environ.items() if k not in without} | dict(overrides)
