"""The pipeline side of bench.quality: one pipeline as `pagestream up` runs it, every
page submitted with operation `ocr` once per reader, each page's Markdown collected from
docs.results (claim-checked parts fetched from the blob store).

The pipeline is streams/local/up.py's `running_pipeline`: an embedded broker of its own on
free ports with its data in a scratch folder, the topics, `pagestream gpu-node` (on CPU,
its real models) and one `pagestream agents` worker, as child processes that inherit this
process's environment (so any PAGESTREAM_* setting given to the benchmark reaches them).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.cluster import pipeline_environment
from schemas import Backend, DocumentResult, Layout, OcrEngineName, Operation, Options, TextLayer
from schemas.pages import OcrResult
from schemas.results import PageResult
from streams.blobs import BlobStore
from streams.client.results import resolved
from streams.client.submit import Submitter
from streams.local.up import Child, results_from_now, running_pipeline, wait_for_results
from streams.settings import Settings

# Models load and groups join before any clock starts: the warm-up waits this long at most.
_WARM_UP_TIMEOUT_S = 900.0
# Per page on this 2-core machine, EasyOCR plus the orientation fallback on a dense page
# takes tens of seconds; a reader's pages queue behind each other.
_PAGE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Reader:
    """A reader configuration: the options every page of its run is submitted with."""

    name: str
    options: Options
    description: str


_BEFORE = {"layout": Layout.fast, "ocr_engine": OcrEngineName.easyocr, "target_px": None}

READERS: dict[str, Reader] = {
    "layout": Reader(
        "layout",
        Options(backend=Backend.ocr),
        "the defaults: the text layer laid out by PyMuPDF's layout model where usable, "
        "RapidOCR (lines laid out by the same model) for the other pages",
    ),
    "layout-easyocr": Reader(
        "layout-easyocr",
        Options(backend=Backend.ocr, ocr_engine=OcrEngineName.easyocr),
        "as `layout`, with EasyOCR reading the pixels (ocr_engine=easyocr)",
    ),
    "textlayer": Reader(
        "textlayer",
        Options(text_layer=TextLayer.auto, backend=Backend.ocr, **_BEFORE),
        "the previous release's defaults: the text layer where usable (classic converter, "
        "layout=fast), EasyOCR line by line at 150 dpi for the other pages",
    ),
    "easyocr": Reader(
        "easyocr",
        Options(text_layer=TextLayer.never, backend=Backend.ocr, **_BEFORE),
        "EasyOCR line by line on every page's pixels at 150 dpi (text_layer=never, as before)",
    ),
    "vlm": Reader(
        "vlm",
        Options(text_layer=TextLayer.never, backend=Backend.vlm),
        "the VLM preset given by --vlm-model and --preset on every page (backend=vlm)",
    ),
}


@dataclass
class PageRun:
    """What one reader made of one page."""

    markdown: str | None = None  # None: the page has no result
    source: str | None = None  # rapidocr, easyocr, text_layer or vlm
    error: str | None = None
    status: str | None = None
    rotation: int | None = None  # clockwise correction the orient stage applied
    orientation_method: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class ReaderRun:
    reader: str
    pages: dict[str, PageRun]
    seconds: float  # first submission to last result

    @property
    def pages_per_s(self) -> float:
        return len(self.pages) / self.seconds if self.seconds > 0 else float("nan")


def environment(scratch: Path, vlm_model: Path | None, preset: str) -> dict[str, str]:
    """The pipeline's settings: a broker of its own on free ports, data in `scratch`."""
    env = pipeline_environment(scratch, "quality")
    if vlm_model is not None:
        # The in-process vLLM engine on the given checkpoint; its other knobs (dtype, KV
        # cache size on CPU) come from the caller's PAGESTREAM_EXTRACTION__VLLM__* variables.
        env |= {
            "PAGESTREAM_EXTRACTION__VLM_ENGINE": "vllm",
            "PAGESTREAM_EXTRACTION__VLLM__MODEL": str(vlm_model),
            "PAGESTREAM_EXTRACTION__DOC_OCR__PRESET": preset,
        }
    return env


