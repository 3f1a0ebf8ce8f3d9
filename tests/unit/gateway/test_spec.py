"""docs/openapi.json is the spec the gateway serves: regenerated whenever a route or a
schemas/ record changes (`pagestream api-spec --out docs/openapi.json`)."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.spec import spec_text

ROOT = Path(__file__).resolve().parents[3]


def test_the_exported_spec_is_current() -> None:
    exported = (ROOT / "docs" / "openapi.json").read_text()
    assert exported == spec_text(), (
        "docs/openapi.json is stale: run `pagestream api-spec --out docs/openapi.json`"
    )


def test_the_spec_names_every_route_and_the_bearer_scheme() -> None:
    spec = json.loads(spec_text())
    assert set(spec["paths"]) == {
        "/v1/documents",
        "/v1/documents/{doc_id}",
        "/v1/documents/{doc_id}/markdown",
        "/v1/documents/{doc_id}/document.json",
        "/v1/documents/{doc_id}/chunks",
        "/v1/documents/{doc_id}/events",
        "/v1/documents/{doc_id}/pages/{page_no}/image",
        "/v1/process",
        "/v1/me",
        "/v1/admin/lag",
        "/v1/admin/dead-letters",
        "/v1/admin/dead-letters/replay",
    }
    submit = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    assert set(submit) == {"multipart/form-data", "application/json"}
    assert "file" in submit["multipart/form-data"]["schema"]["required"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    # The JSON body's model and the result are the schemas/ records themselves.
    assert {"JsonSubmission", "Options", "Payload", "DocumentResult"} <= set(
        spec["components"]["schemas"]
    )
    # The document JSON and its chunks, versioned, as schemas/document_json.py has them.
    schemas = spec["components"]["schemas"]
    assert {"DocumentJson", "DocumentPage", "Block", "TableCell", "Chunks", "Chunk"} <= set(schemas)
    assert schemas["DocumentJson"]["properties"]["version"]["const"] == "1.0"
    kinds = set(schemas["Block"]["properties"]["kind"]["enum"])
    assert {"title", "text", "list", "table", "figure", "caption", "page-header",
            "page-footer"} <= kinds  # fmt: skip
