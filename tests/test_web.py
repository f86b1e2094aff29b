"""The web page at `/`, in a real headless Chromium against a real server with the shipped
models: it types, translates, swaps, uploads a file and reads the result, and checks the
character count, the alternatives, the copy button, dark mode and the phone layout. Every text
the page shows is compared with what the HTTP API answers to the same request.

The browser is Debian's `chromium` with `chromedriver` (`make browser` installs them; `make test`
does so first). Without them these tests fail: they are part of the suite, not optional.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.service_helpers import serve_in_thread

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "weights"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHAR_LIMIT = 300
WAIT_S = 120  # an upper bound for events on a loaded machine; a passing run waits far less


# ---- the page and its files, without a browser ----


class Links(HTMLParser):
    """Every URL the page refers to (src, href, action) and every inline script or style."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._tag = ""

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        for name, value in attrs:
            if name in ("src", "href", "action", "formaction", "poster") and value:
                self.urls.append(value)
            if name == "style" or name.startswith("on"):
                self.inline.append(f"{tag} {name}")

    def handle_data(self, data):
        if self._tag in ("script", "style") and data.strip():
            self.inline.append(self._tag)


@pytest.fixture(scope="module")
def tiny_server(random_checkpoint, tmp_path_factory):
    weights = tmp_path_factory.mktemp("web-weights")
    shutil.copytree(random_checkpoint, weights / "en-de")
    with serve_in_thread(weights, max_request_chars=1234, max_alternatives=2) as (url, _):
        yield url


def test_page_and_static_files_are_served_with_their_types(tiny_server):
    page = httpx.get(f"{tiny_server}/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page.text
    # the server's own limits are written into the page, with no placeholder left
    assert 'data-char-limit="1234"' in page.text
    assert 'data-max-alternatives="2"' in page.text
    assert "{{" not in page.text
    for path, ctype, marker in [
        ("/static/app.js", "text/javascript; charset=utf-8", 'api("languages")'),
        ("/static/style.css", "text/css; charset=utf-8", "prefers-color-scheme: dark"),
    ]:
        r = httpx.get(f"{tiny_server}{path}")
        assert r.status_code == 200, path
        assert r.headers["content-type"] == ctype
        assert marker in r.text
    missing = httpx.get(f"{tiny_server}/static/../app/main.py")
    assert missing.status_code == 404
    unknown = httpx.get(f"{tiny_server}/static/nothing.js")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "no such path: /static/nothing.js"}


def test_page_refers_to_nothing_outside_the_service(tiny_server):
    page = httpx.get(f"{tiny_server}/").text
    links = Links()
    links.feed(page)
    assert links.urls, "the parser found no links at all"
    for url in links.urls:
        # relative to the page (so the page also works under a proxy's path), or inline data
        assert url.startswith("data:") or re.match(r"^[a-z][a-z0-9/_.-]*$|^#$", url), url
        if not url.startswith(("data:", "#")):
            assert httpx.get(f"{tiny_server}/{url}").status_code == 200, url
    assert links.inline == [], "the Content-Security-Policy forbids inline scripts and styles"
    for path in ("/static/app.js", "/static/style.css"):
        text = httpx.get(f"{tiny_server}{path}").text
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text), path
        assert "@import" not in text and "url(" not in text, path


def test_api_docs_are_served_by_the_service(tiny_server):
    """/docs (Swagger UI) loads its script and style sheet from the service, not from a CDN,
    and refers to nothing outside it (the browser test below renders it)."""
    r = httpx.get(f"{tiny_server}/docs")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    links = Links()
    links.feed(r.text)
    assert "static/docs/swagger-ui-bundle.js" in links.urls, links.urls
    assert "static/docs/swagger-ui.css" in links.urls, links.urls
    for url in links.urls:
        assert re.match(r"^[a-z][a-z0-9/_.-]*$", url), url  # relative to the page
        asset = httpx.get(f"{tiny_server}/{url}")
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", r.text)
    assert "url: 'openapi.json'" in r.text
    assert '"validatorUrl": null' in r.text  # Swagger UI would send the schema elsewhere
    assert httpx.get(f"{tiny_server}/redoc").status_code == 404  # FastAPI's; it needs a CDN
    js = httpx.get(f"{tiny_server}/static/docs/swagger-ui-bundle.js")
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "SwaggerUIBundle" in js.text
    again = httpx.get(
        f"{tiny_server}/static/docs/swagger-ui-bundle.js",
        headers={"If-None-Match": js.headers["etag"]},
    )
    assert again.status_code == 304  # a browser keeps its copy
    missing = httpx.get(f"{tiny_server}/static/docs/nothing.js")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no such path: /static/docs/nothing.js"}


def test_the_package_holds_the_page():
    """An installed package serves the page: the files are package data of `app`."""
    from importlib import resources

    files = resources.files("app").joinpath("webui")
    assert {p.name for p in files.iterdir()} >= {"index.html", "app.js", "style.css"}
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'app = ["webui/*.html", "webui/*.css", "webui/*.js"]' in pyproject


# ---- in the browser ----


