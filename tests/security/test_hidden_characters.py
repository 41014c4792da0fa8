"""Names people type are read by others (staff pages, the reseller's lists): invisible and
direction-changing characters are refused with a message naming them, in every form people fill
in and in every string of an API body; nothing is stored (issue 28). The rule is
portal.core.text."""

import importlib
import inspect
import pkgutil

import pytest
from django import forms

import portal
import provisioning
from portal.accounts.models import ApiKey, Organisation, SSHKey
from portal.core.forms import VisibleTextMixin
from portal.core.text import hidden_characters, hidden_text_problem
from portal.webhooks.models import WebhookEndpoint
from provisioning.models import Node
from tests.accounts.ssh_keygen import new_public_key
from tests.api.conftest import assert_problem, key_client

HIDDEN = ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d",
          "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u2060", "\ufeff", "\u00ad", "\u061c",
          "\u2028", "\u2029", "\ue000"]


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_each_hidden_character_is_named(char):
    problem = hidden_text_problem(f"invoice{char}fdp.exe")
    assert f"U+{ord(char):04X}" in problem and problem.startswith("Remove the invisible")


def test_ordinary_names_in_any_script_are_fine():
    for name in ("Acme AI GmbH", "Zürich Labs", "東京 GPU", "مختبر", "Ελληνικά", "O'Brien & Co.",
                 "a-b_c.d (e) 42 €"):
        assert hidden_characters(name) == [], name


def test_tabs_and_line_breaks_only_in_multi_line_text():
    assert hidden_characters("a\tb") == ["U+0009 TAB"]
    assert hidden_characters("a\nb", multiline=True) == []
    assert hidden_characters("a\u202eb\nc", multiline=True) == ["U+202E RIGHT-TO-LEFT OVERRIDE"]


def _forms_of_the_portal():
    for package in (portal, provisioning):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if ".estimator" in info.name or ".recommend" in info.name or ".migrations" in info.name:
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if (issubclass(cls, forms.BaseForm) and cls.__module__ == info.name
                        and not cls.__name__.startswith("_")):
                    yield cls


def test_every_form_people_fill_in_refuses_them():
    found = list(_forms_of_the_portal())
    assert len(found) >= 15
    missing = [f"{cls.__module__}.{cls.__name__}" for cls in found if not issubclass(cls, VisibleTextMixin)]
    assert not missing, missing


# --- the API: any string of a body -------------------------------------------------------------
RLO = "\u202e"


@pytest.fixture
def reseller(catalog, people):
    return key_client(people.reseller)


def test_api_names_are_refused_naming_the_field(people, reseller):
    cases = [
        ("post", "/api/v1/customers", {"name": f"Deep{RLO}Labs"}, "name"),
        ("patch", f"/api/v1/customers/{people.client_org.slug}", {"name": f"Resale{RLO}Client"}, "name"),
        ("post", "/api/v1/api-keys", {"name": f"store{RLO}front"}, "name"),
        ("post", "/api/v1/ssh-keys", {"public_key": new_public_key(), "name": "lap\u200btop"}, "name"),
        ("post", "/api/v1/ssh-keys", {"public_key": new_public_key(comment="alice\u2066@laptop")},
         "public_key"),
        ("post", "/api/v1/webhooks", {"url": "https://hooks.example.com/in",
                                      "description": f"shop{RLO}"}, "description"),
        ("post", "/api/v1/quotes", {"sku": "1x-l4-24gb", "storage_provider": "custom-s3",
                                    "storage_custom": {"endpoint_url": "https://s3.example.com",
                                                       "bucket": "b\ufeffucket", "access_key_id": "AKIA",
                                                       "secret_key": "s"}}, "storage_custom"),
    ]
    before = (Organisation.objects.count(), ApiKey.objects.count(), SSHKey.objects.count(),
              WebhookEndpoint.objects.count(), sorted(Organisation.objects.values_list("name", flat=True)))
    for method, path, body, field in cases:
        problem = assert_problem(getattr(reseller, method)(path, body, format="json"), 400)
        assert field in problem["errors"], (path, problem)
        assert "Remove the invisible or direction-changing characters" in str(problem["errors"]), problem
    after = (Organisation.objects.count(), ApiKey.objects.count(), SSHKey.objects.count(),
             WebhookEndpoint.objects.count(),
             sorted(Organisation.objects.values_list("name", flat=True)))
    assert after == before


def test_a_line_break_in_an_api_name_is_refused(reseller):
    problem = assert_problem(reseller.post("/api/v1/customers", {"name": "Deep\nLabs"}, format="json"), 400)
    assert "U+000A LINE FEED" in str(problem["errors"]["name"])


# --- pages --------------------------------------------------------------------------------------
def test_page_forms_refuse_them_inline(login, people, settings, catalog):
    client = login(people.alice)
    response = client.post(f"/orgs/{people.acme.slug}/", {"name": f"billing{RLO}sync",
                                                          "scopes": ["read"]})
    assert "Remove the invisible" in response.content.decode() and not ApiKey.objects.exists()
    response = client.post("/account/ssh-keys/", {"public_key": new_public_key(), "name": f"x{RLO}y"})
    assert response.status_code == 400 and "U+202E" in response.content.decode()
    assert not SSHKey.objects.exists()
    client.logout()
    settings.SIGNUP_ENABLED = True
    response = client.post("/account/signup/", {
        "organisation_name": f"Evil{RLO}Corp", "first_name": "Eve", "email": "eve@example.org",
        "username": "eve", "password": "a-long-passphrase-42", "password_again": "a-long-passphrase-42"})
    assert response.status_code == 400 and "U+202E" in response.content.decode()
    assert not Organisation.objects.filter(name__contains=RLO).exists()


def test_staff_node_names_refuse_them(login, people, catalog):
    from portal.catalog.models import ServerSKU

    olga = login(people.olga)
    form = {"hostname": "gpu-a01", "sku": ServerSKU.objects.get(slug="1x-l4-24gb").pk,
            "management_address": "10.0.0.9", "driver": "simulated", "notes": "rack 4",
            "wipe_method": "files",
            "fabric_group": f"leaf{RLO}1"}
    response = olga.post("/ops/nodes/enrol/", form)
    assert "U+202E" in response.content.decode() and not Node.objects.exists()
    olga.post("/ops/nodes/enrol/", form | {"fabric_group": "leaf-1"})
    assert Node.objects.get().fabric_group == "leaf-1"  # the same form, fine without it
