"""How a page becomes Markdown: text layers, the layout model, and the one reading policy.

PyMuPDF and onnxruntime only: no Kafka, no torch (tests/unit/test_layering.py holds
it), so the CPU agents (ingest's render processes) and the GPU node (OCR pages) read
with the same code.

- `policy`: how a page is read, decided once: which pages are answered from their text
  layer, which pixel reader reads the others, the layout budget, the model, its
  fallbacks and the share of a page's characters its Markdown must keep;
- `text_layer`: a PDF's own text, page by page, with boxes in page pixels (the fast
  path of operation `ocr`); importing it switches PyMuPDF's layout model off for the
  process, so it is imported by name, not from here;
- `layout`: PyMuPDF's layout model over a text layer (`layout_markdown`) or over the
  lines an OCR engine read (`markdown_from_lines`): tables, headings, reading order,
  running heads dropped; helped by `furniture` (an OCR'd page's running head or foot
  found by its place and its folio), `columns` (OCR lines split at narrow gutters),
  `tables` (the table finder's HTML tables repaired) and `styled_words` (words cut
  at a change of style joined);
- `mupdf`: what reading and rasterizing share of PyMuPDF (page sizes at a resolution,
  MuPDF's failed allocations as MemoryError).

Untrusted bytes are not opened here: streams/media turns uploads into page images and
opens PDFs under the limits (`streams.media.pdf.read_text_layer`).
"""