def chromium_driver(width: int = 1280, height: int = 900) -> webdriver.Chrome:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        pytest.fail(
            "Chromium and chromedriver are needed for the browser test: `make browser` "
            "(apt-get install chromium chromium-driver) installs them"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in containers and CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--lang=en-US",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    files = tmp_path_factory.mktemp("web-files")
    with serve_in_thread(WEIGHTS, max_request_chars=CHAR_LIMIT, files_dir=files, warmup=False) as (
        url,
        _,
    ):
        yield url


@pytest.fixture
def browser(server):
    driver = chromium_driver()
    try:
        driver.get(f"{server}/")
        yield driver
    finally:
        driver.quit()


def open_without_languages(driver, server: str) -> None:
    """The page opened with its language list failing to load (blocked until the test lets
    it through with `Network.setBlockedURLs` and no URLs), once it has said it retries."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/languages"]})
    driver.get(f"{server}/")
    wait(driver, lambda d: d.find_element(By.ID, "status").text == "Retrying…", "a failed load")


def wait(driver, condition, what: str):
    try:
        return WebDriverWait(driver, WAIT_S).until(lambda d: condition(d))
    except TimeoutException:
        errors = driver.find_elements(By.ID, "error")  # the translation page's error line
        said = f"; the page's error line says {errors[0].text!r}" if errors else ""
        raise AssertionError(f"waited for {what}{said}") from None


def value(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).get_property("value")


def send_notes(driver, folder: Path) -> None:
    """Chooses a notes.txt of "Good morning." (in `folder`) in the file form and sends it."""
    upload = folder / "notes.txt"
    upload.write_text("Good morning.\n", encoding="utf-8")
    driver.find_element(By.ID, "file").send_keys(str(upload))
    driver.find_element(By.ID, "file-submit").click()


def busy_once(driver, error: str, headers: dict[str, str] | None = None) -> None:
    """The page's next POST /translate is answered 503 `{"error": error}` (with `headers`),
    the ones after it by the server."""
    driver.execute_script(
        "const [error, headers] = arguments; const f = window.fetch; let once = true;"
        " window.fetch = (url, options) => String(url) === 'translate' && once"
        " ? (once = false, Promise.resolve(new Response(JSON.stringify({error}),"
        " {status: 503, headers}))) : f(url, options);",
        error,
        headers or {},
    )


def languages_loaded(driver) -> bool:
    return len(Select(driver.find_element(By.ID, "source")).options) > 1


def translated(driver) -> bool:
    done = driver.find_element(By.ID, "translate").get_attribute("aria-disabled") != "true"
    return done and value(driver, "out") != ""


def clipboard(driver) -> str:
    return driver.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], () => arguments[0](''))"
    )


def api_translate(server: str, q: str, source: str, target: str) -> dict:
    body = {"q": q, "source": source, "target": target, "alternatives": 3}
    r = httpx.post(f"{server}/translate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def screenshot(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / name)), name


def test_translate_swap_and_file_in_the_browser(server, browser, tmp_path):
    d = browser
    wait(d, languages_loaded, "the language lists")
    source, target = (
        Select(d.find_element(By.ID, "source")),
        Select(d.find_element(By.ID, "target")),
    )
    assert source.first_selected_option.get_attribute("value") == "auto"
    assert {o.get_attribute("value") for o in source.options} == {"auto", "en", "de"}
    target.select_by_value("de")
    assert d.find_element(By.ID, "count").text == f"0 / {CHAR_LIMIT}"

    # typing alone translates, once the typing stops
    text = "Where is the train station?"
    d.find_element(By.ID, "q").send_keys(text)
    assert d.find_element(By.ID, "count").text == f"{len(text)} / {CHAR_LIMIT}"
    expected = api_translate(server, text, "auto", "de")
    # (a pause within the typing on a busy machine may translate a part first: the page's
    # output is the whole text's once the last pause has passed)
    wait(
        d,
        lambda d: translated(d) and value(d, "out") == expected["translatedText"],
        "the translation of what was typed",
    )
    detected = expected["detectedLanguage"]
    assert detected["language"] == "en"
    assert d.find_element(By.ID, "detected").text == (
        f"Detected: English ({round(detected['confidence'])}%)"
    )
    shown = [b.text for b in d.find_elements(By.CSS_SELECTOR, "#alternatives-list button")]
    assert shown == expected["alternatives"] and len(shown) == 3
    screenshot(d, "web-desktop.png")

    # an alternative clicked and the translation shown change places: neither is lost
    d.find_elements(By.CSS_SELECTOR, "#alternatives-list button")[1].click()
    assert value(d, "out") == expected["alternatives"][1]
    shown = [b.text for b in d.find_elements(By.CSS_SELECTOR, "#alternatives-list button")]
    assert sorted(shown) == sorted(
        [expected["translatedText"], expected["alternatives"][0], expected["alternatives"][2]]
    )

    # copy puts the translation on the clipboard
    d.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    d.find_element(By.ID, "copy").click()
    wait(d, lambda d: clipboard(d) == expected["alternatives"][1], "the copied translation")

    # swap: German -> English, the translation becomes the text to translate
    german = value(d, "out")
    d.find_element(By.ID, "swap").click()
    assert source.first_selected_option.get_attribute("value") == "de"
    assert target.first_selected_option.get_attribute("value") == "en"
    assert value(d, "q") == german
    wait(d, translated, "the translation after swapping")
    back = api_translate(server, german, "de", "en")
    assert value(d, "out") == back["translatedText"]
    assert d.find_element(By.ID, "detected").text == ""

    # a file, German -> English: the page's link serves what the API makes of the same file
    upload = tmp_path / "notes.txt"
    upload.write_text("Ich liebe dich.\n\nDas Wetter ist schön.\n", encoding="utf-8")
    d.find_element(By.ID, "file").send_keys(str(upload))
    d.find_element(By.ID, "file-submit").click()
    link = wait(
        d,
        lambda d: (
            d.find_element(By.ID, "file-result").is_displayed()
            and d.find_element(By.ID, "download")
        ),
        "the download link",
    )
    assert link.text == "Download notes_en.txt"
    got = httpx.get(link.get_attribute("href"))
    assert got.status_code == 200
    with upload.open("rb") as f:
        direct = httpx.post(
            f"{server}/translate_file",
            files={"file": ("notes.txt", f, "text/plain")},
            data={"source": "de", "target": "en"},
            timeout=60,
        )
    want = httpx.get(direct.json()["translatedFileUrl"]).text
    assert got.text == want
    assert got.text != upload.read_text(encoding="utf-8") and got.text.strip()
    assert d.find_element(By.ID, "error").is_displayed() is False


def test_errors_and_the_character_limit_are_shown(server, browser, tmp_path):
    d = browser
    wait(d, languages_loaded, "the language lists")
    # the server's answer to a file it cannot translate is shown as it is
    bad = tmp_path / "scan.pdf"
    bad.write_bytes(b"%PDF-1.4\n")
    d.find_element(By.ID, "file").send_keys(str(bad))
    d.find_element(By.ID, "file-submit").click()
    error = d.find_element(By.ID, "file-error")  # beside the file form
    wait(d, lambda d: error.is_displayed(), "the error line")
    r = httpx.post(
        f"{server}/translate_file",
        files={"file": ("scan.pdf", b"%PDF-1.4\n")},
        data={"source": "auto", "target": "de"},
    )
    assert r.status_code == 400
    assert error.text == f"Error: {r.json()['error']}"

    # a translation of a first text, English -> German
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    box = d.find_element(By.ID, "q")
    box.send_keys("Good morning.")
    d.find_element(By.ID, "translate").click()
    wait(d, translated, "the first translation")
    assert not d.find_element(By.ID, "alternatives").get_attribute("hidden")

    # over the server's limit: the count says so, nothing is sent, and the translation of the
    # earlier text goes (it would pass for this one's)
    box.send_keys(" " + "a" * CHAR_LIMIT)
    count = d.find_element(By.ID, "count")
    total = len("Good morning.") + 1 + CHAR_LIMIT
    assert count.text == f"{total} / {CHAR_LIMIT}"
    assert "over" in count.get_attribute("class")
    d.find_element(By.ID, "translate").click()
    error = d.find_element(By.ID, "error")
    assert error.text == (
        f"Error: The text has {total} characters, {total - CHAR_LIMIT} more than this server "
        f"translates at once ({CHAR_LIMIT}). Shorten it, or translate it as a .txt file below."
    )
    assert value(d, "out") == ""
    assert d.find_element(By.ID, "alternatives").get_attribute("hidden")

    # swapping now swaps the languages and keeps the text (no translation of it to take)
    typed = value(d, "q")
    d.find_element(By.ID, "swap").click()
    assert value(d, "q") == typed
    assert (
        Select(d.find_element(By.ID, "source")).first_selected_option.get_attribute("value") == "de"
    )


def test_the_keyboard_keeps_its_place(server, browser):
    """Enter on the Translate button translates and leaves the focus on the button (a button
    that disables itself would drop it to the page); the page's text areas and alternatives
    follow the text's own direction (right to left for Hebrew or Arabic)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.find_element(By.ID, "q").send_keys("The dog is slow.")
    button = d.find_element(By.ID, "translate")
    d.execute_script("arguments[0].focus()", button)
    button.send_keys("\n")
    wait(d, translated, "the translation")
    assert d.execute_script("return document.activeElement.id") == "translate"
    for element_id in ("q", "out"):
        assert d.find_element(By.ID, element_id).get_attribute("dir") == "auto"
    for b in d.find_elements(By.CSS_SELECTOR, "#alternatives-list button"):
        assert b.get_attribute("dir") == "auto"


def background(driver) -> str:
    return driver.execute_script("return getComputedStyle(document.body).backgroundColor")


def test_dark_mode_follows_the_system_and_the_toggle(server):
    d = chromium_driver()
    try:
        d.get(f"{server}/")
        wait(d, languages_loaded, "the language lists")
        light = background(d)
        toggle = d.find_element(By.ID, "theme")
        label = d.find_element(By.ID, "theme-label")
        assert toggle.get_attribute("aria-pressed") == "false"
        assert (label.text, toggle.accessible_name) == ("Dark", "Dark mode")
        toggle.click()
        assert d.execute_script("return document.documentElement.dataset.theme") == "dark"
        # a toggle button: one name, "Dark mode", pressed or not (a screen reader hears the
        # state once), and one visible label, part of that name, for those who speak it to
        # voice control (WCAG 2.5.3; it read "Light" while dark mode was on)
        assert toggle.get_attribute("aria-pressed") == "true"
        assert (label.text, toggle.accessible_name) == ("Dark", "Dark mode")
        dark = background(d)
        assert dark != light
        screenshot(d, "web-dark.png")
        d.refresh()  # the choice is kept
        wait(d, languages_loaded, "the language lists")
        assert background(d) == dark
        d.find_element(By.ID, "theme").click()
        assert background(d) == light

        # no choice stored: the system's dark preference applies
        d.execute_script("localStorage.clear()")
        d.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        d.refresh()
        wait(d, languages_loaded, "the language lists")
        assert background(d) == dark
        assert d.find_element(By.ID, "theme").get_attribute("aria-pressed") == "true"
    finally:
        d.quit()


def as_phone(d, width: int = 390, height: int = 844, scale: int = 2) -> None:
    """The browser as a phone's screen (390 x 844: an iPhone 12 to 14)."""
    d.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": True},
    )


