"""A headless chromium driven by selenium, for the web console's tests: Debian's
`chromium` and `chromium-driver` packages (`make ops-tools` installs them)."""

from __future__ import annotations

from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def chromium(log_file: Path) -> webdriver.Chrome:
    """A fresh headless chromium (no profile kept); chromedriver's log in `log_file`.
    Fails, never skips, when the browser is not installed."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        raise AssertionError(
            f"{' and '.join(missing)} not found: run `make ops-tools` (Debian's chromium "
            "and chromium-driver) for the console's browser tests"
        )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1024",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(log_file))
    return webdriver.Chrome(service=service, options=options)
