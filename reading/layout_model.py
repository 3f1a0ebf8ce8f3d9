"""PyMuPDF's layout model, switched on one caller at a time, built once per process.

Switching the model on is process-global in PyMuPDF (it then also runs inside the
classic converter's table detection, 95 % of its time), so it is on only inside
`layout_model()`, one caller at a time. Two costs are cut here, measured by
`python -m bench.quality.cost` (docs/benchmarks.md, "What a page costs"):

- Its ONNX sessions are made without spinning threads. onnxruntime's intra-op threads
  otherwise spin while they wait for work: on this 2-core machine a text-layer page took
  0.60 CPU-seconds with them and 0.47 without, in the same wall time.
- On a page with a text layer, PyMuPDF's table finder (pymupdf4llm's HTML table engine)
  runs only where the layout model saw a table: it built the page's characters again
  on every page, 0.02-0.24 s of a page the model had already found no table on, for no
  table found on any of bench/quality's pages (`tables_where_the_model_sees_them`). A
  page read from pixels asks for the finder where reading/pixel_tables.py ruled a grid.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import onnxruntime  # type: ignore[import-untyped]
import pymupdf
import pymupdf4llm
from pymupdf4llm.helpers import document_layout, table_html

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
# The model as PyMuPDF switched it on the first time. Switched off, PyMuPDF forgets it,
# and switched on again it builds the model anew (its ONNX sessions: about 0.7 s of CPU,
# more than the page it was for); handed back, it is kept.
_MODEL: list[Any] = []
# The thread whose parse runs the table finder only where the model saw a table (set
# under _LOCK, for the parse in progress; 0: none).
_GATED = [0]
# The thread whose parse reads the regions the model takes for tables as text (set by
# `tables_as_text()` inside `layout_model()`; 0: none).
_AS_TEXT = [0]


def _quiet_session(model_path: Any, providers: Any = None) -> Any:
    """pymupdf.layout's session (its CPU memory arena off, as it makes them), with
    intra-op threads that sleep rather than spin while they wait."""
    options = onnxruntime.SessionOptions()
    options.enable_cpu_mem_arena = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model_path, sess_options=options, providers=providers)


def _install() -> None:
    """Every module of pymupdf.layout's ONNX package makes its sessions quiet, and the
    model PyMuPDF built on import (with its own sessions) is dropped, to be built anew."""
    import importlib
    import pkgutil

    import pymupdf.layout.onnx as onnx_models

    for info in pkgutil.iter_modules(onnx_models.__path__, f"{onnx_models.__name__}."):
        try:
            module = importlib.import_module(info.name)
        except Exception as exc:  # a model of another version: its sessions as they are
            log.debug("%s not imported (%s)", info.name, type(exc).__name__)
            continue
        if hasattr(module, "make_session"):
            module.make_session = _quiet_session  # type: ignore[attr-defined]
    pymupdf._get_layout = None  # pymupdf.layout.activate() builds it again
    real = table_html.page_html_tables

    def tables_where_the_model_sees_them(page: Any) -> Any:
        if _GATED[0] == threading.get_ident() and not any(
            box.get("class_name") == "table" for box in page.layout_information or []
        ):
            return []
        return real(page)

    table_html.page_html_tables = tables_where_the_model_sees_them
    layout = document_layout.get_layout_locked

    def layout_with_tables_as_text(page: Any, **kwargs: Any) -> Any:
        found = layout(page, **kwargs)
        if _AS_TEXT[0] == threading.get_ident():
            for box in page.layout_information or []:
                if box.get("class_name") == "table":
                    box["class_name"] = "text"
        return found

    document_layout.get_layout_locked = layout_with_tables_as_text


@contextmanager
def layout_model(*, gate_tables: bool = False) -> Iterator[None]:
    """The layout model on, for this caller alone; with `gate_tables`, the table
    finder only where the model sees a table."""
    with _LOCK:
        if _MODEL:
            pymupdf._get_layout = _MODEL[0]  # pymupdf.layout.activate() keeps what is there
        else:
            _install()
        pymupdf4llm.use_layout(True)
        _MODEL[:] = [pymupdf._get_layout]
        _GATED[0] = threading.get_ident() if gate_tables else 0
        try:
            yield
        finally:
            _GATED[0] = _AS_TEXT[0] = 0
            pymupdf4llm.use_layout(False)


@contextmanager
def tables_as_text() -> Iterator[None]:
    """Inside `layout_model()`: this caller's parse reads the regions the model takes
    for tables as text, with no table finder and no grid."""
    if not _LOCK.locked():
        raise RuntimeError("tables_as_text() is for a caller inside layout_model()")
    _AS_TEXT[0] = threading.get_ident()
    try:
        yield
    finally:
        _AS_TEXT[0] = 0
