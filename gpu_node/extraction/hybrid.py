"""The `hybrid` engine: VLM fields, cross-checked against the OCR rules engine.

The VLM reads layouts and handwriting the rules cannot, but can hallucinate a
plausible digit; OCR + rules is literal. The VLM's fields are kept, every field
both engines read differently is reported as a disagreement, and the CPF, which
carries its own check digits, is corrected from OCR when the VLM's fails them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence

from gpu_node.extraction.base import ExtractionInput, Extractor
from gpu_node.extraction.parsers import find_cpfs, normalize_name, squash
from gpu_node.extraction.rules import RulesExtractor
from gpu_node.models.ocr import OcrEngine
from schemas.cpf import is_valid_cpf
from schemas.extraction import (
    ExtractionFields,
    ExtractionResult,
    FieldDisagreement,
    GenericFields,
    KeyValue,
)

log = logging.getLogger(__name__)

_NAME_FIELDS = frozenset({"name", "father_name", "mother_name", "nationality", "place_of_birth"})

REASON_DIFFER = "VLM and OCR read different values"
REASON_CPF_REPLACED = "VLM CPF check digits are invalid; replaced by the OCR CPF, whose are valid"
REASON_CPF_BOTH_VALID = "VLM and OCR read different CPFs, both with valid check digits"
REASON_CPF_FROM_OCR = "VLM found no CPF; OCR found one with valid check digits"
WARNING_CPF_DROPPED = "cpf dropped: VLM CPF check digits are invalid and OCR found no valid CPF"


def comparable(field: str, value: str | None) -> str | None:
    """The form two readings of `field` are compared in (None: no value)."""
    if value is None or not value.strip():
        return None
    if field in _NAME_FIELDS:
        # Punctuation ("SAO PAULO - SP") and accents are presentation, not content.
        return normalize_name(value)
    return squash(value)


class HybridExtractor:
    def __init__(self, vlm: Extractor, ocr_engine: OcrEngine) -> None:
        self.vlm = vlm
        self.rules = RulesExtractor(ocr_engine)
        self.name = f"hybrid({vlm.name})"

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        vlm_results, ocr_results = await asyncio.gather(
            self.vlm.extract(items), self.rules.extract(items)
        )
        if len(vlm_results) != len(items):
            raise RuntimeError(
                f"{self.vlm.name} returned {len(vlm_results)} results for {len(items)} items"
            )
        merged = [self.merge(vlm, ocr) for vlm, ocr in zip(vlm_results, ocr_results, strict=True)]
        log.debug(
            "hybrid extraction: %d pages, %d disagreements",
            len(items),
            sum(len(r.disagreements) for r in merged),
        )
        return merged

    def merge(self, vlm: ExtractionResult, ocr: ExtractionResult) -> ExtractionResult:
        """The VLM result, checked field by field against the OCR one."""
        warnings = list(vlm.warnings)
        disagreements = list(vlm.disagreements)
        fields: ExtractionFields
        if isinstance(vlm.fields, GenericFields) or isinstance(ocr.fields, GenericFields):
            fields = _checked_generic(vlm, ocr, disagreements, warnings)
        else:
            vlm_values = vlm.fields.model_dump()
            ocr_values = ocr.fields.model_dump()
            for name, vlm_value in vlm_values.items():
                ocr_value = ocr_values.get(name)
                if name == "cpf":
                    vlm_values["cpf"] = _checked_cpf(vlm_value, ocr_value, disagreements, warnings)
                    continue
                a, b = comparable(name, vlm_value), comparable(name, ocr_value)
                if a is not None and b is not None and a != b:
                    disagreements.append(
                        FieldDisagreement(
                            field=name,
                            vlm_value=vlm_value,
                            ocr_value=ocr_value,
                            reason=REASON_DIFFER,
                        )
                    )
            fields = type(vlm.fields).model_validate(vlm_values)
        return ExtractionResult(
            document_type=vlm.document_type,
            fields=fields,
            engine=self.name,
            disagreements=disagreements,
            warnings=warnings,
        )


def _checked_cpf(
    vlm_cpf: str | None,
    ocr_cpf: str | None,
    disagreements: list[FieldDisagreement],
    warnings: list[str],
) -> str | None:
    # The rules engine only ever returns CPFs whose check digits are valid.
    if vlm_cpf is None:
        if ocr_cpf is not None:
            disagreements.append(FieldDisagreement(
                field="cpf", vlm_value=None, ocr_value=ocr_cpf, reason=REASON_CPF_FROM_OCR
            ))  # fmt: skip
        return ocr_cpf
    if not is_valid_cpf(vlm_cpf):
        if ocr_cpf is not None:
            disagreements.append(FieldDisagreement(
                field="cpf", vlm_value=vlm_cpf, ocr_value=ocr_cpf, reason=REASON_CPF_REPLACED
            ))  # fmt: skip
            return ocr_cpf
        warnings.append(WARNING_CPF_DROPPED)
        return None
    if ocr_cpf is not None and ocr_cpf != vlm_cpf:
        disagreements.append(FieldDisagreement(
            field="cpf", vlm_value=vlm_cpf, ocr_value=ocr_cpf, reason=REASON_CPF_BOTH_VALID
        ))  # fmt: skip
    return vlm_cpf


_CPF_KEY = re.compile(r"\bCPF\b", re.IGNORECASE)


def _checked_generic(
    vlm: ExtractionResult,
    ocr: ExtractionResult,
    disagreements: list[FieldDisagreement],
    warnings: list[str],
) -> GenericFields:
    """Untyped pages: free-form keys can't be paired, but CPF values can be checked."""
    vlm_fields = vlm.fields if isinstance(vlm.fields, GenericFields) else GenericFields()
    ocr_cpfs = [
        cpf
        for kv in (ocr.fields.fields if isinstance(ocr.fields, GenericFields) else [])
        if _CPF_KEY.search(kv.key)
        for cpf in find_cpfs(kv.value)
    ]
    checked: list[KeyValue] = []
    for kv in vlm_fields.fields:
        if not _CPF_KEY.search(kv.key):
            checked.append(kv)
            continue
        if find_cpfs(kv.value):  # only ever returns CPFs with valid check digits
            checked.append(kv)
            continue
        replacement = ocr_cpfs[0] if len(set(ocr_cpfs)) == 1 else None
        if replacement is None:
            warnings.append(WARNING_CPF_DROPPED)
            continue
        disagreements.append(FieldDisagreement(
            field=kv.key, vlm_value=kv.value, ocr_value=replacement, reason=REASON_CPF_REPLACED
        ))  # fmt: skip
        checked.append(KeyValue(key=kv.key, value=replacement))
    return GenericFields(fields=checked)
