from django.core.management import call_command

PATHS = [
    "/api/v1/catalog", "/api/v1/estimates", "/api/v1/recommendations",
    "/api/v1/quotes", "/api/v1/quotes/{reference}",
    "/api/v1/orders", "/api/v1/orders/{reference}", "/api/v1/orders/{reference}/cancel",
    "/api/v1/orders/{reference}/terminate", "/api/v1/orders/{reference}/events",
    "/api/v1/orders/{reference}/server", "/api/v1/orders/{reference}/server/reboot",
    "/api/v1/orders/{reference}/server/redeploy",
    "/api/v1/orders/{reference}/server/storage/reveal", "/api/v1/orders/{reference}/server/storage/rotate",
    "/api/v1/orders/{reference}/server/stack-files", "/api/v1/orders/{reference}/server/metrics",
    "/api/v1/orders/{reference}/server/stack-files/{hostname}/{name}",
    "/api/v1/orders/{reference}/storage/read-only-key",
    "/api/v1/orders/{reference}/storage/read-only-key/reveal",
    "/api/v1/customers", "/api/v1/customers/{slug}", "/api/v1/customers/{slug}/invitations",
    "/api/v1/ssh-keys", "/api/v1/ssh-keys/{key_id}",
    "/api/v1/api-keys", "/api/v1/api-keys/{prefix}/revoke", "/api/v1/api-keys/{prefix}/rotate",
    "/api/v1/webhooks", "/api/v1/webhooks/{reference}", "/api/v1/webhooks/{reference}/rotate-secret",
    "/api/v1/webhooks/{reference}/test", "/api/v1/webhooks/{reference}/deliveries",
    "/api/v1/usage", "/api/v1/invoices", "/api/v1/invoices/{number}", "/api/v1/invoices/{number}/pdf",
]


def test_openapi_schema_validates_without_warnings(db, tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = out.read_text()
    listed = sorted(line.strip().rstrip(":") for line in schema.splitlines() if line.startswith("  /api/"))
    assert listed == sorted(p.strip() for p in PATHS)  # every path, and no other (no catch-all)


def test_the_quote_and_order_shapes_carry_no_notes_for_developers(db, tmp_path):
    """Their serializers' implementation notes (a mixin's docstring among them) would become the
    descriptions resellers read in the schema."""
    import yaml

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    components = yaml.safe_load(out.read_text())["components"]["schemas"]
    for name in ("OrderOutput", "QuoteOutput"):
        assert "description" not in components[name], components[name].get("description")
