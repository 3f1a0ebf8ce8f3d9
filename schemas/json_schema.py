"""JSON Schema files for people and tools outside Python (clients, codegen, VLM servers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from schemas.document_json import Chunks, DocumentJson
from schemas.documents import DocumentSubmitted
from schemas.extraction import CINFields, CNHFields, GenericFields, RGFields
from schemas.pages import PageState
from schemas.progress import Progress
from schemas.results import DocumentResult
from schemas.webhooks import WebhookDelivery

# "validation" describes what we accept, "serialization" what we emit (where every
# field with a default is always present, so it is marked required).
_SCHEMAS: dict[type[BaseModel], Literal["validation", "serialization"]] = {
    RGFields: "validation",
    CNHFields: "validation",
    CINFields: "validation",
    GenericFields: "validation",
    DocumentSubmitted: "validation",
    PageState: "serialization",
    DocumentResult: "serialization",
    Progress: "serialization",
    WebhookDelivery: "serialization",
    DocumentJson: "serialization",  # document.json and the chunks: answers, not records
    Chunks: "serialization",
}


def export_json_schemas(out_dir: str | Path) -> list[Path]:
    """Write `<Model>.schema.json` for each extraction model and record type."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for model, mode in _SCHEMAS.items():
        schema: dict[str, Any] = model.model_json_schema(mode=mode)
        path = out / f"{model.__name__}.schema.json"
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
