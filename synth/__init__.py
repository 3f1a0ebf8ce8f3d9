"""Deterministic synthetic Brazilian identity documents (and invoices/letters) with ground truth.

Used by tests, the demo, benchmarks, and to train/evaluate the page classifier
and OCR field extraction. Same seed and arguments -> identical images and bytes
(on the same Pillow/libjpeg/FreeType build).

PDFs come from `synth.pdf`, imported by name: PyMuPDF is loaded only where PDFs are
made (bench.gpu_probe draws its pages on GPU machines that do not have it).
"""

from __future__ import annotations

from schemas.cpf import cpf_check_digits, cpf_digits, format_cpf, is_valid_cpf, random_cpf
from synth.dataset import DatasetSummary, doc_rng, generate, write_dataset
from synth.doctypes import (
    DEFAULT_WIDTH,
    DOC_TYPES,
    FIELDS_BY_DOC_TYPE,
    ID_DOC_TYPES,
    ROTATIONS,
    SyntheticDoc,
    rotated_size,
    upright_size,
)
from synth.fields import FIELD_NAMES, Person, random_person
from synth.render import render_document

__all__ = [
    "DEFAULT_WIDTH",
    "DOC_TYPES",
    "FIELDS_BY_DOC_TYPE",
    "FIELD_NAMES",
    "ID_DOC_TYPES",
    "ROTATIONS",
    "DatasetSummary",
    "Person",
    "SyntheticDoc",
    "cpf_check_digits",
    "cpf_digits",
    "doc_rng",
    "format_cpf",
    "generate",
    "is_valid_cpf",
    "random_cpf",
    "random_person",
    "render_document",
    "rotated_size",
    "upright_size",
    "write_dataset",
]
