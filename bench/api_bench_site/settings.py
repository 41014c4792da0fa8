"""The portal's settings (from the environment, as always), with the bench's URLs."""

from portal.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_bench_site.urls"
