"""bench.gateway's arithmetic: percentiles, the gateway's CPU seconds between Locust's
start and stop, Locust's CSV, the figures and their table; bench/locustfile.py's upload
is a multipart body the gateway's parser takes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from python_multipart.multipart import MultipartParser

from bench.gateway.figures import (
    TARGET_ADDED_P50_MS,
    Latency,
    Report,
    cpu_between,
    markdown,
)
from bench.gateway.locust import LocustRow, locust_rows, locustfile
from bench.stats import percentile


def test_percentile_interpolates_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))


def test_cpu_between_interpolates_the_samples_around_each_end() -> None:
    samples = [(10.0, 1.0), (11.0, 1.5), (12.0, 2.5), (13.0, 2.5)]
    assert cpu_between(samples, 10.5, 12.0) == pytest.approx(2.5 - 1.25)
    assert cpu_between(samples, 9.0, 14.0) == pytest.approx(1.5)  # clamped to the samples


def test_locust_rows_reads_the_stats_csv(tmp_path: Path) -> None:
    stats = tmp_path / "locust_stats.csv"
    stats.write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
        "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
        "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%\n"
        "POST,/v1/documents,120,1,30,35.2,10,300,80,2.0,0.0,30,35,40,45,60,80,100,150,"
        "300,300,300\n"
        ",Aggregated,600,1,5,9.1,1,300,200,10.0,0.0,5,8,10,12,20,30,60,100,300,300,300\n"
    )
    post, total = locust_rows(stats)
    assert post == LocustRow("POST", "/v1/documents", 120, 1, 30.0, 150.0, 2.0)
    assert (total.name, total.requests) == ("Aggregated", 600)


def _report(post_p50: float, produce_p50: float) -> Report:
    report = Report(20, 60, {"when": "2026-11-26 07:00 UTC", "cpus": 2})
    report.load = {"wall_s": 60.0, "requests": 6000, "submissions": 1200, "failures": 0,
                   "gateway_cpu_s": 30.0, "locust_cpu_s": 12.0, "agents_cpu_s": 20.0,
                   "machine_busy": 0.9}  # fmt: skip
    report.idle = {
        "POST /v1/documents": Latency(200, post_p50, 2 * post_p50, post_p50),
        "produce + flush": Latency(200, produce_p50, produce_p50, produce_p50),
    }
    report.under_load = dict(report.idle)
    return report


def test_figures_are_per_gateway_cpu_second_and_against_the_direct_produce() -> None:
    figures = _report(post_p50=12.0, produce_p50=4.0).figures()
    assert figures["requests_per_s"] == 100.0
    assert figures["requests_per_gateway_cpu_s"] == 200.0
    assert figures["submissions_per_gateway_cpu_s"] == 40.0
    assert figures["gateway_cores"] == 0.5
    assert figures["added_p50_ms_load"] == pytest.approx(8.0)
    assert figures["ratio_p50_load"] == pytest.approx(3.0)
    assert figures["target_met_load"] is True
    over = _report(post_p50=4.0 + TARGET_ADDED_P50_MS + 0.1, produce_p50=4.0)
    assert over.figures()["target_met_load"] is False


def test_the_table_says_whether_the_target_is_met() -> None:
    assert "<= 10: met" in markdown(_report(post_p50=12.0, produce_p50=4.0))
    assert "<= 10: **not met**" in markdown(_report(post_p50=40.0, produce_p50=4.0))


def test_the_upload_is_one_pdf_and_the_form_fields() -> None:
    parts: dict[str, bytearray] = {}
    current: list[str] = []
    header = bytearray()

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.extend(data[start:end])

    def on_headers_finished() -> None:
        name = bytes(header).split(b'name="')[1].split(b'"')[0].decode()
        current.append(name)
        parts[name] = bytearray()
        header.clear()

    def on_part_data(data: bytes, start: int, end: int) -> None:
        parts[current[-1]].extend(data[start:end])

    parser = MultipartParser(locustfile.BOUNDARY, {
        "on_header_value": on_header_value,
        "on_headers_finished": on_headers_finished,
        "on_part_data": on_part_data,
    })  # fmt: skip
    parser.write(locustfile.BODY)
    parser.finalize()
    assert parts.pop("file").startswith(b"%PDF-")
    assert {k: v.decode() for k, v in parts.items()} == locustfile.FIELDS
