"""The headless Chromium the site's tests drive: found on PATH, skipped only when the user asked
(``OMNIBENCH_SKIP_BROWSER=1``, the name noxfile.py reads too), and given the hung-test bound for
every wait, since Playwright's 30 s defaults are a time budget a loaded 2-core host can spend on a
start or a render (a page that never loads still fails)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from proc_helpers import HUNG_S

SKIP_BROWSER = "OMNIBENCH_SKIP_BROWSER"


def chromium() -> str:
    """The chromium on PATH; a skip when the user asked for none; a failure that says how to get it
    otherwise (a browser test never passes without a browser)."""
    if os.environ.get(SKIP_BROWSER) == "1":
        pytest.skip(f"{SKIP_BROWSER}=1: the browser tests were asked to be skipped")
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is not installed: `python3 -m nox -s tests` installs it (as root), or "
                    f"apt-get install -y chromium; or skip the browser tests with {SKIP_BROWSER}=1")
    return found


@contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium (Playwright's Browser), closed on the way out."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: the tests run as root (CI too), where Chromium's sandbox refuses to start
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"],
                                     timeout=HUNG_S * 1000)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, errors: list[str]) -> Any:
    """A page whose waits have the hung-test bound and whose console errors and uncaught
    exceptions go to ``errors``."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_default_timeout(HUNG_S * 1000)
    page.set_default_navigation_timeout(HUNG_S * 1000)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page
