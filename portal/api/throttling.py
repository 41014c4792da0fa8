"""Requests per API key (per person for a session, per address without credentials) in a sliding
period, at a cost that does not grow with the limit.

DRF's SimpleRateThrottle keeps the time of every request of the last period in one cache entry
and reads, trims, pickles and writes the whole list on each request: up to 600 floats a request
at the default 600/min, tens of thousands at a high limit. bench/api_bench.py, which runs with a
limit that never bites, measured that at ~0.65 ms of a ~1.5 ms request. Here each client has two
counters, of this fixed period and of the one before, and the sliding period's count is estimated
the usual way ("sliding window counter"): every request of this period plus the previous
period's in proportion to the part of it still inside the sliding period. It allows at most the
limit in any one fixed period and, with requests spread evenly, in any sliding one. A refused
request is not counted. On the portal's Redis cache the check and the count are one atomic
script (one round trip); on another cache (the local memory of `make run`) a read and a write.
"""

from __future__ import annotations

import math
from functools import cache as once

import redis
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from portal.accounts.principals import ApiKeyPrincipal

# KEYS: this period's counter, the previous one's; ARGV: limit, share of the previous period still
# inside the sliding one, seconds to keep a counter. Returns {allowed, this period's, previous}.
SLIDING_WINDOW_HIT = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
if previous * tonumber(ARGV[2]) + current >= tonumber(ARGV[1]) then
  return {0, current, previous}
end
if redis.call('INCR', KEYS[1]) == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return {1, current + 1, previous}
"""


class PerKeyRateThrottle(SimpleRateThrottle):
    """The rate is `API_RATE_LIMIT`, e.g. `600/min`. Over it: 429 with `Retry-After`."""

    scope = "api"
    _wait: float | None = None  # seconds, when the request was refused

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # read now: settings may change

    def get_cache_key(self, request, view):
        user = request.user
        if isinstance(user, ApiKeyPrincipal):
            ident = f"key-{user.api_key.prefix}"
        elif user is not None and user.is_authenticated:
            ident = f"user-{user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        period, into = divmod(self.timer(), self.duration)
        keys = (f"{key}:{int(period)}", f"{key}:{int(period) - 1}")
        share = 1 - into / self.duration
        cache = caches["default"]
        allowed, current, previous = _hit(cache, keys, self.num_requests, share, 2 * self.duration)
        if not allowed:
            self._wait = wait_seconds(self.num_requests, self.duration, into, current, previous)
        return bool(allowed)

    def wait(self):
        # whole seconds, strictly after the moment the estimate reaches the limit again
        return None if self._wait is None else max(1, math.floor(self._wait) + 1)


def _hit(cache, keys: tuple[str, str], limit: int, share: float, keep_s: int) -> tuple[int, int, int]:
    if isinstance(cache, RedisCache):
        hit = _sliding_window_hit(settings.CACHES["default"]["LOCATION"])
        allowed, current, previous = hit(keys=[cache.make_and_validate_key(k) for k in keys],
                                         args=[limit, repr(share), keep_s])
        return allowed, current, previous
    counts = cache.get_many(keys)
    current, previous = counts.get(keys[0], 0), counts.get(keys[1], 0)
    if previous * share + current >= limit:
        return 0, current, previous
    cache.set(keys[0], current + 1, keep_s)  # not atomic: two requests at once may count as one
    return 1, current + 1, previous


@once
def _sliding_window_hit(location: str) -> redis.commands.core.Script:
    """The script on the cache's Redis (redis-py: EVALSHA, loaded on first use; its connection
    pool starts afresh in a forked process)."""
    return redis.Redis.from_url(location).register_script(SLIDING_WINDOW_HIT)


def wait_seconds(limit: int, duration: int, into: float, current: int, previous: int) -> float:
    """Seconds until a refused client's estimate falls below the limit (``into`` seconds into this
    period, with these counts), if it sends nothing meanwhile."""
    if current >= limit:  # not this period: in the next, once this period's share falls enough
        return duration - into + (duration * (1 - limit / current) if current else duration)
    # previous * (1 - t / duration) + current < limit, for t seconds into this period
    return duration * (1 - (limit - current) / previous) - into
