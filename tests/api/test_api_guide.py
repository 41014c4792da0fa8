"""docs/api.md as a reader runs it (issue 29, item 18): every create call sends an
Idempotency-Key from a command that exists (no uuidgen, which curl would turn into no header),
cross-references name the right section, the poll example's date finds the demo's orders, and it
says where development e-mails go."""

import re
from pathlib import Path

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")


def test_no_command_that_may_be_missing():
    assert "$(uuidgen)" not in GUIDE
    assert "new_key()" in GUIDE


def test_section_references_point_at_their_sections():
    sections = dict((title.split(":")[0].strip().lower(), number) for number, title in
                    re.findall(r"^## (\d+)\. (.+)$", GUIDE, flags=re.M))
    assert "webhooks (section 7)" in GUIDE and sections["webhooks"] == "7"
    assert "(step 8)" not in GUIDE


def test_the_poll_example_is_not_a_date_in_the_future():
    assert "created_after=2027" not in GUIDE


def test_it_says_where_development_emails_go():
    assert "console" in GUIDE and "EMAIL_BACKEND" in GUIDE
