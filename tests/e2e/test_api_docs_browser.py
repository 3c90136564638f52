"""The API reference at /docs in a real browser with no internet (issue 13, item 1)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.factories import api_client, make_settings
from tests.support.browser import OfflinePage
from tests.support.cli import Served


@pytest.mark.slow
def test_docs_page_lists_the_endpoints_with_the_network_cut_off(
    live_server: Served, offline_page: OfflinePage
) -> None:
    """Operators open /docs on servers and laptops without internet access; Swagger UI loaded
    from a CDN is a blank page there, so its assets must come from the server itself."""
    page = offline_page.page
    page.goto(f"{live_server.base_url}/docs")
    operations = page.locator(".opblock-summary-path")
    expect(operations.first).to_be_visible(timeout=20_000)
    paths = {text.strip().replace("\u200b", "") for text in operations.all_inner_texts()}
    assert {"/api/admin/subscribers", "/api/admin/campaigns", "/readyz"} <= paths
    expect(page.locator(".info .title")).to_contain_text("tidings")
    assert offline_page.blocked == []


async def test_docs_assets_are_served_by_tidings(sqlite_url: str) -> None:
    """The page must name only assets tidings itself serves: one CDN reference is enough to
    break /docs offline again (this half needs no browser)."""
    async with api_client(make_settings(sqlite_url)) as (client, _):
        for page in ("/docs", "/redoc"):
            html = (await client.get(page)).text
            assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", html)
            assert assets, html
            for asset in assets:
                assert asset.startswith("/docs/assets/"), asset
                assert (await client.get(asset)).status_code == 200, asset