def test_the_page_fits_a_phone(server):
    d = chromium_driver()
    try:
        as_phone(d)
        d.get(f"{server}/")
        wait(d, languages_loaded, "the language lists")
        d.find_element(By.ID, "q").send_keys("I love you.")
        d.find_element(By.ID, "translate").click()
        wait(d, translated, "the translation")
        q, out = d.find_element(By.ID, "q").rect, d.find_element(By.ID, "out").rect
        assert out["y"] >= q["y"] + q["height"], "the text areas stack on a narrow screen"
        assert q["width"] > 300 and q["x"] + q["width"] <= 390
        # long words wrap: an alternative of one 300-letter word, a long file name
        d.execute_script(
            "showAlternatives(['x'.repeat(300)]);"
            "const a = document.getElementById('download');"
            "a.textContent = 'Download ' + 'Quarterly_report_'.repeat(8) + 'de.txt';"
            "document.getElementById('file-result').hidden = false;"
        )
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, "nothing sticks out sideways"
        screenshot(d, "web-phone.png")
    finally:
        with contextlib.suppress(Exception):
            d.quit()


def sideways(d) -> int:
    """How far the page sticks out sideways (0 or less: nothing does)."""
    return d.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def test_a_long_file_name_fits_a_phone(server, tmp_path):
    """A file whose name is long and has no spaces: its status ("Translating …", then "… is
    translated.") wraps on a phone (it stuck out 386 px sideways at 320 px)."""
    d = chromium_driver()
    try:
        as_phone(d, 320, 700, scale=1)
        d.get(f"{server}/")
        wait(d, languages_loaded, "the language lists")
        d.execute_script(
            "const f = window.fetch; window.fetch = (url, options) => String(url) ==="
            " 'translate_file' ? new Promise((r) => { window.releaseFile = () =>"
            " r(f(url, options)); }) : f(url, options);"
        )
        upload = tmp_path / ("Quarterly_report_for_the_board_" * 3 + ".txt")
        upload.write_text("Good morning.\n", encoding="utf-8")
        d.find_element(By.ID, "file").send_keys(str(upload))
        d.find_element(By.ID, "file-submit").click()
        status = d.find_element(By.ID, "file-status")
        wait(d, lambda d: status.text.startswith("Translating Quarterly"), "the file's status")
        assert sideways(d) <= 0, "nothing sticks out sideways"
        d.execute_script("window.releaseFile()")
        wait(d, lambda d: status.text.endswith(".txt is translated."), "the file translated")
        assert sideways(d) <= 0, "nothing sticks out sideways"
    finally:
        with contextlib.suppress(Exception):
            d.quit()


def fetched_elsewhere(driver, server: str) -> list[str]:
    """The URLs the page in `driver` fetched from anywhere but `server`."""
    fetched = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert fetched, "the page fetched nothing at all"
    return [url for url in fetched if not url.startswith(f"{server}/")]


def test_api_docs_render_without_internet(server):
    """Swagger UI at /docs renders the service's schema, and every file the browser fetched
    for it (script, style sheet, the schema) came from the service itself."""
    d = chromium_driver()
    try:
        d.get(f"{server}/docs")
        wait(
            d,
            lambda d: d.execute_script(
                "return [...document.querySelectorAll('.opblock-summary-path')]"
                ".some(e => e.textContent.trim() === '/translate');"
            ),
            "POST /translate in Swagger UI",
        )
        title = d.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
        assert title.startswith("mt-serve"), title
        assert fetched_elsewhere(d, server) == []
        screenshot(d, "docs-swagger.png")
    finally:
        with contextlib.suppress(Exception):
            d.quit()


# Chromium draws a menu's arrow inside its padding box, about 20 px at this font size: a text
# wider than the menu less its padding and this is cut off
MENU_ARROW_PX = 24


@pytest.mark.parametrize("width", [320, 375])
def test_the_language_menus_fit_a_narrow_phone(server, width):
    """On a narrow phone no language menu cuts its text off ("Detect language" did at 375 px,
    side by side with the target menu), and nothing sticks out sideways."""
    d = chromium_driver()
    try:
        as_phone(d, width, 700, scale=1)
        d.get(f"{server}/")
        wait(d, languages_loaded, "the language lists")
        cut = d.execute_script(
            """
            const canvas = document.createElement("canvas").getContext("2d");
            const cut = [];
            for (const id of ["source", "target"]) {
              const menu = document.getElementById(id), style = getComputedStyle(menu);
              canvas.font = `${style.fontSize} ${style.fontFamily}`;
              const room = menu.clientWidth - parseFloat(style.paddingLeft)
                - parseFloat(style.paddingRight) - arguments[0];
              for (const option of menu.options) {
                const needed = canvas.measureText(option.text).width;
                if (needed > room) cut.push(`${id}: ${option.text} (${needed} > ${room} px)`);
              }
            }
            return cut;
            """,
            MENU_ARROW_PX,
        )
        assert cut == []
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, "nothing sticks out sideways"
        swap = d.find_element(By.ID, "swap").rect
        assert swap["x"] + swap["width"] <= width
        screenshot(d, f"web-phone-{width}.png")
    finally:
        with contextlib.suppress(Exception):
            d.quit()


