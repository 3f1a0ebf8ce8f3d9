"""Helpers for checking deployment files: PAGESTREAM_* variable names against the settings."""

from __future__ import annotations

from pydantic import BaseModel

from streams.settings import Settings


def setting_exists(env_name: str) -> bool:
    """Whether PAGESTREAM_A__B__C names a field of the settings (pydantic-settings
    ignores unknown variables, so a typo would silently do nothing)."""
    if not env_name.startswith("PAGESTREAM_"):
        return False
    model: type[BaseModel] = Settings
    parts = env_name.removeprefix("PAGESTREAM_").lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif i != len(parts) - 1:
            return False
    return True
