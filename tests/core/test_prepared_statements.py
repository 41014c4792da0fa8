"""On PostgreSQL the server binds the parameters and a statement is prepared after five uses on
a connection (settings, DB_PREPARED_STATEMENTS); it can be turned off for a pooler."""

import os
import subprocess
import sys

import pytest
from django.db import connection

from portal.accounts.models import Organisation
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_a_repeated_query_is_prepared_with_its_parameters_bound_by_the_server():
    for pk in range(1, 8):
        list(Organisation.objects.filter(pk=pk, slug="prepared-probe"))
    ours = [s for s in _prepared() if '"accounts_organisation"."slug" = $' in s]
    assert ours and not [s for s in ours if "prepared-probe" in s], _prepared()


def test_the_switch_turns_it_off_and_options_from_the_url_are_kept():
    code = ("import django; django.setup(); from django.db import connection; "
            "o = connection.settings_dict['OPTIONS']; "
            "print(o.get('prepare_threshold'), o['connect_timeout'])")
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "portal.settings",
                        "DATABASE_URL": f"{os.environ['DATABASE_URL']}?connect_timeout=7"}
    on, off = (subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env | switch,
                              capture_output=True, text=True)
               for switch in ({}, {"DB_PREPARED_STATEMENTS": "false"}))
    assert (on.stdout.strip(), off.stdout.strip()) == ("5 7", "None 7"), on.stderr + off.stderr
