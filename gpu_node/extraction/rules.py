"""The `rules` engine: typed fields from OCR boxes by label geometry and parsers.

No model beyond OCR, so it runs anywhere; it is also the OCR side of the hybrid
engine's cross-check. Each field is looked up by its printed label (fuzzy, as
OCR reads it), its value taken from the nearest box after or below the label
that parses as the field's type.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from pydantic import ValidationError

from gpu_node.extraction.base import ExtractionInput
from gpu_node.extraction.parsers import (
    Box,
    LabelMatch,
    boxes_of,
    column_below,
    find_cpfs,
    find_dates,
    find_label,
    match_label,
    normalize_name,
    squash,
    value_candidates,
)
from gpu_node.models.ocr import OcrEngine
from schemas.common import DocumentType, family
from schemas.extraction import (
    ExtractionFields,
    ExtractionResult,
    GenericFields,
    KeyValue,
    fields_model_for,
)
from schemas.pages import OcrResult

log = logging.getLogger(__name__)

Parser = Callable[[str], str | None]

UFS = frozenset({
    "AC", "AL", "AM", "AP", "BA", "CE", "DF", "ES", "GO", "MA", "MG", "MS", "MT", "PA",
    "PB", "PE", "PI", "PR", "RJ", "RN", "RO", "RR", "RS", "SC", "SE", "SP", "TO",
})  # fmt: skip
_ISSUERS = ("SSP", "SDS", "SESP", "SSPDS", "PC", "IFP", "IGP", "IIRGD", "DETRAN", "POLITEC", "DIC")
_CATEGORIES = ("ACC", "AB", "AC", "AD", "AE", "A", "B", "C", "D", "E")
# Digits OCR reads as letters and back, per what the field can hold.
_AS_DIGITS = str.maketrans({"O": "0", "Q": "0", "D": "0", "I": "1", "L": "1", "S": "5", "B": "8"})
_AS_LETTERS = str.maketrans({"8": "B", "0": "D", "4": "A"})


def parse_cpf(text: str) -> str | None:
    found = find_cpfs(text)
    return found[0] if found else None


def parse_date_value(text: str) -> str | None:
    found = find_dates(text)
    return found[0] if found else None


def parse_name(text: str) -> str | None:
    name = normalize_name(text)
    return name if len(name.split()) >= 2 else None


def parse_rg_number(text: str) -> str | None:
    # RG numbers are printed dd.ddd.ddd-c (c a digit or X).
    for word in text.split():
        chars = squash(word)
        if len(chars) != 9:
            continue
        body, check = chars[:8].translate(_AS_DIGITS), chars[8]
        check = check if check == "X" else check.translate(_AS_DIGITS)
        if body.isdigit() and (check.isdigit() or check == "X"):
            return f"{body[:2]}.{body[2:5]}.{body[5:]}-{check}"
    return None


def parse_issuer(text: str) -> str | None:
    # "SSP/MG"; OCR drops the slash or reads it as a letter ("SSPMMG").
    chars = squash(text)
    for org in sorted(_ISSUERS, key=len, reverse=True):
        if chars.startswith(org) and chars[-2:] in UFS and len(chars) - len(org) <= 3:
            return f"{org}/{chars[-2:]}"
    return None


def parse_registration(text: str) -> str | None:
    digits = squash(text).translate(_AS_DIGITS)
    return digits if len(digits) == 11 and digits.isdigit() else None


def parse_category(text: str) -> str | None:
    word = squash(text).translate(_AS_LETTERS)
    return word if word in _CATEGORIES else None


def parse_sex(text: str) -> str | None:
    word = squash(text)
    return word if word in ("M", "F") else None


def parse_nationality(text: str) -> str | None:
    word = normalize_name(text)
    return word if len(word) >= 4 and " " not in word else None


def parse_place(text: str) -> str | None:
    # "CITY - UF": OCR often loses the dash, never the UF.
    words = normalize_name(text).split()
    if len(words) >= 2 and words[-1] in UFS:
        return f"{' '.join(words[:-1])} - {words[-1]}"
    return None


@dataclass(frozen=True)
class FieldRule:
    name: str
    labels: tuple[str, ...]
    parse: Parser


@dataclass(frozen=True)
class FamilyRules:
    fields: tuple[FieldRule, ...]
    # "DOC. IDENTIDADE / ORG. EMISSOR / UF": one value, the RG number then its issuer.
    identity_labels: tuple[str, ...] = ()
    parents_labels: tuple[str, ...] = ("FILIACAO",)
    extra_labels: tuple[str, ...] = ()


_NAME = FieldRule("name", ("NOME",), parse_name)
_CPF = FieldRule("cpf", ("CPF",), parse_cpf)
_BIRTH = FieldRule("birth_date", ("DATA DE NASCIMENTO", "NASCIMENTO"), parse_date_value)
_EXPIRY = FieldRule("expiry_date", ("VALIDADE",), parse_date_value)
_PLACE = FieldRule("place_of_birth", ("NATURALIDADE",), parse_place)

FAMILY_RULES: dict[str, FamilyRules] = {
    "rg": FamilyRules(
        fields=(
            _NAME,
            _CPF,
            _BIRTH,
            _PLACE,
            FieldRule("rg_number", ("REGISTRO GERAL",), parse_rg_number),
            FieldRule("issue_date", ("DATA DE EXPEDICAO", "EXPEDICAO"), parse_date_value),
            FieldRule("issuing_authority", ("ORGAO EXPEDIDOR",), parse_issuer),
        ),
        extra_labels=("DOC ORIGEM", "CARTEIRA DE IDENTIDADE", "POLEGAR DIREITO"),
    ),
    "cnh": FamilyRules(
        fields=(
            _NAME,
            _CPF,
            _BIRTH,
            _EXPIRY,
            FieldRule("registration_number", ("NO REGISTRO", "N REGISTRO"), parse_registration),
            FieldRule("category", ("CATEGORIA", "CAT HAB"), parse_category),
            FieldRule("issue_date", ("DATA EMISSAO", "DATA DE EMISSAO"), parse_date_value),
        ),
        identity_labels=("DOC IDENTIDADE", "DOC IDENTIDADE ORG EMISSOR UF"),
        extra_labels=("LOCAL", "OBSERVACOES", "ORG EMISSOR", "UF"),
    ),
    "cin": FamilyRules(
        fields=(
            _NAME,
            _CPF,
            _BIRTH,
            _EXPIRY,
            _PLACE,
            FieldRule("issue_date", ("DATA DE EMISSAO", "DATA EMISSAO"), parse_date_value),
            FieldRule("sex", ("SEXO",), parse_sex),
            FieldRule("nationality", ("NACIONALIDADE",), parse_nationality),
        ),
        extra_labels=("LOCAL DE EMISSAO", "ORGAO EXPEDIDOR"),
    ),
}


# ID pages that print the holder's birth date next to later dates (issue, expiry).
BIRTH_DATE_PAGES = frozenset({DocumentType.rg_back, DocumentType.cnh_front, DocumentType.cin_front})
# Issue and expiry dates lie at most 10 years apart; a birth date precedes them
# by more. Below this gap the earliest date could be an issue date.
MIN_BIRTH_GAP_YEARS = 12


def _earliest_as_birth_date(text: str) -> str | None:
    """When the labels are unreadable (small scans): the earliest date, if clearly a birth date.

    Needs a second, much later date on the page, so a lone issue or expiry date
    (the birth date itself misread) is never taken for it.
    """
    dates = sorted(set(find_dates(text)))
    if len(dates) < 2:
        return None
    first, second = date.fromisoformat(dates[0]), date.fromisoformat(dates[1])
    return dates[0] if (second - first).days >= MIN_BIRTH_GAP_YEARS * 365 else None


@dataclass
class _Page:
    boxes: list[Box]
    labels: dict[str, tuple[str, ...]]  # every label of the family, by owner

    def label_boxes(self) -> list[Box]:
        every = [lab for labs in self.labels.values() for lab in labs]
        out = []
        for b in self.boxes:
            for lab in every:
                m = match_label(b.text, lab)
                if m and not m[1].strip():
                    out.append(b)
                    break
        return out

    def find(self, owner: str) -> list[LabelMatch]:
        rivals = [lab for key, labs in self.labels.items() if key != owner for lab in labs]
        return find_label(self.boxes, self.labels[owner], rivals)


def _first_parsed(candidates: Sequence[str], parse: Parser) -> str | None:
    for text in candidates:
        value = parse(text)
        if value is not None:
            return value
    return None


def extract_fields(
    document_type: DocumentType | None, ocr: OcrResult
) -> tuple[ExtractionFields, list[str]]:
    """Typed fields for the page and warnings (never containing values)."""
    if document_type is None or family(document_type) == "generic":
        return _generic_fields(ocr), []
    rules = FAMILY_RULES[family(document_type)]
    labels: dict[str, tuple[str, ...]] = {r.name: r.labels for r in rules.fields}
    labels["_identity"] = rules.identity_labels
    labels["_parents"] = rules.parents_labels
    labels["_extra"] = rules.extra_labels
    page = _Page(boxes_of(ocr), labels)
    label_boxes = page.label_boxes()
    values: dict[str, str] = {}
    warnings: list[str] = []

    def lookup(owner: str, parse: Parser) -> tuple[str | None, bool]:
        found = page.find(owner)
        for match in found:
            value = _first_parsed(value_candidates(match, page.boxes, label_boxes), parse)
            if value is not None:
                return value, True
        return None, bool(found)

    for rule in rules.fields:
        value, labelled = lookup(rule.name, rule.parse)
        if value is not None:
            values[rule.name] = value
        elif labelled and rule.name in ("cpf", "birth_date"):
            warnings.append(f"{rule.name}: label found but no readable value next to it")

    if rules.identity_labels:
        rg_number, _ = lookup("_identity", parse_rg_number)
        if rg_number is not None:
            values["rg_number"] = rg_number

    for match in page.find("_parents"):
        names = [parse_name(b.text) for b in column_below(match, page.boxes, 2, label_boxes)]
        if names and names[0]:
            values["father_name"] = names[0]
        if len(names) > 1 and names[1]:
            values["mother_name"] = names[1]
        break

    if "birth_date" not in values and document_type in BIRTH_DATE_PAGES:
        birth = _earliest_as_birth_date(ocr.text)
        if birth is not None:
            values["birth_date"] = birth
            warnings.append("birth_date: label unreadable, taken as the earliest date on the page")

    if "cpf" not in values:
        # Labels get lost to OCR; a check-digit-valid CPF anywhere on an ID is
        # still its holder's when it is the only one.
        anywhere = find_cpfs(ocr.text)
        if len(anywhere) == 1:
            values["cpf"] = anywhere[0]
    return _validated(fields_model_for(document_type), values, warnings), warnings


def _validated(
    model: type[ExtractionFields], values: dict[str, str], warnings: list[str]
) -> ExtractionFields:
    # One malformed value must not cost the others: validate field by field.
    kept: dict[str, str] = {}
    for name, value in values.items():
        if name not in model.model_fields:
            continue
        try:
            model.model_validate({name: value})
        except ValidationError:
            warnings.append(f"{name}: value read but not in the expected format")
            continue
        kept[name] = value
    return model.model_validate(kept)


_KEY_VALUE = re.compile(r"^\s*([^:]{2,40}?)\s*:\s*(.+?)\s*$")


def _generic_fields(ocr: OcrResult) -> GenericFields:
    """Key-values of an untyped page: `LABEL: value` lines, plus any valid CPF."""
    pairs: list[KeyValue] = []
    for line in ocr.text.splitlines():
        m = _KEY_VALUE.match(line)
        if m and any(ch.isalpha() for ch in m.group(1)):
            key, value = m.group(1), m.group(2)
            if squash(key) == "CPF":
                cpf = parse_cpf(value)
                if cpf is None:
                    continue
                value = cpf
            pairs.append(KeyValue(key=key[:200], value=value[:2000]))
    keys = {squash(p.key) for p in pairs}
    if "CPF" not in keys:
        pairs.extend(KeyValue(key="CPF", value=cpf) for cpf in find_cpfs(ocr.text))
    return GenericFields(fields=pairs[:200])


class RulesExtractor:
    """Extraction by OCR and rules; runs OCR (batched) for items that lack it."""

    name: str = "rules"

    def __init__(self, ocr_engine: OcrEngine) -> None:
        self.ocr = ocr_engine

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        return await asyncio.to_thread(self.extract_sync, items)

    def extract_sync(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        started = time.perf_counter()
        missing = [i for i, item in enumerate(items) if item.ocr is None]
        read = iter(self.ocr.read([items[i].image for i in missing]) if missing else [])
        results: list[ExtractionResult] = []
        filled = 0
        for item in items:
            ocr = item.ocr if item.ocr is not None else next(read)
            fields, warnings = extract_fields(item.document_type, ocr)
            if not ocr.boxes:
                warnings.append("no text found on the page")
            filled += len(fields.model_dump(exclude_none=True, exclude_defaults=True))
            results.append(
                ExtractionResult(
                    document_type=item.document_type,
                    fields=fields,
                    engine=self.name,
                    warnings=warnings,
                )
            )
        log.debug(
            "rules extraction: %d pages (%d OCR'd here), %d fields filled in %.2fs",
            len(items),
            len(missing),
            filled,
            time.perf_counter() - started,
        )
        return results
