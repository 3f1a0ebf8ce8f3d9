"""Field extraction engines: OCR rules, hybrid VLM + OCR cross-check (VLM engines plug in).

Every engine takes `ExtractionInput`s and returns one `ExtractionResult` each; an
engine that cannot serve raises `EngineUnavailable` (the node keeps the work), and
the VLM engines run their batches through `gather_batch`. `engines.py` (which engine
serves a record's backend) and the VLM engines (`vllm_engine.py`, `openai_engine.py`)
are imported from their modules: they also read pages for gpu_node.dococr, which
builds on this package, and `vllm_engine` must import without vLLM.
"""

# Nothing is re-exported: importing one module of the package must not load the others'
# models. Import from the modules themselves.
