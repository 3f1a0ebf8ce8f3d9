"""Document OCR by a VLM: presets and reply parsing."""
