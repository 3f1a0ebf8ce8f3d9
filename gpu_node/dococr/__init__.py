"""Document OCR by a VLM: presets and reply parsing.

Operation `ocr` with a VLM backend: each page to Markdown. `transcribe` asks an
engine (anything with `complete_page`, see `PageCompleter`) for every page of a
batch with the preset's prompt, image size and sampling (`PRESETS`), and
`parse_reply` turns what the model wrote into an `OcrResult`.
"""

# Nothing is re-exported: importing one module of the package must not load the others'
# models. Import from the modules themselves.