def test_swap_clears_the_alternatives_of_the_other_direction(server, browser):
    """While the swapped text is translated, no alternative of the old direction is offered
    (clicked, it would put a text in the source language into the translation)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.find_element(By.ID, "q").send_keys("Good morning.")
    wait(d, translated, "the translation")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#alternatives-list button"), "alternatives")
    # the translation after the swap never answers: the page shows what it shows meanwhile
    d.execute_script(
        "const f = window.fetch; window.fetch = (url, options) =>"
        " String(url).startsWith('translate') ? new Promise(() => {}) : f(url, options);"
    )
    d.find_element(By.ID, "swap").click()
    assert value(d, "out") == ""
    assert d.find_element(By.ID, "alternatives").get_attribute("hidden") is not None
    assert not d.find_elements(By.CSS_SELECTOR, "#alternatives-list button")


def test_text_typed_before_the_languages_arrive_is_translated_when_they_do(server):
    """A text typed while the language list cannot be loaded (no target language yet) is
    translated once the list arrives, not left untranslated with no message."""
    d = chromium_driver()
    try:
        open_without_languages(d, server)
        d.find_element(By.ID, "q").send_keys("Good morning.")
        d.find_element(By.ID, "q").send_keys(Keys.CONTROL, Keys.ENTER)
        wait(d, lambda d: "No target language" in d.find_element(By.ID, "error").text, "no target")
        d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        wait(d, languages_loaded, "the language lists")
        wait(d, translated, "the translation of the text typed meanwhile")
        assert d.find_element(By.ID, "error").get_attribute("hidden") is not None
        expected = api_translate(server, "Good morning.", "auto", value(d, "target"))
        assert value(d, "out") == expected["translatedText"]
    finally:
        d.quit()


def test_the_translation_says_its_language(server, browser):
    """The translation and its alternatives carry the target language as `lang` (a screen
    reader reads German text with a German voice, not with the page's English one)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.find_element(By.ID, "q").send_keys("Good morning.")
    wait(d, translated, "the translation")
    target = value(d, "target")
    assert target and d.find_element(By.ID, "out").get_attribute("lang") == target
    assert d.find_element(By.ID, "alternatives-list").get_attribute("lang") == target


def test_swap_waits_for_the_language_list(server):
    """Before the language list is there, swap is disabled (clicked, it said "No model
    translates from ."); once the list is there and a source is chosen, it works."""
    d = chromium_driver()
    try:
        open_without_languages(d, server)
        swap = d.find_element(By.ID, "swap")
        assert not swap.is_enabled()
        d.execute_script("arguments[0].click()", swap)
        assert "No model translates" not in d.find_element(By.ID, "error").get_property(
            "textContent"
        )
        d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        wait(d, languages_loaded, "the language lists")
        Select(d.find_element(By.ID, "source")).select_by_value("en")
        assert swap.is_enabled()
        target = value(d, "target")
        swap.click()
        assert value(d, "source") == target
        assert "No model translates" not in d.find_element(By.ID, "error").text
    finally:
        d.quit()


HOLD_FIRST_TRANSLATION = """
const f = window.fetch;
let n = 0;
window.fetch = (url, options) => {
  if (String(url) !== "translate" || ++n > 1) return f(url, options);
  // the first translation's answer is held back (as a slow answer, already on its way, that
  // no abort stops) until the test releases it
  let release;
  const held = new Promise((r) => { release = r; });
  window.releaseFirst = release;
  return Promise.all([f(url, { ...options, signal: undefined }), held]).then(([r]) => ({
    ok: r.ok, status: r.status, statusText: r.statusText, headers: r.headers,
    json: () => r.json().then((data) => { window.firstRead = true; return data; }),
  }));
};
"""


def test_an_older_answer_never_replaces_a_newer_translation(server, browser):
    """Answers that arrive out of order: the translation of the earlier text, arriving after
    that of the text now typed, is not shown."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    d.execute_script(HOLD_FIRST_TRANSLATION)
    d.execute_script("document.getElementById('q').value = 'Good morning.'; translate();")
    d.execute_script("document.getElementById('q').value = 'The dog is slow.'; translate();")
    newer = api_translate(server, "The dog is slow.", "en", "de")["translatedText"]
    wait(d, lambda d: translated(d) and value(d, "out") == newer, "the newer translation")
    d.execute_script("window.releaseFirst()")
    wait(d, lambda d: d.execute_script("return window.firstRead === true"), "the older answer")
    assert value(d, "out") == newer
    assert d.find_element(By.ID, "error").get_attribute("hidden") is not None
    assert "stale" not in d.find_element(By.ID, "out").get_attribute("class")


def test_the_translation_of_an_earlier_text_is_marked_stale(server, browser):
    """Once the text changes, the translation beside it, its alternatives and the detected
    language are dimmed until the new translation replaces them."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    box = d.find_element(By.ID, "q")
    box.send_keys("Good morning.")
    wait(d, translated, "the translation")
    wait(d, lambda d: d.find_element(By.ID, "detected").text, "the detected language")
    shown = ("out", "alternatives", "detected")
    opacity = "return getComputedStyle(arguments[0]).opacity"
    for element_id in shown:
        element = d.find_element(By.ID, element_id)
        assert "stale" not in element.get_attribute("class")
        assert d.execute_script(opacity, element) == "1"
    # the next translation never answers: the page shows what it shows meanwhile
    d.execute_script(
        "const f = window.fetch; window.fetch = (url, options) =>"
        " String(url) === 'translate' ? new Promise(() => {}) : f(url, options);"
    )
    box.send_keys(" Thank you.")
    for element_id in shown:
        element = d.find_element(By.ID, element_id)
        assert "stale" in element.get_attribute("class"), element_id
        assert float(d.execute_script(opacity, element)) < 1, element_id
    # back to the text translated: the translation is its own again
    for _ in " Thank you.":
        box.send_keys(Keys.BACKSPACE)
    assert value(d, "q") == "Good morning."
    assert "stale" not in d.find_element(By.ID, "out").get_attribute("class")


NEVER_TRANSLATE = (
    "const f = window.fetch; window.fetch = (url, options) =>"
    " String(url) === 'translate' ? new Promise(() => {}) : f(url, options);"
)
# the colour a text is seen in: its colour and its element's opacity over the pane's background
SEEN_COLOUR = """
const [element, pseudo] = arguments;
const style = getComputedStyle(element, pseudo), box = getComputedStyle(element);
const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
const [fg, bg] = [rgb(style.color), rgb(box.backgroundColor)];
const alpha = (fg.length > 3 ? fg[3] : 1) * Number(pseudo ? style.opacity : 1)
  * Number(box.opacity);
return fg.slice(0, 3).map((c, i) => Math.round(c * alpha + bg[i] * (1 - alpha)));
"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_stale_translation_does_not_look_like_the_placeholder(server, browser, theme):
    """The translation of an earlier text is marked "Outdated" and drawn unlike the empty
    output's placeholder, in either theme (dimmed alone, it was the placeholder's grey in dark
    mode: an old translation and no translation looked the same)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    if theme == "dark":
        d.find_element(By.ID, "theme").click()
    out, note = d.find_element(By.ID, "out"), d.find_element(By.ID, "stale-note")
    placeholder = d.execute_script(SEEN_COLOUR, out, "::placeholder")
    placeholder_style = d.execute_script(
        "return getComputedStyle(arguments[0], '::placeholder').fontStyle", out
    )
    box = d.find_element(By.ID, "q")
    box.send_keys("Good morning.")
    wait(d, translated, "the translation")
    assert not note.is_displayed()
    assert out.get_attribute("aria-describedby") is None
    d.execute_script(NEVER_TRANSLATE)
    box.send_keys(" Thank you.")
    assert note.is_displayed() and note.text == "Outdated"
    assert out.get_attribute("aria-describedby") == "stale-note"
    stale = d.execute_script(SEEN_COLOUR, out, None)
    assert max(abs(a - b) for a, b in zip(stale, placeholder, strict=True)) >= 32, (
        stale,
        placeholder,
    )
    style = d.execute_script("return getComputedStyle(arguments[0]).fontStyle", out)
    assert style != placeholder_style
    screenshot(d, f"web-stale-{theme}.png")
    # the text translated again: no longer outdated
    for _ in " Thank you.":
        box.send_keys(Keys.BACKSPACE)
    assert not note.is_displayed()


