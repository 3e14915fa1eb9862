"""How the page is served (no browser needed): files from the package, a browser at the root
sent to /ui/, nothing else reachable, nothing added to the API's OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser import CHROMIUM, require_browser
from harness import RunningServer

import threadline.server

WEB = Path(threadline.server.__file__).parent / "web"


@pytest.fixture
def http(served: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url) as client:
        yield client


def test_the_page_and_its_files_come_from_the_server(http: httpx.Client) -> None:
    page = http.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in sorted(p.name for p in WEB.iterdir()):
        got = http.get(f"/ui/{name}")
        assert got.status_code == 200, name
        assert got.content == (WEB / name).read_bytes()
    assert http.get("/ui/app.js").headers["content-type"].startswith(
        "text/javascript"
    )
    assert "https://" not in (WEB / "index.html").read_text()  # no CDN: works offline


def test_a_browser_at_the_root_goes_to_the_page(http: httpx.Client) -> None:
    browser = http.get("/", headers={"accept": "text/html,*/*"})
    assert browser.status_code == 307 and browser.headers["location"] == "/ui/"
    assert http.get("/ui").headers["location"] == "/ui/"
    api_client = http.get("/", headers={"accept": "application/json"})
    assert api_client.status_code == 404 and "/ui/" in api_client.json()["detail"]


@pytest.mark.parametrize("name", ["nothing.js", "..%2Fapp.py", ".hidden.js", "app.py", "web"])
def test_only_the_page_files_are_served(http: httpx.Client, name: str) -> None:
    assert http.get(f"/ui/{name}").status_code == 404


def test_the_page_is_not_part_of_the_api_document(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p == "/" or p.startswith("/ui")]


def test_a_missing_browser_skips_locally_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("browser.CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        require_browser()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_browser()
    assert CHROMIUM.name == "chromium"
