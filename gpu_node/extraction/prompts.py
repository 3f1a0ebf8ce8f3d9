"""What the vision-language engines ask for, and how their answers are read.

One instruction per document type. The fields and their descriptions come from
the pydantic fields models in `schemas.extraction`, so the prompt, the JSON
Schema the decoder is constrained to and the validation of the answer cannot
drift apart. Pure Python: no model library is imported here.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, ValidationError

from schemas.common import DocumentType
from schemas.extraction import ExtractionFields, GenericFields, KeyValue, fields_model_for

# How each document type is introduced to the model; None: type unknown.
_SUBJECTS: dict[DocumentType | None, str] = {
    DocumentType.rg_front: (
        "the FRONT of a Brazilian RG (Registro Geral) identity card: the side with the photo"
    ),
    DocumentType.rg_back: (
        "the BACK of a Brazilian RG (Registro Geral) identity card: the side with the holder's data"
    ),
    DocumentType.cnh_front: (
        "the FRONT of a Brazilian CNH (Carteira Nacional de Habilitação) driver's license"
    ),
    DocumentType.cnh_back: (
        "the BACK of a Brazilian CNH (Carteira Nacional de Habilitação) driver's license"
    ),
    DocumentType.cin_front: (
        "the FRONT of a Brazilian CIN (Carteira de Identidade Nacional) identity card"
    ),
    DocumentType.cin_back: (
        "the BACK of a Brazilian CIN (Carteira de Identidade Nacional) identity card"
    ),
    DocumentType.invoice: "an invoice (nota fiscal, fatura or recibo)",
    DocumentType.letter: "a letter or other correspondence",
    # Classified as none of the known types (extract with document_type=unknown).
    DocumentType.unknown: "a document of unknown type",
    None: "a document of unknown type",
}

_DATES = (
    "Dates are printed DD/MM/YYYY on Brazilian documents; write every date as YYYY-MM-DD"
    " (for example 16/07/1989 becomes 1989-07-16)."
)
_ANSWER = "Answer with one JSON object and nothing else."


def _field_lines(model: type[BaseModel]) -> list[str]:
    return [f"- {name}: {info.description or name}" for name, info in model.model_fields.items()]


def _typed_prompt(doc_type: DocumentType) -> str:
    model = fields_model_for(doc_type)
    return "\n".join([
        f"The image is {_SUBJECTS[doc_type]}.",
        "Extract these fields, copying the values exactly as printed:",
        *_field_lines(model),
        _DATES,
        "Use null for a field that is not printed on this side of the document;"
        " never guess a value.",
        _ANSWER,
    ])  # fmt: skip


def _generic_prompt(doc_type: DocumentType | None) -> str:
    return "\n".join([
        f"The image is {_SUBJECTS[doc_type]}.",
        "List every labelled value printed on the page, in reading order, under \"fields\":"
        " one object per value with",
        *_field_lines(KeyValue),
        "Copy labels and values exactly as printed (dates and amounts as printed too).",
        "Use an empty list when the page has no labelled values.",
        _ANSWER,
    ])  # fmt: skip


def prompt_for(doc_type: DocumentType | None) -> str:
    """The instruction for a page of this type (None: unknown, generic key-values)."""
    if doc_type is None or fields_model_for(doc_type) is GenericFields:
        return _generic_prompt(doc_type)
    return _typed_prompt(doc_type)


def _strict(node: Any) -> Any:
    """Every object closed and every property required; no defaults, no titles.

    That is what OpenAI's `strict` structured outputs accept, and it gives a
    constrained decoder a fixed key order. The meaning is unchanged: the optional
    fields are nullable (`anyOf [..., null]`), so "not found" is spelled null.
    """
    if isinstance(node, list):
        return [_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("default", "title"):
            continue
        if key in ("properties", "$defs"):  # keys here are names, not keywords
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        else:
            out[key] = _strict(value)
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def json_schema_for(doc_type: DocumentType | None) -> dict[str, Any]:
    """JSON Schema the model's answer is constrained to (a fresh copy per call).

    The fields model's own schema, made strict (see `_strict`); what it accepts
    validates against the fields model.
    """
    model = fields_model_for(doc_type)
    if model not in _SCHEMAS:
        _SCHEMAS[model] = _strict(model.model_json_schema())
    return copy.deepcopy(_SCHEMAS[model])


def schema_name(doc_type: DocumentType | None) -> str:
    """A name for the schema (OpenAI `json_schema.name`: letters, digits, _ and -)."""
    return fields_model_for(doc_type).__name__


class InvalidModelOutput(ValueError):
    """The model's answer is not a valid fields object (the record's problem, not the engine's).

    Messages carry sizes, positions and field names only: never the answer itself,
    which holds personal data.
    """


def parse_fields(
    text: str | None, doc_type: DocumentType | None, *, finish_reason: str | None, engine: str
) -> ExtractionFields:
    """The fields model validated from the model's JSON answer."""
    model = fields_model_for(doc_type)
    if not text:
        raise InvalidModelOutput(f"{engine}: empty answer (finish_reason={finish_reason})")
    if finish_reason == "length":
        raise InvalidModelOutput(
            f"{engine}: answer truncated at the max_tokens limit ({len(text)} chars);"
            " raise max_tokens or shorten the schema"
        )
    try:
        # strict=False: control characters inside strings are let through. xgrammar
        # (vLLM's default structured-output backend) admits them in length-bounded
        # strings, so a constrained answer can carry one; rejecting the page for a
        # stray \x02 would be worse than keeping it.
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise InvalidModelOutput(
            f"{engine}: answer is not valid JSON ({exc.msg} at char {exc.pos} of {len(text)},"
            f" finish_reason={finish_reason})"
        ) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # loc and type only: pydantic messages can quote constraint values but
        # the inputs are hidden by the models' config; keep it terse anyway.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['type']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise InvalidModelOutput(
            f"{engine}: answer does not match {model.__name__} ({exc.error_count()} errors:"
            f" {problems})"
        ) from None