def test_an_outdated_translation_cannot_be_copied(server, browser):
    """The copy button is disabled while there is no translation or while the one shown is of
    an earlier text (it copied that one as if it were the new text's)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    copy = d.find_element(By.ID, "copy")
    assert not copy.is_enabled()  # nothing translated yet
    box = d.find_element(By.ID, "q")
    box.send_keys("Good morning.")
    wait(d, translated, "the translation")
    assert copy.is_enabled()
    d.execute_script(NEVER_TRANSLATE)
    d.execute_async_script("navigator.clipboard.writeText('before').then(arguments[0])")
    box.send_keys(" Thank you.")
    assert not copy.is_enabled()
    assert "outdated" in copy.get_attribute("title")
    d.execute_script("arguments[0].click()", copy)
    assert copy.text == "Copy"
    assert clipboard(d) == "before"
    # back to the text translated: its translation can be copied again
    for _ in " Thank you.":
        box.send_keys(Keys.BACKSPACE)
    assert copy.is_enabled()
    copy.click()
    wait(d, lambda d: clipboard(d) == value(d, "out"), "the copied translation")


RECORD_ANNOUNCEMENTS = """
window.said = [];
new MutationObserver(() => {
  const e = document.getElementById("announce");
  if (e.textContent) window.said.push([e.textContent, e.querySelector("[lang]").lang]);
}).observe(document.getElementById("announce"), {childList: true, subtree: true,
  characterData: true});
"""


def test_a_finished_translation_is_announced_once(server, browser, tmp_path):
    """A screen reader is told each finished translation, once, in a polite live region, and
    in its language; not "Translating…" at every pause in the typing (the status line was the
    live region: it said that, and never the translation), nor a translation that is outdated.
    A file's translation is announced when it is done."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    region = d.find_element(By.ID, "announce")
    assert (
        region.get_attribute("role"),
        region.get_attribute("aria-live"),
        region.get_attribute("aria-atomic"),
    ) == ("status", "polite", "true")
    # the status line ("Translating…") is in no live region
    assert (
        d.execute_script(
            "return document.getElementById('status').closest('[aria-live], [role=status]')"
        )
        is None
    )
    d.execute_script(RECORD_ANNOUNCEMENTS)
    text = "Where is the train station?"
    d.find_element(By.ID, "q").send_keys(text)
    expected = api_translate(server, text, "en", "de")["translatedText"]
    wait(d, lambda d: translated(d) and value(d, "out") == expected, "the translation")
    said = d.execute_script("return window.said")
    # (a pause in the typing on a busy machine may have translated a part first)
    assert said and said[-1] == [f"Translation (German): {expected}", "de"], said
    assert all(s.startswith("Translation (German): ") for s, _ in said), said
    # a translation that arrives once the text has changed again is outdated: not said
    d.execute_script(HOLD_FIRST_TRANSLATION + "pause = 1e9;")  # (no translation on a pause)
    d.find_element(By.ID, "q").send_keys(Keys.CONTROL, Keys.ENTER)
    wait(d, lambda d: d.find_element(By.ID, "status").text == "Translating…", "the request")
    d.find_element(By.ID, "q").send_keys(" Please.")
    d.execute_script("window.releaseFirst()")
    wait(d, lambda d: d.execute_script("return window.firstRead === true"), "the answer")
    assert d.find_element(By.ID, "stale-note").is_displayed()
    assert d.execute_script("return window.said") == said
    # a text whose translation never comes: nothing more is said
    d.execute_script(NEVER_TRANSLATE + "; pause = 0;")
    d.find_element(By.ID, "q").send_keys(" Thank you.")
    wait(d, lambda d: d.find_element(By.ID, "status").text == "Translating…", "the request")
    assert d.execute_script("return window.said") == said
    # a file: "notes.txt is translated." in the file form's live status once it is done
    send_notes(d, tmp_path)
    status = d.find_element(By.ID, "file-status")
    wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the download link")
    assert status.get_attribute("aria-live") == "polite"
    assert status.text == "notes.txt is translated."


