"""Typed extraction results.

The JSON Schema of each `*Fields` model is what the vision-language model is
constrained to, and the field descriptions are part of its prompt: write them for
the model. Every field is optional because a model may not find it on the page.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from schemas.common import DocumentType, Family, Model, family

# `[0-9]` rather than `\d`: the regex engine treats `\d` as any Unicode digit.
IsoDate = Annotated[
    str, StringConstraints(pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")
]
Cpf = Annotated[str, StringConstraints(pattern=r"^[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}$")]
# A bound on every string keeps a misbehaving model from generating forever.
Text = Annotated[str, StringConstraints(max_length=200)]

_NAME = "Full name of the holder, as printed"
_CPF = "CPF number formatted as 000.000.000-00"
_BIRTH = "Date of birth, YYYY-MM-DD"
_ISSUE = "Date of issue, YYYY-MM-DD"
_EXPIRY = "Expiry date (validade), YYYY-MM-DD"
_FATHER = "Father's full name (filiação)"
_MOTHER = "Mother's full name (filiação)"
_BIRTHPLACE = "Place of birth (naturalidade): city and state, as printed"


class RGFields(Model):
    """Fields of a Brazilian RG (Registro Geral) identity card, front or back."""

    name: Text | None = Field(None, description=_NAME)
    cpf: Cpf | None = Field(None, description=_CPF)
    rg_number: Text | None = Field(None, description="RG number (registro geral), as printed")
    birth_date: IsoDate | None = Field(None, description=_BIRTH)
    issue_date: IsoDate | None = Field(None, description=_ISSUE)
    father_name: Text | None = Field(None, description=_FATHER)
    mother_name: Text | None = Field(None, description=_MOTHER)
    place_of_birth: Text | None = Field(None, description=_BIRTHPLACE)
    issuing_authority: Text | None = Field(
        None, description="Issuing authority and state, e.g. SSP/SP"
    )


class CNHFields(Model):
    """Fields of a Brazilian CNH (Carteira Nacional de Habilitação) driver's license."""

    name: Text | None = Field(None, description=_NAME)
    cpf: Cpf | None = Field(None, description=_CPF)
    rg_number: Text | None = Field(None, description="RG number (doc. identidade), as printed")
    birth_date: IsoDate | None = Field(None, description=_BIRTH)
    registration_number: Annotated[str, StringConstraints(pattern=r"^[0-9]{11}$")] | None = Field(
        None, description="Nº registro: the 11-digit license registration number"
    )
    category: Annotated[str, StringConstraints(pattern=r"^(ACC|A|B|C|D|E|AB|AC|AD|AE)$")] | None = (
        Field(None, description="License category (cat. hab.), e.g. B or AB")
    )
    issue_date: IsoDate | None = Field(None, description=_ISSUE)
    expiry_date: IsoDate | None = Field(None, description=_EXPIRY)
    father_name: Text | None = Field(None, description=_FATHER)
    mother_name: Text | None = Field(None, description=_MOTHER)


class CINFields(Model):
    """Fields of a Brazilian CIN (Carteira de Identidade Nacional), front or back."""

    name: Text | None = Field(None, description=_NAME)
    cpf: Cpf | None = Field(None, description=_CPF)
    birth_date: IsoDate | None = Field(None, description=_BIRTH)
    issue_date: IsoDate | None = Field(None, description=_ISSUE)
    expiry_date: IsoDate | None = Field(None, description=_EXPIRY)
    sex: Text | None = Field(None, description="Sex (sexo), as printed, e.g. M or F")
    nationality: Text | None = Field(None, description="Nationality (nacionalidade)")
    place_of_birth: Text | None = Field(None, description=_BIRTHPLACE)
    father_name: Text | None = Field(None, description=_FATHER)
    mother_name: Text | None = Field(None, description=_MOTHER)


class KeyValue(Model):
    key: Annotated[str, StringConstraints(max_length=200)] = Field(
        description="Label of the field as printed on the page"
    )
    value: Annotated[str, StringConstraints(max_length=2000)] = Field(
        description="Value of the field as printed on the page"
    )


class GenericFields(Model):
    """Labelled values found on a document of no specific type (invoice, letter, ...)."""

    fields: list[KeyValue] = Field(
        default_factory=list,
        max_length=200,
        description="Every labelled value on the page, in reading order",
    )


ExtractionFields: TypeAlias = RGFields | CNHFields | CINFields | GenericFields

_MODELS: dict[Family, type[ExtractionFields]] = {
    "rg": RGFields,
    "cnh": CNHFields,
    "cin": CINFields,
    "generic": GenericFields,
}


def fields_model_for(doc_type: DocumentType | None) -> type[ExtractionFields]:
    """The fields model for a document type; unknown type (None) means generic."""
    return GenericFields if doc_type is None else _MODELS[family(doc_type)]


def extraction_json_schema(doc_type: DocumentType | None) -> dict[str, Any]:
    """JSON Schema to constrain a VLM with (vLLM structured outputs, OpenAI response_format)."""
    return fields_model_for(doc_type).model_json_schema()


def _fields_for_document_type(
    value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
) -> Any:
    # The fields models are all-optional and so overlap: a bare `{"name": ...}` fits
    # several. The sibling `document_type` decides which one applies, so the wire
    # format needs no tag and the VLM schema stays exactly the fields.
    if "document_type" not in info.data:  # it failed validation; its error says why
        return handler(value)
    model = fields_model_for(info.data["document_type"])
    if isinstance(value, BaseModel):
        if not isinstance(value, model):
            raise PydanticCustomError(
                "fields_type_mismatch",
                "fields must be {expected} for document_type {doc_type}, got {actual}",
                {
                    "expected": model.__name__,
                    "doc_type": info.data["document_type"],
                    "actual": type(value).__name__,
                },
            )
        return value
    return model.model_validate(value)


# Models that hold this field must declare `document_type` before it.
TypedFields = Annotated[ExtractionFields, WrapValidator(_fields_for_document_type)]


class FieldDisagreement(Model):
    """A field where the VLM and OCR read different values (hybrid backend)."""

    field: str
    vlm_value: str | None
    ocr_value: str | None
    reason: str  # e.g. "CPF check digits do not match"


class ExtractionResult(Model):
    document_type: DocumentType | None = None  # None: extracted as generic key-values
    fields: TypedFields
    engine: str  # which engine produced the fields, e.g. "vllm", "openai", "rules"
    disagreements: list[FieldDisagreement] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
