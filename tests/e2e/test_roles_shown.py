"""Roles shown, not only enforced (issue 38 item 7, UI-2): a viewer is not offered forms or
buttons that the policy would refuse. Every admin page is walked as a viewer with real objects
behind it; a viewer may post only to sign out and to their own account."""

import re
from html.parser import HTMLParser
from pathlib import Path

from tests.e2e.test_roles import ui_routes
from tests.factories import make_settings
from tests.support.admin_ui import PASSWORD, composed_campaign, csrf_from, sign_in, ui_app
from tidings.domain.roles import Role, required_role

TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "tidings" / "ui" / "templates"
# What a viewer may post to: their own session and account (the same policy as the routes).
VIEWER_POSTS = ("/admin/sign-out", "/admin/sign-out-everywhere", "/admin/account")


class _Forms(HTMLParser):
    """The actions of the page's forms that post."""

    def __init__(self) -> None:
        super().__init__()
        self.posts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form" and (values.get("method") or "get").lower() == "post":
            self.posts.append(values.get("action") or "")


def _posting_forms(html: str) -> list[str]:
    parser = _Forms()
    parser.feed(html)
    return parser.posts


def test_the_viewers_own_posts_are_what_the_policy_allows_them() -> None:
    """The forms a viewer is still shown lead only where the policy lets a viewer post."""
    for path in VIEWER_POSTS:
        assert required_role("POST", path) is Role.VIEWER, path
    assert required_role("POST", "/admin/campaigns/1/send") is Role.EDITOR


def test_every_posting_form_in_the_templates_is_guarded_by_the_role() -> None:
    """A form added later without the `may(...)` guard fails here, whether or not a walked
    page happens to render it; only the sign-in steps and the operator's own account and
    session are exempt."""
    exempt = {"sign_in.html", "sign_in_code.html", "account.html"}
    unguarded = []
    for template in sorted(TEMPLATES.glob("*.html")):
        if template.name in exempt:
            continue
        text = template.read_text()
        for form in re.finditer(r'<form\b[^>]*method="post"[^>]*>', text):
            action = re.search(r'action="([^"]*)"', form.group(0))
            target = action.group(1) if action else ""
            if target.startswith(("/admin/sign-out", "{{ action }}")):
                continue  # sign-out is every operator's; the macro guards itself
            before = text[: form.start()]
            if not re.search(r"\{%-? if may\([^)]*\) -?%\}$", before):
                unguarded.append(f"{template.name}: {form.group(0)[:80]}")
    assert not unguarded, unguarded
    macros = (TEMPLATES / "macros.html").read_text()
    assert "{% if may(action) %}" in macros


async def test_a_viewer_walks_every_admin_page_and_is_offered_no_change(
    database_url: str,
) -> None:
    """Every GET page of the admin, with a newsletter, people, an import and a draft behind
    it: a viewer sees it (200) with no form that posts anywhere but their session and
    account; an editor on the same pages is still offered the campaign's forms."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        for role in (Role.OWNER, Role.EDITOR, Role.VIEWER):
            await container.admins.create(f"{role}@example.org", PASSWORD, role=role)
        owner = browser()
        assert (await sign_in(owner, "owner@example.org")).status_code == 303
        csrf = csrf_from(await owner.get("/admin"))
        campaign_url, campaign_id = await composed_campaign(owner, container, csrf, 3)
        started = await owner.post(
            "/admin/subscribers/import",
            data={"csrf_token": csrf, "newsletter": "weekly"},
            files={"file": ("people.csv", b"email\nada@example.org\n", "text/csv")},
        )
        assert started.status_code == 303, started.text
        run_id = started.headers["location"].rsplit("/", 1)[1]
        people = await owner.get("/admin/subscribers")
        subscriber_id = re.search(r'href="/admin/subscribers/(\d+)"', people.text)
        assert subscriber_id is not None
        values = {
            "current": "weekly",
            "campaign_id": str(campaign_id),
            "subscriber_id": subscriber_id.group(1),
            "run_id": run_id,
        }

        viewer = browser()
        assert (await sign_in(viewer, "viewer@example.org")).status_code == 303
        shown = []
        for method, template in ui_routes():
            if method != "GET" or not Role.VIEWER.allows(required_role(method, template)):
                continue
            path = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "987654"), template)
            answer = await viewer.get(path)
            assert answer.status_code in (200, 404), (path, answer.status_code)
            if answer.status_code != 200 or "text/html" not in answer.headers["content-type"]:
                continue
            shown.append(path)
            offered = [
                action
                for action in _posting_forms(answer.text)
                if not action.startswith(VIEWER_POSTS)
            ]
            assert not offered, (path, offered)
            # Nor a link or button to a page for making or changing something.
            editing_links = re.findall(
                r'href="(/admin/[^"?]*/(?:new|edit|delete|import|cancel))"', answer.text
            )
            assert not editing_links, (path, editing_links)
        # The pages with the most forms were really rendered, not skipped as missing.
        for expected in (
            "/admin",
            "/admin/newsletters",
            "/admin/newsletters/weekly",
            "/admin/subscribers",
            f"/admin/subscribers/{values['subscriber_id']}",
            f"/admin/subscribers/{values['subscriber_id']}/edit",
            f"/admin/subscribers/import/{run_id}",
            campaign_url,
            "/admin/campaigns",
            "/admin/webhooks",
            "/admin/jobs",
            "/admin/account",
        ):
            assert expected in shown, (expected, shown)

        editor = browser()
        assert (await sign_in(editor, "editor@example.org")).status_code == 303
        editing = _posting_forms((await editor.get(campaign_url)).text)
        assert f"/admin/campaigns/{campaign_id}/schedule" in editing
        webhooks = _posting_forms((await editor.get("/admin/webhooks")).text)
        assert not [action for action in webhooks if action.startswith("/admin/webhooks")]