def test_a_text_already_in_the_target_language_is_offered_another_target(server, browser):
    """Detect language into German, German typed: the text comes back as it is, and a button
    offers English; it translates there. Not offered for a text in another language, nor
    once the target is changed."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    offer = d.find_element(By.ID, "retarget")
    d.find_element(By.ID, "q").send_keys("Ich liebe dich.", Keys.CONTROL, Keys.ENTER)
    wait(d, lambda d: translated(d) and offer.is_displayed(), "the offer")
    assert value(d, "out") == "Ich liebe dich."  # as it came
    assert d.find_element(By.ID, "detected").text.startswith("Detected: German")
    assert offer.text == "Translate into English"
    offer.click()
    expected = api_translate(server, "Ich liebe dich.", "auto", "en")["translatedText"]
    wait(d, lambda d: translated(d) and value(d, "out") == expected, "the English translation")
    assert (
        Select(d.find_element(By.ID, "target")).first_selected_option.get_attribute("value") == "en"
        and not offer.is_displayed()
    )
    assert d.execute_script("return localStorage.getItem('mt-target')") == "en"
    # an English text into English: offered German; the target changed by hand: gone
    d.find_element(By.ID, "q").clear()
    d.find_element(By.ID, "q").send_keys("I love you.", Keys.CONTROL, Keys.ENTER)
    wait(d, lambda d: offer.is_displayed(), "the offer")
    assert offer.text == "Translate into German"
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    assert not offer.is_displayed()
    wait(d, lambda d: translated(d) and value(d, "out") != "I love you.", "the translation")
    assert not offer.is_displayed()


def test_an_error_shows_the_servers_field_names_as_code(server, browser):
    """The server words its errors for API clients ("Give the source language (`source: en`)
    to translate it anyway"): the page shows the backticked parts as code, not backticks."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    french = "Nous aimons le pain et le fromage du village."
    d.find_element(By.ID, "q").send_keys(french, Keys.CONTROL, Keys.ENTER)
    error = d.find_element(By.ID, "error")
    wait(d, lambda d: error.is_displayed(), "the error")
    said = httpx.post(
        f"{server}/translate", json={"q": french, "source": "auto", "target": "de"}
    ).json()["error"]
    assert "`source: en`" in said
    assert error.text == "Error: " + said.replace("`", "")
    assert [c.text for c in error.find_elements(By.TAG_NAME, "code")] == ["source: en"]


def test_the_download_link_is_the_pages_own_behind_a_proxy(server, browser, tmp_path):
    """Behind a proxy that serves the service under a path without saying so, the answer's
    link names the service's own address (http://mt-internal:8000/download_file/...); the
    page's link is relative to the page, as its API calls are, so it goes through the proxy."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.execute_script(
        "const f = window.fetch; window.fetch = async (url, options) => {"
        " const r = await f(url, options); if (String(url) !== 'translate_file') return r;"
        " const data = await r.json(); window.served = data.translatedFileUrl;"
        " data.translatedFileUrl = data.translatedFileUrl.replace(/^https?:\\/\\/[^/]+/,"
        " 'http://mt-internal:8000');"
        " return new Response(JSON.stringify(data), {status: r.status, headers: r.headers}); };"
    )
    send_notes(d, tmp_path)
    wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the download link")
    link = d.find_element(By.ID, "download")
    assert link.get_attribute("href") == d.execute_script("return window.served")
    assert link.get_attribute("href").startswith(f"{server}/download_file/")
    assert link.text == "Download notes_de.txt"
    assert httpx.get(link.get_attribute("href")).text.strip()


def test_text_and_file_translations_say_each_their_own_status(server, browser, tmp_path):
    """A text translated while a file is translated does not blank the file's "Translating
    notes.txt…" when it ends (the two shared one status line)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    # the file's translation is held back until the test releases it
    d.execute_script(
        "const f = window.fetch; window.fetch = (url, options) => String(url) === 'translate_file'"
        " ? new Promise((r) => { window.releaseFile = () => r(f(url, options)); })"
        " : f(url, options);"
    )
    send_notes(d, tmp_path)
    body = d.find_element(By.TAG_NAME, "body")
    wait(d, lambda d: "Translating notes.txt…" in body.text, "the file's status")
    d.find_element(By.ID, "q").send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
    wait(d, translated, "the text's translation")
    assert "Translating notes.txt…" in body.text
    d.execute_script("window.releaseFile()")
    wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the download link")
    assert "Translating notes.txt…" not in body.text


def test_a_reload_keeps_the_text_and_the_languages(server, browser):
    """The text typed and the languages chosen are there again after a reload, and the text
    is translated again (a reload emptied the text)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("de")
    Select(d.find_element(By.ID, "target")).select_by_value("en")
    d.find_element(By.ID, "q").send_keys("Guten Morgen.")
    wait(d, translated, "the translation")
    d.refresh()
    wait(d, languages_loaded, "the language lists")
    assert value(d, "q") == "Guten Morgen."
    assert (value(d, "source"), value(d, "target")) == ("de", "en")
    assert d.find_element(By.ID, "count").text == f"13 / {CHAR_LIMIT}"
    expected = api_translate(server, "Guten Morgen.", "de", "en")["translatedText"]
    wait(d, lambda d: translated(d) and value(d, "out") == expected, "the translation again")
    # an emptied text stays empty after a reload
    d.find_element(By.ID, "q").clear()
    d.execute_script("document.getElementById('q').dispatchEvent(new Event('input'))")
    d.refresh()
    wait(d, languages_loaded, "the language lists")
    assert value(d, "q") == ""


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    """A server that needs an API key, and a key for it."""
    from app.keys import KeyStore

    db = tmp_path_factory.mktemp("web-keys") / "keys.db"
    key, _ = KeyStore(db).add("web")
    overrides = {"max_request_chars": CHAR_LIMIT, "api_keys_db": db, "api_keys_required": True}
    with serve_in_thread(WEIGHTS, warmup=False, **overrides) as (url, _):
        yield url, key, db


def test_a_key_entered_where_it_is_asked_for_translates_the_text(keyed_server):
    """On a phone, a server that needs a key shows the key field on the first screen, beside
    the error that asks for it (it was at the bottom of the page), and the text that failed
    is translated once a key is entered (it stayed untranslated)."""
    url, key, _ = keyed_server
    d = chromium_driver()
    try:
        as_phone(d)
        d.get(f"{url}/")
        wait(d, languages_loaded, "the language lists")
        field = d.find_element(By.ID, "api-key")
        wait(d, lambda d: field.is_displayed(), "the key field")
        d.find_element(By.ID, "q").send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
        error = d.find_element(By.ID, "error")
        wait(d, lambda d: error.is_displayed(), "the error")
        assert error.text == "Error: Please contact the server operator to get an API key"
        bottom = d.execute_script("return arguments[0].getBoundingClientRect().bottom", field)
        assert bottom <= 844, "the key field is on the first screen"
        assert d.execute_script("return window.scrollY") == 0
        assert field.accessible_name == "API key"

        field.send_keys("not-a-key", Keys.ENTER)
        wait(d, lambda d: error.text == "Error: Invalid API key", "the key refused")
        assert value(d, "out") == ""
        field.clear()
        field.send_keys(key, Keys.ENTER)
        wait(d, translated, "the translation with the key")
        assert not error.is_displayed()
        r = httpx.post(
            f"{url}/translate",
            json={"q": "Good morning.", "source": "auto", "target": value(d, "target"),
                  "api_key": key},
        )  # fmt: skip
        assert value(d, "out") == r.json()["translatedText"]
        # the key is kept for the next visit
        d.refresh()
        wait(d, languages_loaded, "the language lists")
        assert value(d, "api-key") == key
    finally:
        d.quit()


@pytest.mark.parametrize(
    ("status", "body", "headers", "shown"),
    [
        (
            429,
            '{"error": "Slowdown: 1 requests per minute; retry in 40 s"}',
            {"Retry-After": "40"},
            "Error: Slowdown: 1 requests per minute; retry in 40 s",
        ),
        (
            503,
            '{"error": "too many requests in progress"}',
            {"Retry-After": "3"},
            "Error: too many requests in progress (retry in 3 s)",
        ),
        (400, '{"error": "Invalid request"}', {}, "Error: Invalid request"),
        (502, "<html>Bad gateway</html>", {}, "Error: the server answered 502; retry in a moment"),
        (404, "", {}, "Error: the server answered 404"),
    ],
)
def test_errors_from_the_server_are_shown_clearly(server, browser, status, body, headers, shown):
    """The server's error is shown as it is worded, with the Retry-After it sent; an answer
    with no error of the API's (a proxy's HTML page, with no status text as over HTTP/2) says
    what the server answered (it showed "Error: 502 ")."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.execute_script(
        "const [status, body, headers] = arguments; const f = window.fetch;"
        "window.fetch = (url, options) => String(url) === 'translate'"
        " ? Promise.resolve(new Response(body, {status, headers})) : f(url, options);",
        status,
        body,
        headers,
    )
    d.find_element(By.ID, "q").send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
    error = d.find_element(By.ID, "error")
    wait(d, lambda d: error.is_displayed(), "the error")
    assert error.text == shown
    assert value(d, "out") == ""
    assert d.find_element(By.ID, "status").text == ""


