def test_healthz_reports_database_broker_and_worker(client, db):
    response = client.get("/healthz")
    body = response.json()
    assert set(body) == {"database", "broker", "worker", "status"}
    assert body["database"] == "ok"
    assert response.status_code == (200 if body["broker"] == "ok" else 503)
