"""Reading quality: how well each reader turns public documents into Markdown, scored with
the kinds of checks the field uses, through the real pipeline, with its speed beside it.

    python -m bench.quality                                  # today's reader and the earlier ones
    python -m bench.quality --readers layout --pages 6       # a quick trial on 6 pages
    python -m bench.quality --vlm-model DIR --preset olmocr  # adds the VLM preset (a GPU)

The corpus is bench/quality/data/: pages (PDFs and images) of born-digital papers, financial
and other tables, forms, scanned book and magazine pages, handwritten notes and scans
turned by 90, 180 and 270 degrees, each with its source and licence in SOURCES.md;
pages.jsonl says what each page is, checks.jsonl holds the checks (olmOCR-bench's sample
checks converted, the rest written from each page's own text or ground truth; kinds in
checks.py), truth/ the ground-truth texts for character error.

One pipeline runs for the whole benchmark, as `pagestream up` runs it (run.py:
its own embedded broker, `pagestream gpu-node` on CPU with its real models, one
`pagestream agents` worker; the node's micro-batches capped at 4 pages, see
run.py). After a warm-up page per reader, every page is submitted at
once with operation `ocr` and the reader's options, and each page's Markdown is read back
from docs.results the way `pagestream results` does (claim-checked parts fetched from the
blob store). Readers (`--readers`, run.py): `layout` (the defaults: the
text layer laid out by PyMuPDF's layout model, RapidOCR for the other pages),
`layout-easyocr` (the same with EasyOCR), `textlayer` and `easyocr` (the previous
release's defaults: classic converter, EasyOCR line by line at 150 dpi; text_layer=auto and
never), `vlm` (backend=vlm with
the in-process vLLM engine on `--vlm-model` and the preset `--preset`; on a CPU-only machine
give it the engine's CPU knobs through PAGESTREAM_EXTRACTION__VLLM__* variables).

Reported under --out: quality.md (per reader: checks passed overall and per kind, median
and worst character error on born-digital and on scanned pages, pages/s from the first
submission to the last result, and how the orient stage did), quality.json (every check's
outcome per reader and page, with the reason of each miss) and markdown/<reader>/<page>.md
(what each reader wrote). Figures are measured in one run on the machine at hand.

Modules: corpus.py reads the corpus (data/) and picks a short trial's pages; run.py is
the pipeline side (the readers, every page submitted, each Markdown read back);
checks.py scores a reader's Markdown against one check (tables.py reads the tables in
it); report.py scores each reader and writes the reports; __main__.py is the command.
"""
