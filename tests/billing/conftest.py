import pytest

from portal.billing import spend


@pytest.fixture
def queued(monkeypatch):
    """Spend alerts queued for e-mail, recorded instead of sent to the broker."""
    sent = []
    monkeypatch.setattr(spend.spend_alert_notify_task, "delay", sent.append)
    return sent
