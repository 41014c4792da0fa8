"""Acceptance: the training job every server runs before handover, and its typed report.

``node/`` holds the files shipped to the node (``train_smoke.py`` under the stack's launcher,
``node_checks.py`` once per node); ``scripts`` renders the shell script that carries them;
``report`` reads their marker lines into an ``AcceptanceReport``; ``probe`` asks the estimator
for the memory of the plan's layout at reduced depth; ``simulated`` is what the simulated
driver answers.
"""
