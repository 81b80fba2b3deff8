"""The web page in a REAL headless Chromium (Debian's chromium + chromium-driver, driven by selenium) against a
real uvicorn server: type a question, click Ask, wait for the candidate tables and the answer (or refusal).
Screenshots go to test-artifacts/ (gitignored)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgmr.service import create_app
from test_pipeline import ATLANTIS, PARIS, Parts, build_parts
from test_service import running_server

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="NO CHROMIUM: the web page test did NOT run. Install Debian's browser and driver with "
    "`apt-get install -y chromium chromium-driver` (`make setup` does this).",
)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, encoder: object) -> Iterator[str]:
    parts: Parts = build_parts(tmp_path_factory, encoder)
    with running_server(create_app(parts.config())) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1500",
    ):
        options.add_argument(arg)
    # Explicit driver path: selenium must not try to download a driver (there is no internet).
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _ask(driver, base_url: str, question: str, status: str):  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base_url + "/")
    WebDriverWait(driver, 30).until(ec.text_to_be_present_in_element((By.ID, "health"), "memory:"))
    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    driver.find_element(By.ID, "ask").click()
    WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text.lower() == status)
    return By


def test_question_to_answer_with_candidate_tables(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    by = _ask(browser, base_url, PARIS, "answered")
    tables = browser.find_elements(by.CSS_SELECTOR, "table.candidate-table")
    assert [t.get_attribute("data-placeholder") for t in tables] == ["entity0", "relation0"]
    chosen = tables[0].find_element(by.CSS_SELECTOR, "tr.chosen")
    assert "Q90" in chosen.text and "capital city of France" in chosen.text
    rows = tables[0].find_elements(by.CSS_SELECTOR, "tbody tr")
    assert "Q167646" in rows[0].text and "chosen" not in (rows[0].get_attribute("class") or "")
    marks = browser.find_elements(by.CSS_SELECTOR, "#intermediate mark.ph")
    assert {m.text for m in marks} == {"entity0", "relation0"}
    assert "wd:Q90" in browser.find_element(by.ID, "sparql").text
    answers = [li.text for li in browser.find_elements(by.CSS_SELECTOR, "#answers li")]
    assert len(answers) == 1 and "France" in answers[0] and "Q142" in answers[0]
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "webpage.png"))
    assert (ARTIFACTS / "webpage.png").stat().st_size > 10_000


def test_refusal_is_shown_with_its_reason(browser, base_url: str) -> None:  # type: ignore[no-untyped-def]
    by = _ask(browser, base_url, ATLANTIS, "refused")
    message = browser.find_element(by.ID, "message").text
    assert "entity0 'Atlantis'" in message and "threshold" in message
    tables = browser.find_elements(by.CSS_SELECTOR, "table.candidate-table")
    assert tables and not tables[0].find_elements(by.CSS_SELECTOR, "tr.chosen")
    assert not browser.find_element(by.ID, "answers-section").is_displayed()
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "webpage-refusal.png"))
