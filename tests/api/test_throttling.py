"""Requests per key in a sliding minute: the limit's requests pass, the next is a 429 whose
Retry-After is exactly long enough; the previous minute counts in proportion to what of it is
still inside the sliding one; a refused request is not counted; a client's state is two counters
whatever its limit. On the portal's Redis cache (one script) and on local memory alike."""

import pytest
from django.core.cache import caches
from redis import Redis

from portal.api.throttling import PerKeyRateThrottle
from tests.api.conftest import assert_problem, key_client

URL = "/api/v1/quotes"


@pytest.fixture(params=["redis", "memory"])
def backend(request, settings):
    if request.param == "redis":
        request.getfixturevalue("require_redis")
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                       "LOCATION": settings.REDIS_URL, "KEY_PREFIX": "throttle-test"}}
    else:
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                       "LOCATION": "throttle-test"}}
    return request.param


@pytest.fixture
def clock(monkeypatch):
    now = [6_000_000.0]  # a period boundary for /min: 100,000 periods since the epoch
    monkeypatch.setattr(PerKeyRateThrottle, "timer", staticmethod(lambda: now[0]))
    return now


@pytest.fixture
def client(backend, clock, settings, people, catalog):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "3/min"}}
    return key_client(people.acme)


def _status(client) -> int:
    return client.get(URL).status_code


def _retry_after(client) -> int:
    response = client.get(URL)
    body = assert_problem(response, 429, "throttled")
    assert body["retry_after_seconds"] == int(response["Retry-After"])
    return int(response["Retry-After"])


def test_the_limit_passes_and_the_next_waits_until_the_minute_after(client, clock):
    clock[0] += 10
    assert [_status(client) for _ in range(3)] == [200, 200, 200]
    wait = _retry_after(client)
    assert wait == 51  # the period ends in 50 s; then its 3 requests count in full for an instant
    clock[0] += wait - 1
    assert _status(client) == 429
    clock[0] += 1
    assert _status(client) == 200


def test_the_previous_minute_counts_by_what_of_it_is_still_inside(client, clock):
    clock[0] += 50
    assert [_status(client) for _ in range(3)] == [200, 200, 200]
    clock[0] += 15  # 5 s into the next minute: 3 x 55/60 = 2.75 still inside
    assert _status(client) == 200  # 3.75 now
    wait = _retry_after(client)
    # the estimate falls below 3 when 3 x (1 - t/60) + 1 < 3: t > 20 s into the minute
    assert wait == 16
    clock[0] += wait - 1
    assert _status(client) == 429
    clock[0] += 1
    assert _status(client) == 200


def test_a_refused_request_is_not_counted_and_keys_are_counted_apart(client, clock, people):
    assert [_status(client) for _ in range(3)] == [200, 200, 200]
    assert [_status(client) for _ in range(20)] == [429] * 20
    other = key_client(people.acme)
    assert [_status(other) for _ in range(3)] == [200, 200, 200]
    clock[0] += 60 + 31  # 31 s into the next minute: 3 x 29/60 = 1.45 still inside
    assert [_status(client) for _ in range(3)] == [200, 200, 429]  # 20 refusals counted: kept out


def test_a_clients_state_is_two_counters_that_expire(backend, clock, settings, people, catalog):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "100000/min"}}
    client = key_client(people.acme)
    for _ in range(40):
        assert _status(client) == 200
    clock[0] += 60
    assert _status(client) == 200
    key = f"throttle_api_key-{client.api_key.prefix}"
    cache = caches["default"]
    counters = cache.get_many([f"{key}:100000", f"{key}:100001"])
    assert counters == {f"{key}:100000": 40, f"{key}:100001": 1}
    if backend == "redis":
        redis = Redis.from_url(settings.REDIS_URL)
        ttl = redis.ttl(cache.make_and_validate_key(f"{key}:100001"))
        assert 0 < ttl <= 120
        redis.delete(*[cache.make_and_validate_key(k) for k in counters])
