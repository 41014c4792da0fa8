"""The provisioning pipeline: ``engine`` claims, leases, runs and records one step of a run;
``steps`` holds what each step does (one function each, with its typed result); ``context`` is
what a step works with. Shell text lives in ``provisioning.stack``."""
