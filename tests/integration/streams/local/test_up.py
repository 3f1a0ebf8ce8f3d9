"""`pagestream up`, the README's main command: the whole pipeline as a user starts it
(GPU node and agent worker as child processes), sample documents of every operation
through it, a short block per DocumentResult and the lag printed, and a clean stop on
Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.processes import free_port
from streams.settings import Settings
from streams.topics import Topology
from synth.pdf import report_pages, text_pdf
from tests.support.up import EXPECTED, sample_statuses

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_runs_every_operation_prints_results_and_lag_then_stops_on_ctrl_c(
    cli_env: Settings, topology: Topology, tmp_path: Path
):
    env = dict(
        os.environ,
        PAGESTREAM_AGENTS__WEB_PORT=str(free_port()),
        PAGESTREAM_NODE__HTTP_PORT=str(free_port()),
        PAGESTREAM_NODE__MAX_WAIT_MS="50",
        PAGESTREAM_API__PORT=str(free_port()),
        COLUMNS="200",
    )
    out_path = tmp_path / "up.out"
    with out_path.open("wb") as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streams", "up", "--timeout", "600"],
            env=env,
            stdout=out_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 700
        while "Ctrl-C stops it" not in out_path.read_text():
            assert proc.poll() is None, out_path.read_text()[-5000:]
            assert time.monotonic() < deadline, out_path.read_text()[-5000:]
            time.sleep(0.5)
        printed = out_path.read_text()
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", printed)]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        _upload_over_http(printed)
        _a_key_made_as_the_readme_says_opens_the_gateway(printed, env)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0, out_path.read_text()[-5000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    printed = out_path.read_text()
    assert "stopped cleanly" in printed
    assert not any(_alive(p) for p in pids), "child processes outlived `pagestream up`"

    assert sample_statuses(printed) == EXPECTED, printed[-5000:]
    # A short block per result (every OCR box was once a line of its own), the lag, and
    # nothing after the last line: no client logging once the pipeline stopped.
    lines = printed.splitlines()
    assert len(lines) < 100, printed
    assert lines[-1] == "stopped cleanly", printed[-3000:]
    results = _printed_results(printed)
    assert "type      cnh_front" in results["classify-cnh"]
    extract = results["extract-rg-back"]
    assert "type      rg_back" in extract and "\n  fields    " in extract, extract
    assert "type      cin_front" in results["process-cin"]
    assert "\n  image     rotated " in results["process-cin-rotated"]
    assert re.search(r"\n  pages     2, read by \w+ \(pages 1-2\)", results["ocr-pdf-2-pages"])
    # The born-digital report is answered from its text layer, as Markdown.
    report = results["ocr-born-digital-report"]
    assert "\n  pages     2, read by text_layer (pages 1-2)\n" in report, report
    assert "\n  markdown  <!-- page 1 -->\n            # Section 1" in report, report
    # The layout reader: the table as a table, the running head set aside as a comment.
    table = results["ocr-table-and-header"]
    assert "<!-- page-header: Journal of Streaming Documents, Vol. 7 -->" in table, table
    assert "\n            |North|1,204|12%|\n" in table, table
    # The lag of every group (the agents', route's, the GPU node's).
    # Everything consumed, and all read 0: the commit markers the GPU node's
    # transactions leave after the agents' last committed offset are not lag.
    # All behind the test's prefix, as every group of a pipeline is.
    topo = cli_env.topology
    for group in (*topo.agents_groups, cli_env.gpu_group):
        pattern = rf"group {re.escape(group)} \(\w+\), total lag 0 records"
        assert re.search(pattern, printed), printed[-3000:]


def _upload_over_http(printed: str) -> None:
    """The gateway `up` printed takes a document with the key it printed, as its curl
    line shows, and answers its result."""
    url = re.search(r"^HTTP gateway: (http://\S+) ", printed, flags=re.MULTILINE)
    key = re.search(
        r"^API key of the local tenant 'local': (psk_\S+)$", printed, flags=re.MULTILINE
    )
    assert url and key, printed[-3000:]
    auth = {"Authorization": f"Bearer {key.group(1)}"}
    with httpx.Client(base_url=url.group(1), headers=auth, timeout=120) as client:
        sent = client.post(
            "/v1/documents",
            data={"operation": "ocr"},
            files={"file": ("report.pdf", text_pdf(report_pages(11, 1)))},
        )
        assert sent.status_code == 202, sent.text
        status = client.get(sent.headers["Location"], params={"wait": 100}).json()
    assert status["result"]["status"] == "completed", status
    assert status["result"]["tenant"] == "local"


def _a_key_made_as_the_readme_says_opens_the_gateway(printed: str, env: dict[str, str]) -> None:
    """The README's other way to a key, `pagestream api-keys create --tenant local`, run
    beside `up` (the same settings): its key opens `up`'s gateway (issue 34: it wrote to
    another file than the one the gateway read, and its key answered 401)."""
    made = subprocess.run(
        [sys.executable, "-m", "streams", "api-keys", "create", "--tenant", "local"],
        env=env, capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    key = made.stdout.decode().strip()
    url = re.search(r"^HTTP gateway: (http://\S+) ", printed, flags=re.MULTILINE)
    keys_file = re.search(r"^its keys file: (\S+) ", printed, flags=re.MULTILINE)
    assert url and keys_file, printed[-3000:]
    assert key.split("_")[1] in Path(keys_file.group(1)).read_text()  # the file up printed
    with httpx.Client(base_url=url.group(1), timeout=30) as client:
        me = client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
    assert me.status_code == 200, me.text
    assert me.json()["tenant"] == "local"


def _printed_results(printed: str) -> dict[str, str]:
    """The block printed for each sample: its heading line and the indented lines under it."""
    found = {}
    parts = re.split(r"^sample-\d+-([\w-]+): \w+ -> \w+$", printed, flags=re.MULTILINE)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        block = re.match(r"(\n  .*)*", body)
        assert block is not None
        found[name] = block.group(0) + "\n"
    return found
