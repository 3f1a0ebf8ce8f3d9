"""Record values on the wire: compact UTF-8 JSON.

`decode` never lets a bad record surface as anything but `RecordError`, whose
message is safe to log and to put in a DLQ header: it names the field and the
problem, and echoes the offending input only when it cannot be personal data.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from schemas.common import Record
from schemas.errors import RecordError

R = TypeVar("R", bound=Record)

# Subtrees that hold client documents, client metadata or extracted personal data.
_SENSITIVE_FIELDS = frozenset({"payload", "attributes", "extraction", "fields", "ocr"})

# Errors whose input is worth echoing: the value is a wrong choice or a wrong number
# (`'foo'` for an enum, `'high'` for an int), not free text that may be a name or a CPF.
_ECHOED_ERROR_TYPES = frozenset(
    {
        "enum",
        "literal_error",
        "bool_parsing",
        "bool_type",
        "int_parsing",
        "int_type",
        "int_from_float",
        "float_parsing",
        "float_type",
        "finite_number",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "datetime_parsing",
        "datetime_type",
        "datetime_from_date_parsing",
        "timezone_aware",
    }
)

# The message already says everything; the input would add nothing.
_SILENT_ERROR_TYPES = frozenset({"missing", "extra_forbidden"})

_MAX_ECHO_CHARS = 40


def encode(record: Record) -> bytes:
    """Compact JSON with every field, defaults included, so readers never guess."""
    return record.model_dump_json(by_alias=True).encode()


def decode(model_cls: type[R], data: bytes | str | None) -> R:
    """Parse and validate one record value, or raise `RecordError` saying why not."""
    if not data:
        raise RecordError("empty record value")
    try:
        return model_cls.model_validate_json(data)
    except ValidationError as exc:
        # The slow path: work out the most useful explanation.
        try:
            explained = _explain(model_cls.__name__, data, exc)
        except Exception as err:  # the explanation must not fail where the parse did
            explained = RecordError(f"invalid {model_cls.__name__} ({type(err).__name__})")
        raise explained from None
    except Exception as exc:  # whatever else hostile bytes make the parser raise
        raise RecordError(f"unreadable record value ({type(exc).__name__})") from None


def validate(model_cls: type[R], value: Mapping[str, Any]) -> R:
    """Validate Python data (e.g. built by a producer) with decode's error messages."""
    try:
        return model_cls.model_validate(value)
    except ValidationError as exc:
        raise RecordError.from_problems(
            [_problem(model_cls.__name__, e) for e in exc.errors()]
        ) from None


def _explain(model_name: str, data: bytes | str, exc: ValidationError) -> RecordError:
    text = data
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            return RecordError(f"not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return RecordError(f"not JSON: {err.msg} at line {err.lineno} column {err.colno}")
    except RecursionError:
        return RecordError("JSON nested deeper than this reader accepts")
    except ValueError:  # Python refuses ints of more than sys.get_int_max_str_digits()
        return RecordError(
            f"JSON number of more than {sys.get_int_max_str_digits()} digits is not accepted"
        )
    if not isinstance(value, dict):
        return RecordError(f"not a JSON object: got {_json_kind(value)}")
    errors = exc.errors()
    for error in errors:
        if error["type"] == "json_invalid":  # JSON to Python's parser, not to ours (NaN)
            return RecordError(f"not JSON: {error['msg']}")
    return RecordError.from_problems([_problem(model_name, error) for error in errors])


def _problem(model_name: str, error: ErrorDetails) -> str:
    """`Model.field.path: message (got input)` for one pydantic error."""
    path = model_name
    for part in error["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif len(part) <= _MAX_ECHO_CHARS:
            path += f".{part}"
        else:  # a client's attribute key, say
            path += f".<key of {len(part)} chars>"
    problem = f"{path}: {error['msg']}"
    value = error["input"]
    # A dict input means the error is about a whole object (missing field, model
    # validator): printing its content would add nothing but risk.
    if error["type"] in _SILENT_ERROR_TYPES or isinstance(value, dict):
        return problem
    echo = error["type"] in _ECHOED_ERROR_TYPES and not any(
        part in _SENSITIVE_FIELDS for part in error["loc"]
    )
    return f"{problem} (got {_describe(value, echo=echo)})"


def _describe(value: Any, *, echo: bool) -> str:
    if echo and (value is None or isinstance(value, bool | int | float)):
        return repr(value)
    if echo and isinstance(value, str) and len(value) <= _MAX_ECHO_CHARS:
        return repr(value)
    if isinstance(value, str):
        return f"str of {_size(len(value))}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return type(value).__name__


def _size(chars: int) -> str:
    if chars < 1024:
        return f"{chars} chars"
    if chars < 1024 * 1024:
        return f"{chars / 1024:.0f} KiB"
    return f"{chars / 2**20:.0f} MiB"


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
