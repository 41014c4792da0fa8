"""The Redis cache keeps one redis-py client per connection pool (portal/core/cache.py)."""

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from portal.core.cache import PooledRedisCache


@pytest.fixture
def cache(require_redis, settings):
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    backend = PooledRedisCache(settings.REDIS_URL, {"KEY_PREFIX": prefix})
    yield backend
    # only this test's keys: clear() would FLUSHDB the database Celery's broker shares
    client = backend._cache.get_client(write=True)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


def test_many_cache_calls_build_one_client(cache, monkeypatch):
    built = []

    class Counted(redis.Redis):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(cache._cache, "_client", Counted)
    cache.set("history", [1.5, 2.5], 30)
    assert cache.get("history") == [1.5, 2.5]
    assert cache.add("history", [9], 30) is False
    assert cache.get_or_set("n", 1, 30) == 1
    assert cache.incr("n") == 2
    cache.delete("history")
    assert cache.get("history", "gone") == "gone"
    assert len(built) == 1


def test_threads_share_the_client_and_each_reads_its_own_keys(cache):
    def work(i: int) -> list:
        seen = []
        for n in range(20):
            cache.set(f"k{i}", (i, n), 30)
            seen.append(cache.get(f"k{i}"))
        return seen

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    assert results == [[(i, n) for n in range(20)] for i in range(8)]
    assert len(cache._cache._clients) == 1  # one client served all eight threads


def test_the_portal_uses_it_when_redis_is_configured(require_redis):
    from django.core.cache import caches

    assert isinstance(caches["default"], PooledRedisCache)
