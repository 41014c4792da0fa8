"""Django's Redis cache with one redis-py client per connection pool.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` for every cache call; each
build fills the client's table of ~170 response callbacks (docs/operations.md, "API
throughput"). A ``redis.Redis`` is a thin wrapper around its
connection pool (each command takes a connection from the pool; the pool starts afresh after a
fork), so one per pool serves every call. Pools are Django's own, made once per server by each
cache backend (Django keeps a backend per thread) and kept."""

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class PooledRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}  # id(pool) -> its client (pools are never dropped)

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class PooledRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = PooledRedisCacheClient
        self._scripts: dict[str, object] = {}

    def script(self, source: str):
        """A Lua script run on this cache's primary (redis-py's Script: EVALSHA, loaded on first
        use), for what the cache API cannot do in one round trip; keys as ``make_and_validate_key``
        makes them."""
        script = self._scripts.get(source)
        if script is None:
            client = self._cache.get_client(write=True)
            script = self._scripts.setdefault(source, client.register_script(source))
        return script