def test_enter_in_the_key_field_retries_a_failed_translation(keyed_server):
    """Enter in the key field translates a text that failed again, with the key as it is (a
    key left unchanged did nothing)."""
    url, key, _ = keyed_server
    d = chromium_driver()
    try:
        d.get(f"{url}/")
        wait(d, languages_loaded, "the language lists")
        field = d.find_element(By.ID, "api-key")
        field.clear()
        field.send_keys(key, Keys.ENTER)
        # the server is busy once: the translation fails with 503
        busy_once(d, "busy")
        d.find_element(By.ID, "q").send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
        error = d.find_element(By.ID, "error")
        wait(d, lambda d: error.text == "Error: busy", "the failure")
        field.send_keys(Keys.ENTER)
        wait(d, translated, "the translation after Enter in the key field")
        assert not error.is_displayed()
    finally:
        d.quit()


def test_the_text_says_its_language(server, browser):
    """The text to translate carries its language as `lang`, the one chosen or the one
    detected (a screen reader read German text with the page's English voice)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    box = d.find_element(By.ID, "q")
    assert box.get_attribute("lang") == ""  # Detect language, nothing detected yet
    box.send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
    wait(d, lambda d: d.find_element(By.ID, "detected").text, "the detected language")
    assert box.get_attribute("lang") == "en"
    Select(d.find_element(By.ID, "source")).select_by_value("de")
    assert box.get_attribute("lang") == "de"


def test_a_file_chosen_anew_drops_the_link_of_the_last_one(server, browser, tmp_path):
    """Once another file is chosen, the download link of the last file's translation goes (it
    stayed beside the new file's name, as if it were its translation)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    send_notes(d, tmp_path)
    result = d.find_element(By.ID, "file-result")
    wait(d, lambda d: result.is_displayed(), "the download link")
    other = tmp_path / "letter.txt"
    other.write_text("Thank you.\n", encoding="utf-8")
    d.find_element(By.ID, "file").send_keys(str(other))
    assert not result.is_displayed()


def test_the_count_is_against_the_limit_of_the_key_entered(keyed_server):
    """Once a key with a smaller limit of its own is entered, the character count is against
    the key's limit, and a text over it is not sent (the count said the server's limit: the
    text was sent and refused with 413); another key, without a limit of its own, brings the
    server's back."""
    from app.keys import KeyStore

    url, key, db = keyed_server
    small, _ = KeyStore(db).add("small", chars_per_request=20)
    d = chromium_driver()
    try:
        d.get(f"{url}/")
        wait(d, languages_loaded, "the language lists")
        field, count = d.find_element(By.ID, "api-key"), d.find_element(By.ID, "count")
        wait(d, lambda d: field.is_displayed(), "the key field")
        assert count.text == f"0 / {CHAR_LIMIT}"
        field.clear()
        field.send_keys(small, Keys.ENTER)
        wait(d, lambda d: count.text == "0 / 20", "the key's own limit")
        text = "Good morning, my dear friend."
        d.find_element(By.ID, "q").send_keys(text, Keys.CONTROL, Keys.ENTER)
        assert count.text == f"{len(text)} / 20"
        assert "over" in count.get_attribute("class")
        error = d.find_element(By.ID, "error")
        assert error.text == (
            f"Error: The text has {len(text)} characters, {len(text) - 20} more than your API "
            "key allows at once (20). Shorten it, or translate it as a .txt file below."
        )
        # the key is kept: after a reload its limit is asked for again
        d.refresh()
        wait(d, lambda d: d.find_element(By.ID, "count").text == f"{len(text)} / 20", "again")
        field = d.find_element(By.ID, "api-key")
        field.clear()
        field.send_keys(key, Keys.ENTER)
        count = d.find_element(By.ID, "count")
        wait(d, lambda d: count.text == f"{len(text)} / {CHAR_LIMIT}", "the server's limit")
        wait(d, translated, "the translation with the other key")
    finally:
        d.quit()


def test_a_file_removed_after_it_was_chosen_is_said_so(server, browser, tmp_path):
    """A file moved or removed between choosing it and sending it: the page says it cannot
    be read and to choose it again (it said "The server cannot be reached"), and the file
    chosen again is translated."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    upload = tmp_path / "notes.txt"
    upload.write_text("Good morning.\n", encoding="utf-8")
    d.find_element(By.ID, "file").send_keys(str(upload))
    upload.unlink()
    d.find_element(By.ID, "file-submit").click()
    error = d.find_element(By.ID, "file-error")
    wait(d, lambda d: error.is_displayed(), "the error")
    assert error.text == (
        "Error: notes.txt cannot be read: it was moved, removed or changed since it was chosen."
        " Choose it again."
    )
    upload.write_text("Good morning.\n", encoding="utf-8")
    d.find_element(By.ID, "file").send_keys(str(upload))
    d.find_element(By.ID, "file-submit").click()
    wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the download link")
    assert not error.is_displayed()


def test_a_file_sent_before_the_languages_arrive_is_told_why(server, tmp_path):
    """A file sent while the language list cannot be loaded is refused by the page with the
    text's reason, no target language (the server's "`target` is missing: give a language
    code" was shown, which the page's user cannot act on)."""
    d = chromium_driver()
    try:
        open_without_languages(d, server)
        send_notes(d, tmp_path)
        error = d.find_element(By.ID, "file-error")
        wait(d, lambda d: error.is_displayed(), "the error")
        assert error.text == "Error: No target language: the server has no models loaded yet."
        # once the list is there, the file is translated
        d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        wait(d, languages_loaded, "the language lists")
        d.find_element(By.ID, "file-submit").click()
        wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the link")
        assert not error.is_displayed()
    finally:
        d.quit()


