"""The demo in a real browser: headless Debian chromium driven by Selenium.

Runs the video example and the text tab through the page and checks that their outputs appear.
SPECVIDEO_APP_SCREENSHOT=docs/app.png also saves the video tab there (the README screenshot), and
SPECVIDEO_APP_URL=http://127.0.0.1:7860/ drives an app already running (e.g. ``python app.py`` on
the shipped models) instead of the tiny-model one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
TIMEOUT_S = 240

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    yield driver
    driver.quit()


def wait(driver, condition, message: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, TIMEOUT_S).until(condition, message)


def by_css(selector: str):
    from selenium.webdriver.common.by import By

    return lambda driver: driver.find_elements(By.CSS_SELECTOR, selector)


def click(driver, selector: str) -> None:
    button = wait(driver, by_css(selector), f"no {selector} on the page")[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].click();", button)


def open_tab(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    tab = driver.find_element(By.XPATH, f"//button[@role='tab' and normalize-space()='{name}']")
    driver.execute_script("arguments[0].click();", tab)


def screenshot(driver, path: Path) -> Path:
    """The whole page, not only the window."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    metrics = {"width": 1400, "height": int(size["height"]), "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return path


@pytest.fixture(scope="module")
def page_url(request) -> str:
    return os.environ.get("SPECVIDEO_APP_URL") or request.getfixturevalue("server")


def test_video_example_and_text_tab_in_a_browser(page_url, browser, tmp_path):
    browser.get(page_url)
    click(browser, "#video-generate")
    wait(browser, by_css("#video-generated video[src]"), "the generated video did not appear")
    wait(browser, by_css("#video-timeline img, #video-timeline canvas"), "the timeline plot did not appear")
    video_shot = screenshot(browser, tmp_path / "video-tab.png")

    open_tab(browser, "Text")
    click(browser, "#text-generate")
    wait(browser, lambda d: "tokens generated" in by_css("#text-stats")(d)[0].text, "no text statistics")
    streaming = by_css("#text-output .generating, #text-output .progress-text")
    wait(browser, lambda d: not streaming(d), "the text output did not finish streaming")
    assert "quicksort" in by_css("#text-output")(browser)[0].text
    assert screenshot(browser, tmp_path / "text-tab.png").stat().st_size > 10_000

    assert video_shot.stat().st_size > 10_000
    if target := os.environ.get("SPECVIDEO_APP_SCREENSHOT"):
        shutil.copyfile(video_shot, target)
