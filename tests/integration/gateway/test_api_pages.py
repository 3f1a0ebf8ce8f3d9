"""A scanned page through the whole pipeline from an HTTP upload: the gateway answers its
Markdown and the page image the OCR boxes belong to (real agents, real GPU node on CPU)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from streams.settings import Settings
from synth.dataset import generate
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.gateway import Api, multipart, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_scanned_page_s_image_and_markdown_come_back_over_http(
    api: Api, cli_env: Settings, node_factory, tmp_path: Path
) -> None:
    key = new_key(tmp_path / "api", "acme")
    page = next(iter(generate(21, 1, rotations=[0], width=480))).image
    png = io.BytesIO()
    page.save(png, format="PNG")
    fields = {"operation": "ocr", "auto_rotate": "false"}
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        with api.client(key, timeout_s=300) as client, node_factory(max_batch=2):
            ids = []
            for data, name in (
                (png.getvalue(), "scan.png"),
                (text_pdf(report_pages(9, 1)), "r.pdf"),
            ):
                body, content_type = multipart(fields, data, filename=name)
                sent = client.post("/v1/documents", content=body,
                                   headers={"Content-Type": content_type})  # fmt: skip
                assert sent.status_code == 202, sent.text
                ids.append(sent.json()["doc_id"])
            ended = [client.get(f"/v1/documents/{d}", params={"wait": 240}).json() for d in ids]
            assert [e["state"] for e in ended] == ["ended", "ended"], (ended, worker.tail())
            scan, report = ended
            assert scan["result"]["status"] == "completed", scan
            image = client.get(f"/v1/documents/{scan['doc_id']}/pages/1/image")
            markdown = client.get(f"/v1/documents/{scan['doc_id']}/markdown").text
            no_image = client.get(f"/v1/documents/{report['doc_id']}/pages/1/image")
            no_page = client.get(f"/v1/documents/{scan['doc_id']}/pages/2/image")
    finally:
        worker.stop()
    ref = scan["result"]["pages"][0]["image"]
    assert image.status_code == 200 and image.headers["content-type"] == ref["media_type"]
    assert Image.open(io.BytesIO(image.content)).size == (ref["width"], ref["height"])
    assert markdown.strip() and "<!-- page 1 -->" in markdown
    assert no_image.status_code == 404 and "text layer" in no_image.json()["detail"]
    assert no_page.status_code == 404
