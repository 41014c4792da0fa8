"""Fulfilment of orders: what happens when an order moves (approval, cancellation, termination),
day-2 actions, SSH-key sync, what is billable, and the reads of an order's progress and access."""
