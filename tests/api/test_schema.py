from django.core.management import call_command


def test_openapi_schema_validates_without_warnings(db, tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = out.read_text()
    for path in ("/api/v1/quotes:", "/api/v1/quotes/{reference}:"):
        assert path in schema
