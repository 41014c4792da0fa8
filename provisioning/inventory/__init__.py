"""The node inventory: nodes, enrolment and import from an imaging engine, allocation to orders
(the only owner of "ready nodes per SKU"), the clean baseline and the hand-back attestation, power
requests and pinned host keys."""
