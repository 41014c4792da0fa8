"""The portal as bench/api_bench.py serves it: its settings and URLs, plus one trivial endpoint."""
