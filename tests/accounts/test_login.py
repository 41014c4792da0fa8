from django.core import mail

from tests.factories import UserFactory


def test_login_then_logout(client, db):
    UserFactory(username="alice")
    response = client.post("/accounts/login/", {"username": "alice",
                                                "password": "correct-horse-battery"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302  # anonymous home goes to the catalog


def test_wrong_password_shows_an_error_and_keeps_you_out(client, db):
    UserFactory(username="alice")
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_password_reset_sends_a_link(client, db):
    UserFactory(username="alice", email="alice@example.com")
    response = client.post("/accounts/password_reset/", {"email": "alice@example.com"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    assert "/accounts/reset/" in mail.outbox[0].body
