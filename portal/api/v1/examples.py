"""Request examples in the schema: what docs/api.md shows, and what the contract test sends
first (schemathesis' explicit phase), so every create is also tried with a body that works."""

from drf_spectacular.utils import OpenApiExample


def _example(name: str, value: dict) -> list[OpenApiExample]:
    return [OpenApiExample(name, value=value, request_only=True)]


ESTIMATE = _example("8B model on one 8-GPU server", {
    "model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb",
    "training": {"seq_len": 4096, "micro_batch": 1}, "parallel": {"dp": 8, "sharding": "zero3"}})
RECOMMENDATION = _example("A small job, cheapest", {
    "model": "gpt2-124m", "seq_len": 1024, "dataset_tokens": 100_000_000, "goal": "cheapest",
    "options": {"top_n": 1, "node_counts": [1]}})
QUOTE = _example("One L4 server with a bucket", {
    "sku": "1x-l4-24gb", "nvme": "nvme-1tb-single", "network": "eth-1g",
    "storage_provider": "minio", "storage_tb": 1})
ORDER = _example("Order an inline configuration", {"configuration": {"sku": "1x-l4-24gb"}})
CUSTOMER = _example("A new customer", {"name": "Deep Labs GmbH", "slug": "deep-labs"})
CUSTOMER_RENAME = _example("Rename", {"name": "Deep Labs AG"})
WEBHOOK = _example("All events", {"url": "https://shop.example.com/hooks/trainyard",
                                  "description": "storefront"})
WEBHOOK_UPDATE = _example("Only order events", {"event_types": ["order.state_changed", "server.ready"]})
CANCEL = _example("Cancel", {"reason": "The customer changed plans."})
TERMINATE = _example("Terminate", {"note": "Training finished."})
SSH_KEY = _example("An Ed25519 key", {
    "public_key": "ssh-ed25519 "
                  "AAAAC3NzaC1lZDI1NTE5AAAAIGhDOcDUwvIOFe2TmSbvyq6pqSBPlwE8LG4YEqOUVhZ9 ci@runner",
    "name": "ci runner"})
