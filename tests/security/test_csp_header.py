"""Every page carries a Content-Security-Policy of this origin only, and no template has an
inline script, style element, style attribute or event-handler attribute it would block."""

import re

import pytest

from tests.conftest import REPO_ROOT

INLINE = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|"
                    r"hx-on|javascript:", re.IGNORECASE)


@pytest.mark.parametrize("url", ["/catalog/", "/accounts/login/", "/sizing/"])
def test_pages_send_a_self_only_policy(client, catalog, url):
    policy = client.get(url)["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_no_template_has_inline_script_or_style():
    offenders = []
    for path in sorted((REPO_ROOT / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if INLINE.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)


def test_the_favicon_is_linked_and_served(client, catalog):
    html = client.get("/catalog/").content.decode()
    match = re.search(r'<link rel="icon" href="([^"]+)"', html)
    assert match and match.group(1).endswith("favicon.svg")
    assert (REPO_ROOT / "static" / "img" / "favicon.svg").read_text().startswith("<svg")
