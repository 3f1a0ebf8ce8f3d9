"""The gateway's OpenAPI document as `docs/openapi.json` holds it (`pagestream api-spec`);
a unit test keeps the file current."""

from __future__ import annotations

import json

from gateway.app import create_app
from streams.settings import Settings


def spec_text() -> str:
    return json.dumps(create_app(Settings()).openapi(), indent=2, sort_keys=True) + "\n"
