"""How much a template *reads* like trouble, as a prior in [0, 1].

The cross-job filter decides what is unusual; this decides what is worth an SRE's attention
among unusual things, and keeps a job with no baseline diagnosable.  Words are grouped by
strength; benign phrasings that contain alarming words ("0 errors", "warning: deprecated")
are discounted.
"""

from __future__ import annotations

import re
from functools import lru_cache

_STRONG = re.compile(
    r"\b(?:fatal|panic|segmentation fault|core dumped|sig(?:kill|segv|abrt|bus)|bus error"
    r"|out of memory|oom|xid|ecc|uncorrectable|fallen off|fell off|illegal memory"
    r"|nan\b|inf\b|no space left|stale file|input/output error|read-only file system"
    r"|disk quota|killed|exitcode|exit code|exited with|non-zero status|core dump"
    r"|unhandled|aborted|abort\b|traceback|exception|watchdog|hccl.*error|nccl.*error"
    r"|ei\d{4}|ee\d{4}|eh\d{4}|el\d{4}|ej\d{4}|err\d{5}|cuda error|cudaerror|device-side"
    r"|hbm|aicore|preempt|evict|cancelled|canceled|node fail|drain)",
    re.I,
)
_MEDIUM = re.compile(
    r"\b(?:error|errno|failed|failure|fail|timeout|timed out|time out|unreachable|refused"
    r"|reset by peer|broken pipe|connection closed|lost|mismatch|not found|no such file"
    r"|corrupt|invalid|denied|terminat\w*|hang|stuck|retry|overflow|skipped)",
    re.I,
)
_WEAK = re.compile(r"\b(?:warn|warning|deprecat\w*|slow|straggler|waiting)", re.I)
_BENIGN = re.compile(
    r"\b(?:0 errors?|no errors?|errors?[=:] ?0\b|success\w*|completed?|ok\b|init complete"
    r"|skipped=0|warning: .*deprecat)",
    re.I,
)
_LEVEL_ERR = re.compile(r"(?:^|[\s\[|])(?:E|ERROR|CRITICAL|FATAL)(?:[\]\s|:]|$)")


@lru_cache(maxsize=65536)
def severity(template: str) -> float:
    """0 for routine lines, up to 1 for lines that name a failure outright."""
    score = 0.0
    if _STRONG.search(template):
        score = 1.0
    elif _MEDIUM.search(template) or _LEVEL_ERR.search(template):
        score = 0.6
    elif _WEAK.search(template):
        score = 0.15
    if score and _BENIGN.search(template) and score < 1.0:
        score *= 0.3
    return score


# Messages that a node logs because *another* node failed: collective timeouts, resets,
# launcher teardown.  They are real trouble but rarely the cause, so culprit search weighs
# them down (the paper's propagation problem).
_SYMPTOM = re.compile(
    r"(?:watchdog|timed? ?out|timeout|connection reset|reset by peer|broken pipe"
    r"|connection closed|connection refused|remote process exited|peer .*(?:closed|exited)"
    r"|childfailederror|sigterm|signal 15|received signal|sending process \d+ closing signal"
    r"|communicator was aborted|ncclremoteerror|remote error|heartbeat|socket timeout"
    r"|some nccl operations have failed|to avoid data inconsistency|taking the entire process down"
    r"|distbackenderror|waiting for|barrier|exitcode: 1\b|exit code 1\b|failed \(exitcode"
    r"|ei0002|notify wait|ei0006|getting socket times out|hccl.*timeout|ProcessGroupNCCL)",
    re.I,
)


@lru_cache(maxsize=65536)
def is_symptom(template: str) -> bool:
    """True for messages that usually echo another node's failure (see _SYMPTOM)."""
    return bool(_SYMPTOM.search(template))
