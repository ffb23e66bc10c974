"""Prefect orchestration of l4: thin flows over the library's plain functions.

* ``diagnose`` — the ``diagnose-job`` flow (and ``diagnose_job_cli`` behind ``l4 diagnose``)
* ``learn`` — the ``learn-normal`` flow
* ``tasks`` / ``parsing`` — the tasks, and per-node parsing mapped and cached by file identity
* ``events`` / ``serve`` — the ``l4.training.job.*`` events and the deployments they trigger
* ``artifacts`` — the report as Prefect artifacts
* ``settings`` — ``L4_*`` orchestration settings

Importing this package does not import Prefect; its modules do.
"""