def page_markdown(page: PageResult, blobs: BlobStore) -> tuple[OcrResult | None, str | None]:
    """The page's OCR result (fetched when it travelled by reference) and its Markdown."""
    ocr = page.ocr
    if ocr is None and page.ocr_ref is not None:
        raw = blobs.get(page.ocr_ref.uri, expected_sha256=page.ocr_ref.sha256)
        ocr = OcrResult.model_validate_json(raw)
    if ocr is None:
        return None, None
    return ocr, ocr.markdown or ocr.text


def _page_run(result: DocumentResult, blobs: BlobStore) -> PageRun:
    result = resolved(result, blobs)
    run = PageRun(status=result.status, error="; ".join(result.errors) or None)
    if not result.pages:
        return run
    page = result.pages[0]  # every submission is one page
    ocr, run.markdown = page_markdown(page, blobs)
    if ocr is not None:
        run.source, run.warnings = ocr.source, list(ocr.warnings)
    run.error = page.error or run.error
    if page.orientation is not None:
        run.rotation = page.orientation.rotation_degrees
        run.orientation_method = page.orientation.method
    return run


class Pipeline:
    """A running pipeline with a submitter, a results reader and the blob store."""

    def __init__(self, settings: Settings, children: list[Child],
                 poll: Callable[[float], list[DocumentResult]]) -> None:  # fmt: skip
        self.settings = settings
        self.children = children
        self.poll = poll
        self.submitter = Submitter(settings)
        self.blobs = BlobStore.from_settings(settings.blobs)
        self.tag = uuid.uuid4().hex[:8]

    def _wait(self, doc_ids: set[str], timeout_s: float) -> dict[str, tuple[DocumentResult, float]]:
        arrived: dict[str, float] = {}

        def at(result: DocumentResult) -> None:
            arrived.setdefault(result.doc_id, time.monotonic())

        results = wait_for_results(self.poll, doc_ids, self.children, timeout_s=timeout_s,
                                   stop=lambda: False, on_result=at)  # fmt: skip
        return {d: (r, arrived[d]) for d, r in results.items()}

    def warm_up(self, docs: list[bytes], reader: Reader) -> None:
        """Pages read until their results arrive (models loaded, groups joined, first
        calls made), outside every measurement."""
        ids = {self._submit(data, reader, f"warm{k}") for k, data in enumerate(docs)}
        self.submitter.flush()
        self._wait(ids, _WARM_UP_TIMEOUT_S)

    def _submit(self, data: bytes, reader: Reader, page_id: str) -> str:
        doc_id = f"quality-{self.tag}-{reader.name}-{page_id}"
        self.submitter.submit_bytes(data, operation=Operation.ocr, options=reader.options,
                                    doc_id=doc_id)  # fmt: skip
        return doc_id

    def read_all(self, pages: dict[str, bytes], reader: Reader) -> ReaderRun:
        """Every page submitted at once with the reader's options; pages/s is taken from
        the first submission to the last result."""
        started = time.monotonic()
        ids = {self._submit(data, reader, page_id): page_id for page_id, data in pages.items()}
        self.submitter.flush()
        got = self._wait(set(ids), 300.0 + _PAGE_TIMEOUT_S * len(pages))
        last = max(t for _, t in got.values())
        runs = {ids[d]: _page_run(result, self.blobs) for d, (result, _) in got.items()}
        return ReaderRun(reader.name, runs, last - started)

    def close(self) -> None:
        self.submitter.flush()
        # Gone while the broker is up: a producer left to the garbage collector would log
        # failed reconnects after the broker stops.
        del self.submitter


@contextmanager
def pipeline(scratch: Path, vlm_model: Path | None, preset: str) -> Iterator[Pipeline]:
    """The pipeline, started with its settings in this process's environment (the
    children inherit them), stopped on exit."""
    os.environ.update(environment(scratch, vlm_model, preset))
    settings = Settings()
    with (
        running_pipeline(settings, scratch / "logs") as children,
        results_from_now(settings) as poll,
    ):
        run = Pipeline(settings, children, poll)
        try:
            yield run
        finally:
            run.close()