def test_copy_without_the_clipboard_api_keeps_the_keyboard_focus(server, browser):
    """Where the page has no clipboard API (plain HTTP from another host), Copy still copies
    and the keyboard focus stays on the button (it moved to the translation's box)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    d.find_element(By.ID, "q").send_keys("Good morning.")
    wait(d, translated, "the translation")
    d.execute_async_script(
        "window.clip = navigator.clipboard;"
        "Object.defineProperty(navigator, 'clipboard', {value: undefined});"
        "window.clip.writeText('before').then(arguments[0])"
    )
    copy = d.find_element(By.ID, "copy")
    d.execute_script("arguments[0].focus()", copy)
    copy.send_keys(Keys.ENTER)
    wait(d, lambda d: copy.text == "Copied", "the copy")
    assert d.execute_script("return document.activeElement.id") == "copy"
    copied = d.execute_async_script(
        "window.clip.readText().then(arguments[0], () => arguments[0](''))"
    )
    assert copied == value(d, "out")
    # a browser that copies nothing: the translation is left selected, focused, for Ctrl+C
    d.execute_script("document.execCommand = () => false")
    wait(d, lambda d: copy.text == "Copy", "the button's label back")
    copy.send_keys(Keys.ENTER)
    wait(d, lambda d: copy.text == "Not copied: press Ctrl+C", "the failure")
    out = d.find_element(By.ID, "out")
    assert d.execute_script("return document.activeElement.id") == "out"
    assert out.get_property("selectionEnd") - out.get_property("selectionStart") == len(
        value(d, "out")
    )


def test_the_footer_reads_as_a_line_on_a_phone(server):
    """On a narrow phone the footer's link and its text wrap as one sentence (the link was
    squeezed into a column of its own, one word a line, beside the text)."""
    d = chromium_driver()
    try:
        as_phone(d, 320, 700, scale=1)
        d.get(f"{server}/")
        wait(d, languages_loaded, "the language lists")
        link = d.find_element(By.CSS_SELECTOR, "footer a")
        lines = d.execute_script(
            "const a = arguments[0], line = parseFloat(getComputedStyle(a).lineHeight);"
            "return Math.round(a.getBoundingClientRect().height / line);",
            link,
        )
        assert lines == 1, "the link is on one line"
    finally:
        with contextlib.suppress(Exception):
            d.quit()


def test_a_file_over_the_size_limit_is_refused_in_words(server, browser, tmp_path):
    """A file larger than the server takes is refused before it is sent, its size and the
    limit written as numbers are read ("12,345 bytes"; it was "has 12345 bytes; ... at most
    10000.", the limit without its unit)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    d.execute_script("maxFileBytes = 10000")
    upload = tmp_path / "notes.txt"
    upload.write_bytes(b"a" * 12345)
    d.find_element(By.ID, "file").send_keys(str(upload))
    d.find_element(By.ID, "file-submit").click()
    error = d.find_element(By.ID, "file-error")
    wait(d, lambda d: error.is_displayed(), "the error")
    assert error.text == (
        "Error: notes.txt has 12,345 bytes; this server takes files of at most 10,000 bytes."
    )


def test_emptying_the_text_empties_the_translation_at_once(server, browser):
    """Text deleted: the translation, its alternatives and the detected language go at once
    (they stayed, marked outdated, until the typing pause had passed)."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    box = d.find_element(By.ID, "q")
    box.send_keys("Good morning.")
    wait(d, translated, "the translation")
    d.execute_script("pause = 1e9")  # no typing pause ever passes from now on
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    assert value(d, "q") == ""
    assert value(d, "out") == ""
    assert not d.find_element(By.ID, "stale-note").is_displayed()
    assert not d.find_element(By.ID, "alternatives").is_displayed()
    assert d.find_element(By.ID, "detected").text == ""


def test_translate_sends_a_changed_text_while_a_translation_is_on_its_way(server, browser):
    """Clicked while an earlier text's translation is on its way (a slow server), Translate
    sends the text as it is now (the click was ignored while the button was busy), and not the
    same text twice."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    d.execute_script(
        "pause = 1e9; window.sent = [];"  # no typing pause ever passes
        "const f = window.fetch; window.fetch = (url, options) => {"
        " if (String(url) !== 'translate') return f(url, options);"
        " window.sent.push(JSON.parse(options.body).q);"
        " return window.sent.length === 1 ? new Promise(() => {}) : f(url, options); };"
    )
    box, button = d.find_element(By.ID, "q"), d.find_element(By.ID, "translate")
    box.send_keys("Good morning.")
    button.click()
    assert button.get_attribute("aria-disabled") == "true"
    button.click()  # the same text: not sent again
    assert d.execute_script("return window.sent") == ["Good morning."]
    box.send_keys(" Thank you.")
    button.click()
    assert d.execute_script("return window.sent") == ["Good morning.", "Good morning. Thank you."]
    expected = api_translate(server, "Good morning. Thank you.", "en", "de")["translatedText"]
    wait(d, lambda d: translated(d) and value(d, "out") == expected, "the translation")


#: records the body of each POST to /translate the page sends, in `window.sent`
RECORD_SENT = (
    "window.sent = []; const f = window.fetch; window.fetch = (url, options) => {"
    " if (String(url) === 'translate') window.sent.push(JSON.parse(options.body));"
    " return f(url, options); };"
)


def test_html_is_sent_as_html_and_alternatives_asked_for_short_texts_only(server, browser):
    """A text of HTML was sent as text: its tags' words were translated with it ("<p>Hallo
    <b>Die Weltwählungs..."); it is sent as HTML, its markup kept. Alternatives were asked for
    a text of any length: of a 5,000-character text, three buttons of the whole text again,
    and their decoding; they are asked for a short text only."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    Select(d.find_element(By.ID, "source")).select_by_value("en")
    Select(d.find_element(By.ID, "target")).select_by_value("de")
    d.execute_script(RECORD_SENT)
    box = d.find_element(By.ID, "q")

    def translate(text: str) -> dict:
        box.clear()
        box.send_keys(text, Keys.CONTROL, Keys.ENTER)
        wait(d, lambda d: translated(d) and d.execute_script("return window.sent.length"), text)
        wait(d, lambda d: d.execute_script("return window.sent.at(-1).q") == text, "the request")
        return d.execute_script("return window.sent.at(-1)")

    short = translate("Good morning.")
    assert short["format"] == "text" and short["alternatives"] == 3
    long = translate("Good morning. " * 16)  # 224 characters
    assert long["format"] == "text" and "alternatives" not in long
    wait(d, lambda d: not d.find_element(By.ID, "alternatives").is_displayed(), "no alternatives")
    html = translate("<p>Good <b>morning</b>.</p>")
    assert html["format"] == "html"
    out = value(d, "out")
    assert out.startswith("<p>") and out.endswith("</p>") and out.count("<b>") == 1, out


def test_a_busy_server_is_asked_again_after_the_wait_it_names(server, browser):
    """A 503 or 429 with a Retry-After said "retry in 1 s" and the page did nothing: the same
    text is sent again after that wait, and its translation shown."""
    d = browser
    wait(d, languages_loaded, "the language lists")
    busy_once(d, "the server is busy", {"Retry-After": "1"})
    d.find_element(By.ID, "q").send_keys("Good morning.", Keys.CONTROL, Keys.ENTER)
    error = d.find_element(By.ID, "error")
    wait(d, lambda d: error.text == "Error: the server is busy (retry in 1 s)", "the 503")
    wait(d, translated, "the translation sent again")
    assert not error.is_displayed()


def test_a_links_languages_are_chosen_and_the_download_says_how_long_it_is_kept(server, tmp_path):
    """`?source=de&target=en`, as LibreTranslate's page reads it, opened the page with "Detect
    language" and its own target; the download link said nothing of the file being dropped
    after MT_FILE_TTL_S (a click then downloaded nothing, without a word)."""
    d = chromium_driver()
    try:
        d.get(f"{server}/?source=de&target=en&q=ignored")
        wait(d, languages_loaded, "the language lists")
        assert (
            Select(d.find_element(By.ID, "source")).first_selected_option.get_attribute("value")
            == "de"
        )
        assert value(d, "target") == "en"
        assert value(d, "q") == ""  # the text is never taken from the URL
        send_notes(d, tmp_path)
        wait(d, lambda d: d.find_element(By.ID, "file-result").is_displayed(), "the link")
        assert d.find_element(By.ID, "download-note").text == "(kept for 30 minutes)"
        # past that time, a click says so instead of downloading nothing
        d.execute_script("Date.now = () => 1e15;")
        d.find_element(By.ID, "download").click()
        error = d.find_element(By.ID, "file-error")
        wait(d, lambda d: error.is_displayed(), "the file's error")
        assert "no longer kept" in error.text
    finally:
        d.quit()
