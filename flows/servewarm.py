"""What a long-lived l4 process loads once, by being imported: ``l4 serve``'s forkserver
(:mod:`flows.servefork`) and ``l4 diagnose``'s warm process (:mod:`flows.warm`).

Every flow run that ``l4 serve`` starts is forked from the first, and every diagnosis the
second runs begins with all of this done: Prefect and the flows imported, the engine with scikit-learn and SciPy, the
HTML report, the numpy embedding model read from its package, and the indicator regexes of
the seed fault library compiled (the patterns an SRE added are compiled by the run that
first needs them).  Importing this module is its only use; it keeps no state of its own.

Nothing here may start a thread or open the knowledge base: a process is forked from this
one for every flow run, and a fork copies neither threads nor a safe DuckDB connection.
"""

from __future__ import annotations

import contextlib


def warm() -> None:
    """Import and compile what a diagnosis needs; each part is optional (a failure here
    only means that the flow run does it itself)."""
    import flows.diagnose  # noqa: F401
    import flows.learn  # noqa: F401
    import l4.chartdata  # noqa: F401
    import l4.engine  # noqa: F401
    import l4.htmlreport  # noqa: F401

    with contextlib.suppress(ImportError):
        import sklearn.ensemble  # noqa: F401 - the Isolation Forest of the spatial step
    with contextlib.suppress(Exception):
        from l4 import kbstore, rootcause

        for pattern in kbstore._seed()[1]:
            for indicator in pattern.get("indicators") or ():
                rootcause.template_regex(indicator)
    with contextlib.suppress(Exception):
        from l4.embed import get_model

        get_model("numpy")


warm()
