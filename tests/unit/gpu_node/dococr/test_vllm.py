"""Operation ocr through the in-process vLLM engine, for real, on the tiny random-weight
checkpoint that writes until max_tokens. The text is noise; what is tested is the
mechanics: one result per page in order, a page cut off at its budget says so, vLLM's
no-repeat n-gram logits processor is applied to the requests that ask for it, and a
page past its deadline keeps what was written."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

import numpy as np
import pytest

from gpu_node.dococr.transcribe import scaled
from gpu_node.extraction.vllm_engine import VllmExtractor
from schemas import DocumentType
from synth.dataset import generate
from tests.support.vlm import WRITER_MAX_TOKENS


@pytest.fixture
def loop(vllm_loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    return vllm_loop


@pytest.fixture
def reader(vllm_writer: VllmExtractor) -> VllmExtractor:
    return vllm_writer


def _pages(n: int, seed: int) -> list[np.ndarray]:
    docs = generate(seed, n, doc_types=[DocumentType.letter], rotations=[0], width=448)
    return [np.asarray(d.image.convert("RGB")) for d in docs]


def _bigram_repeats(ids: tuple[int, ...]) -> int:
    pairs = list(itertools.pairwise(ids))
    return len(pairs) - len(set(pairs))


def test_pages_are_read_one_result_each_in_order_and_cut_offs_say_so(
    reader: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    results = loop.run_until_complete(reader.transcribe(_pages(3, seed=21)))
    assert len(results) == 3
    for result in results:
        assert result.source == "vlm" and result.markdown is not None
        assert "cut off: the page reached its max_tokens before the model finished" in (
            result.warnings
        )


def test_the_no_repeat_ngram_processor_is_applied_per_request(
    reader: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    image = scaled(_pages(1, seed=22)[0], 448)
    ruled = loop.run_until_complete(reader.complete_page(image, reader.ask))
    plain = loop.run_until_complete(
        reader.complete_page(image, replace(reader.ask, no_repeat=None))
    )
    assert len(ruled.token_ids) == len(plain.token_ids) == WRITER_MAX_TOKENS
    # Greedy decoding of random weights repeats itself; the rule forbids any bigram twice.
    assert _bigram_repeats(plain.token_ids) > 0
    assert _bigram_repeats(ruled.token_ids) == 0


def test_a_page_past_its_deadline_keeps_what_was_written(
    reader: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    image = scaled(_pages(1, seed=23)[0], 448)
    hurried = replace(reader.ask, deadline_s=0.05, max_tokens=1500)
    done = loop.run_until_complete(reader.complete_page(image, hurried))
    assert done.finish_reason == "deadline"
    assert len(done.token_ids) < 1500
    # And the engine serves the next page as usual (the request was aborted, not left).
    again = loop.run_until_complete(reader.complete_page(image, reader.ask))
    assert again.finish_reason == "length"
