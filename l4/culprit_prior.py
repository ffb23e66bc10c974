"""What the shape of a diagnosis says about who owns the fault.

The category classifier reads the report's lines.  When the culprit said nothing of its
own, the only lines are its victims' collective timeouts and teardown, which read like
the network or the scheduler (platform).  But the engine knows more than the lines: the
node was singled out *structurally* (it stopped first, slowed first, went quiet while the
others waited for it, was named by its peers or by the scheduler) in the middle of the
training loop.  A node that goes silent inside a healthy loop is, on production fleets,
mostly a hardware fault: a hung or throttled GPU, a lost node, a failing link (Meta's
Llama 3 report attributes about four in five unexpected interruptions to hardware; GPU
hangs and lost nodes lead).  Start-up failures are not included: there a silent node is
as often a missing rendezvous peer or a scheduler's doing.

So such a diagnosis multiplies the hardware probability by ``SILENT_HARDWARE_ODDS``
(product of experts; renormalised, order re-sorted).  The lines' own vote is flattened
first (``p ** ECHO_WEIGHT``): all the lines there are come from the victims, and how
confidently a collective timeout or a cancelled step reads as the network or the
scheduler says nothing about who owns a fault that struck elsewhere.  At full weight
(1.0) such echoes outvoted the structural evidence in most silent-culprit jobs of the
development sets (a hung GPU, a straggler, a lost node read as platform).  A culprit
whose own error says what went wrong (``specific`` at or above ``SILENT_BELOW``) is left
to the classifier.

The evaluation loop is the other way round: the same nodes had run the training loop's
collectives without trouble, and what differs in evaluation is its own code and data, so
a node that goes quiet there and leaves the others waiting points to the user (ranks that
run out of evaluation batches at different steps are the classic case):
``SILENT_EVAL_USER_ODDS``, the same size as the hardware odds for want of fleet figures.
"""

from __future__ import annotations

from collections.abc import Sequence

#: a top node whose own unusual lines score below this (of a clear lone cause) said nothing
SILENT_BELOW = 0.35
#: prior odds of hardware for a silent culprit in the training loop
SILENT_HARDWARE_ODDS = 3.0
#: prior odds of the user for a silent culprit in the evaluation loop: the same nodes ran the
#: training loop's collectives without trouble, and what differs in evaluation is its own
#: code and data (ranks that run out of evaluation batches at different steps and leave the
#: others waiting in a collective are the classic case)
SILENT_EVAL_USER_ODDS = 3.0
#: how much the report's lines count when its culprit is silent (1: as much as the prior's
#: odds say; below 1 the victims' echoes, all the lines there are, are flattened)
ECHO_WEIGHT = 0.3
#: the structural evidence that singled the node out without a line of its own
STRUCTURAL = ("missing_symptom", "stopped_first", "first_to_stop", "slowed_first", "named",
              "named_by_peers", "odd_measurements")
LOOP = ("training", "evaluation")
#: which team a silent culprit's stage points to, and by how much
SILENT_ODDS = {"training": ("hardware", SILENT_HARDWARE_ODDS), "evaluation": ("user", SILENT_EVAL_USER_ODDS)}


def silent_culprit(report: dict) -> bool:
    """Was the report's top node singled out in the training loop by what it did (stopped,
    slowed, went quiet, was named) rather than by an error line of its own?"""
    nodes = report.get("nodes") or []
    if report.get("stage") not in LOOP or not nodes or not isinstance(nodes[0], dict):
        return False
    ev = nodes[0].get("evidence") or {}
    try:
        if float(ev.get("specific") or 0.0) >= SILENT_BELOW:
            return False
        return any(float(ev.get(k) or 0.0) > 0 for k in STRUCTURAL)
    except (TypeError, ValueError):
        return False


def apply_prior(categories: Sequence[dict], report: dict) -> list[dict]:
    """``categories`` (all four, best first, confidences summing to one) with the silent
    culprit's hardware odds applied when the report has one; unchanged otherwise."""
    cats = [dict(c) for c in categories]
    if not cats or not silent_culprit(report):
        return cats
    team, odds = SILENT_ODDS[report["stage"]]
    for c in cats:
        # the lines are the victims' echoes: weak evidence of the owner (ECHO_WEIGHT)
        c["confidence"] = max(float(c["confidence"]), 1e-4) ** ECHO_WEIGHT
        if c.get("category") == team:
            c["confidence"] = float(c["confidence"]) * odds
    total = sum(float(c["confidence"]) for c in cats) or 1.0
    for c in cats:  # as l4.category.predict: never exactly 0 or 1
        c["confidence"] = round(min(max(float(c["confidence"]) / total, 1e-4), 0.9999), 4)
    return sorted(cats, key=lambda c: -c["confidence"])
