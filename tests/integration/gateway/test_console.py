"""The web console (gateway/console/) in a real headless chromium, against a real
`pagestream api` process, the real broker and a real `pagestream agents` worker. The
documents are born-digital PDFs read from their text layer, so they end without the GPU
node. Every wait is on a condition in the page, never on the clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.browser import chromium
from tests.support.gateway import Api, new_key

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TIMEOUT_S = 180  # generous: only a condition that never comes true waits this long
T = TypeVar("T")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium(tmp_path / "chromedriver.log")
    try:
        yield driver
    finally:
        driver.quit()


def _wait(
    driver: WebDriver, condition: Callable[[WebDriver], T], what: str, *logs: support.Worker
) -> T:
    """`condition` once it is truthy; on timeout, fails with the page's message area and
    the processes' logs."""
    try:
        return WebDriverWait(
            driver, TIMEOUT_S, ignored_exceptions=(StaleElementReferenceException,)
        ).until(condition)
    except TimeoutException:
        message = driver.find_element(By.ID, "message").text
        tails = "\n".join(proc.tail() for proc in logs)
        raise AssertionError(f"{what}: not in {TIMEOUT_S} s; {message!r}\n{tails}") from None


def _text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def _open_with_key(driver: WebDriver, api: Api, key: str, tenant: str) -> None:
    driver.get(f"{api.url}/")  # redirected to /console/
    _wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"), "JS")
    assert driver.current_url == f"{api.url}/console/"
    _use_key(driver, key, tenant)


def _use_key(driver: WebDriver, key: str, tenant: str) -> None:
    field = driver.find_element(By.ID, "api-key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.ID, "key-use").click()
    _wait(driver, lambda d: f"Tenant {tenant} " in _text(d, "whoami"), f"signed in as {tenant}")


def _letters(driver: WebDriver) -> list[str]:
    rows = driver.find_elements(By.CSS_SELECTOR, '#dead-letters [data-testid="dead-letter"]')
    return sorted(str(r.get_attribute("data-doc-id")) for r in rows)


def test_a_user_uploads_a_pdf_and_sees_it_complete_with_its_markdown(
    api: Api, browser: WebDriver, api_dir: Path, tmp_path: Path
) -> None:
    pdf = tmp_path / "report.pdf"
    specs = report_pages(5, 2)
    pdf.write_bytes(text_pdf(specs))
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        _open_with_key(browser, api, new_key(api_dir, "acme"), "acme")
        assert not browser.find_element(By.ID, "operator-view").is_displayed()
        operation = Select(browser.find_element(By.ID, "upload-operation"))
        assert operation.first_selected_option.text == "ocr"  # the default
        browser.find_element(By.ID, "upload-file").send_keys(str(pdf))
        browser.find_element(By.ID, "upload-submit").click()

        _wait(browser, lambda d: _text(d, "doc-status") == "completed", "completed", worker, api)
        assert _text(browser, "doc-state") == "ended"
        assert _text(browser, "doc-pages") == "2 / 2"
        markdown = browser.find_element(By.ID, "doc-markdown")
        _wait(browser, lambda _: "Section 1" in markdown.text, "the Markdown")
        assert markdown.find_elements(By.CSS_SELECTOR, "h1, h2, h3, table")
        assert "Section 2" in markdown.text and "Action item 1" in markdown.text
        assert not markdown.find_elements(By.TAG_NAME, "script")
        # The chunk view: a chunk a section, each under its heading, its text as text.
        chunks = _wait(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, '#doc-chunks [data-testid="chunk"]'),
            "the chunks",
        )
        assert [c.find_element(By.CLASS_NAME, "chunk-headings").text for c in chunks] == [
            spec.heading for spec in specs
        ]
        metas = [c.find_element(By.CLASS_NAME, "chunk-meta").text for c in chunks]
        assert [m.split(" · ")[0] for m in metas] == ["page 1", "page 2"]
        assert all(m.endswith("of 512 words") for m in metas)
        texts = [c.find_element(By.CLASS_NAME, "chunk-text") for c in chunks]
        assert all(spec.lines[0] in t.text for t, spec in zip(texts, specs, strict=True))
        assert not any(t.find_elements(By.XPATH, "./*") for t in texts)  # no markup made
        # Text-layer pages have no page image: nothing to draw boxes on.
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="page-canvas"]')

        doc_id = _text(browser, "doc-id")
        listed = _wait(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, f'#documents [data-doc-id="{doc_id}"]'),
            "the document in the list",
        )
        assert "completed" in listed[0].text and "2 / 2" in listed[0].text
    finally:
        worker.stop()


def test_an_admin_replays_a_selected_dead_letter_and_a_user_has_no_operator_view(
    api: Api,
    browser: WebDriver,
    cli_env: Settings,
    topology: Topology,
    api_dir: Path,
    tmp_path: Path,
) -> None:
    # The letters are of no tenant (`pagestream submit`'s): an operator's to see.
    admin, user = new_key(api_dir, "ops", operator=True), new_key(api_dir, "acme")
    submitter = Submitter(cli_env)
    for doc_id in ("bad-1", "bad-2"):
        submitter.submit_bytes(b"not a document", doc_id=doc_id)
    submitter.flush()
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        _open_with_key(browser, api, admin, "ops")
        assert browser.find_element(By.ID, "operator-view").is_displayed()

        def both_dead(driver: WebDriver) -> bool:  # asked again at once, not every 10 s
            driver.find_element(By.ID, "operator-refresh").click()
            return _letters(driver) == ["bad-1", "bad-2"]

        _wait(browser, both_dead, "both dead letters", worker, api)
        lag = browser.find_element(By.ID, "lag")
        _wait(browser, lambda _: topology.agents_app in lag.text, "the agents' lag", api)
    finally:  # so a replayed letter is not taken (and dead-lettered) again
        worker.stop()
    replay = browser.find_element(By.ID, "replay-selected")
    assert not replay.is_enabled()

    def tick_bad_1(driver: WebDriver) -> bool:  # the table may be redrawn meanwhile
        box = driver.find_element(
            By.CSS_SELECTOR, '[data-testid="dead-letter"][data-doc-id="bad-1"] input'
        )
        if not box.is_selected():
            box.click()
        return bool(box.is_selected())

    _wait(browser, tick_bad_1, "bad-1 ticked")
    replay.click()
    _wait(browser, lambda d: _letters(d) == ["bad-2"], "bad-1 out of the list", api)
    assert "Replayed 1" in _text(browser, "message")

    browser.find_element(By.ID, "key-forget").click()
    _use_key(browser, user, "acme")
    assert browser.find_element(By.ID, "upload-view").is_displayed()
    assert not browser.find_element(By.ID, "operator-view").is_displayed()
