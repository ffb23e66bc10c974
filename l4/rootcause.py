"""Match a diagnosis against the fault-pattern library to suggest root causes.

Two kinds of evidence are combined per pattern:

* semantic: cosine similarity (computed in DuckDB with ``array_cosine_similarity``)
  between the masked text of each indicator event and each indicator of the pattern,
  best pair wins;
* exact: error codes shared by the events and the pattern (Xid numbers, Ascend codes,
  errno names, NCCL error names, signals, IB completion status ...), weighted by how
  specific the code is in the library, and pattern indicators that match an event as
  wildcard templates.

They are combined as ``1 - (1 - semantic) * (1 - code) * (1 - template)`` so a literal
match always lifts a pattern above one that is only vaguely similar, while the ranking
among patterns with the same evidence still follows the embedding.  Patterns below
``THRESHOLD`` are not reported: the caller says "no known pattern" instead of guessing.

Independently of that threshold every match also ranks the four categories
(``l4.category``): a classifier trained on the library and on confirmed diagnoses,
combined with the matcher's best score per category, so a report names whom to hand the
failure to even when no pattern is close enough to be suggested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from l4 import category as cat
from l4 import kbstore
from l4.embed import embed, mask_text, model_name
from l4.severity import is_teardown

# Calibrated with benchmarks/kb_accuracy.py on the seed-side (training) excerpts and the
# normal excerpts of real-failures.jsonl; see README "Fault knowledge base".
THRESHOLD = 0.60
NO_MATCH = "no known pattern"

SEM_SCALE = 0.90  # semantic evidence alone never reaches the top of the scale
WHOLE_WEIGHT = 0.90  # the title+description vector is a weaker signal than an indicator
PLAIN_FACTOR = 0.70  # a line without any error word or code is weak evidence of a fault
CODE_STRENGTH = 0.70  # bonus of one code that only this pattern carries
TEMPLATE_BONUS = 0.45  # bonus of an indicator matching literally (as a wildcard template)
SYMPTOM_FACTOR = 0.90  # a cause with exact evidence outranks a symptom next to it
EVENT_DECAY = 0.01  # later (less suspicious) report events weigh slightly less
MAX_UNITS = 200
# Rare-token evidence (hybrid pattern score), chosen on leave-one-source-out pattern top-1
# and the silence on normal excerpts (benchmarks/kb_accuracy.py), never on held-out data.
RARE_WEIGHT = 0.8  # bonus of saturated rare-token evidence (0: embedding and codes only)
RARE_SCALE = 8.0  # summed IDF at which the evidence reaches 1 - 1/e
RARE_BIGRAMS = False  # word pairs are tokens too
RARE_WORDS = False  # plain words of the lines that state a fault are tokens too
RARE_MIN_IDF = 2.5  # a token in more than N * exp(-RARE_MIN_IDF) patterns does not count
#: whose identifiers count as rare evidence for a pattern: "event" = those of the events
#: (a report's event: its template and examples; an excerpt given to ``kb match`` is one)
#: whose lines read most like the pattern (its best line, and any line within
#: RARE_LINE_MARGIN of that similarity); "line" = those lines' own; "job" = every line
#: of the query pooled.  Pooled over a report, lines of different events that are each
#: benign made a match together: a launcher's "main.py FAILED" and the "local_rank: 0"
#: of its exit summary named the pattern of a script that rejects --local_rank
#: (2026-12-05, third generator development jobs).
RARE_SCOPE = "event"
RARE_LINE_MARGIN = 0.10

# --- exact evidence: error codes ------------------------------------------------------------

# errno names are upper case ("EIO"): a host named eio-0 names no error
_CODE_RULES: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"\bXid\s*(?:\([^)]*\))?\s*:?\s*(\d{1,3})\b", re.I), "XID{0}"),
    (re.compile(r"\b(E[A-Z]\d{4}|ERR\d{5})\b"), "{0}"),
    (re.compile(r"(?:error code is|runtime result =|error code =|ret(?:Code)?\s*=)\s*(\d{6})\b", re.I), "ACL{0}"),
    (re.compile(r"\b(50\d{4}|10\d{4})\b(?=.{0,40}(?:NPU|acl|aclrt|rt[A-Z]))"), "ACL{0}"),
    (re.compile(r"\bNo space left on device\b|(?-i:\bENOSPC\b)|Errno 28\b|StorageFull", re.I), "ENOSPC"),
    (re.compile(r"\bInput/output error\b|(?-i:\bEIO\b)|Errno 5\b", re.I), "EIO"),
    (re.compile(r"\bStale file handle\b|(?-i:\bESTALE\b)|Errno 116\b", re.I), "ESTALE"),
    (re.compile(r"\bDisk quota exceeded\b|(?-i:\bEDQUOT\b)|Errno 122\b", re.I), "EDQUOT"),
    (re.compile(r"\bCannot allocate memory\b|(?-i:\bENOMEM\b)", re.I), "ENOMEM"),
    (re.compile(r"\bNetwork is unreachable\b|(?-i:\bENETUNREACH\b)", re.I), "ENETUNREACH"),
    (re.compile(r"\bConnection refused\b|(?-i:\bECONNREFUSED\b)", re.I), "ECONNREFUSED"),
    (re.compile(r"\bConnection reset by peer\b|(?-i:\bECONNRESET\b)", re.I), "ECONNRESET"),
    (re.compile(r"\bBroken pipe\b|(?-i:\bEPIPE\b)", re.I), "EPIPE"),
    (re.compile(r"\bAddress already in use\b|(?-i:\bEADDRINUSE\b)|errno:? 98\b", re.I), "EADDRINUSE"),
    (re.compile(r"\bRead-only file system\b|(?-i:\bEROFS\b)", re.I), "EROFS"),
    (re.compile(r"\b(nccl(?:Remote|System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error)\b"), "{0}"),
    (re.compile(r"remote process exited or there was a network error", re.I), "ncclRemoteError"),
    (re.compile(r"unhandled system error", re.I), "ncclSystemError"),
    (re.compile(r"unhandled cuda error", re.I), "ncclUnhandledCudaError"),
    (re.compile(r"NCCL error.{0,80}invalid usage|ncclInvalidUsage", re.I), "ncclInvalidUsage"),
    (re.compile(r"NCCL error.{0,80}invalid argument", re.I), "ncclInvalidArgument"),
    (re.compile(r"NCCL error.{0,80}internal error", re.I), "ncclInternalError"),
    (re.compile(r"exit\s*code\s*[:=]?\s*-9\b|return code\s*=\s*-9\b|Signal 9\b|\bSIGKILL\b|signal: killed", re.I), "SIGKILL"),
    (re.compile(r"exit\s*code\s*[:=]?\s*-11\b|return code\s*=\s*-11\b|Signal 11\b|\bSIGSEGV\b|Segmentation fault", re.I), "SIGSEGV"),
    (re.compile(r"exit\s*code\s*[:=]?\s*-7\b|signal 7\b|\bSIGBUS\b|Bus error", re.I), "SIGBUS"),
    (re.compile(r"exit\s*code\s*[:=]?\s*-6\b|Signal 6\b|\bSIGABRT\b", re.I), "SIGABRT"),
    # the elastic agent names the signal by number ("got signal: 15", "Received 1 death
    # signal") or by name; the number is masked away for the embedding and the templates,
    # so it must be a code: SIGHUP (a closed terminal) is not SIGTERM (a scheduler's cancel)
    (re.compile(r"\bgot signal:?\s*(\d{1,2})\b|\bReceived (\d{1,2}) death signal", re.I), "SIGNUM{0}"),
    (re.compile(r"\bSignals\.(SIG[A-Z]{2,6})\b|\bclosing signal (SIG[A-Z]{2,6})\b"), "{0}"),
    (re.compile(r"\b(SIG(?:TERM|HUP|INT))\b"), "{0}"),
    (re.compile(r"\bstatus\s*=\s*(\d{1,2})\b(?=.{0,60}vendor err)|with error (\d{1,2}), opcode", re.I), "IBV_WC_STATUS{0}"),
    (re.compile(r"(?:CUDA|cuda runtime) error.{0,20}out of memory|CUDA out of memory|OutOfMemoryError", re.I), "CUDA_OOM"),
    (re.compile(r"NPU out of memory", re.I), "NPU_OOM"),
    (re.compile(r"uncorrectable ECC error", re.I), "CUDA_ECC_UNCORRECTABLE"),
    (re.compile(r"an illegal memory access was encountered", re.I), "CUDA_ILLEGAL_ADDRESS"),
    (re.compile(r"unspecified launch failure", re.I), "CUDA_LAUNCH_FAILURE"),
    (re.compile(r"system not yet initialized|cudaErrorSystemNotReady", re.I), "CUDA_SYSTEM_NOT_READY"),
    # more of CUDA's own error strings (cudaGetErrorString): the same name whatever wraps it
    (re.compile(r"misaligned address", re.I), "CUDA_MISALIGNED_ADDRESS"),
    (re.compile(r"CUDA-capable device\(s\) is/are busy or unavailable", re.I), "CUDA_DEVICES_UNAVAILABLE"),
    (re.compile(r"an illegal instruction was encountered", re.I), "CUDA_ILLEGAL_INSTRUCTION"),
    (re.compile(r"uncorrectable NVLink error", re.I), "CUDA_NVLINK_UNCORRECTABLE"),
    (re.compile(r"invalid device ordinal", re.I), "CUDA_INVALID_DEVICE"),
    (re.compile(r"no kernel image is available for execution", re.I), "CUDA_NO_KERNEL_IMAGE"),
    (re.compile(r"the launch timed out and was terminated", re.I), "CUDA_LAUNCH_TIMEOUT"),
    (re.compile(r"\b((?:CUBLAS|CUDNN)_STATUS_[A-Z_]+)\b"), "{0}"),
    (re.compile(r"CUDA error: unknown error", re.I), "CUDA_UNKNOWN_ERROR"),
    (re.compile(r"device-side assert(?:ion)? triggered", re.I), "CUDA_DEVICE_ASSERT"),
    (re.compile(r"CUDA driver version is insufficient|driver version is insufficient", re.I), "CUDA_DRIVER_INSUFFICIENT"),
    (re.compile(r"no CUDA-capable device is detected|No CUDA GPUs are available", re.I), "CUDA_NO_DEVICE"),
    (re.compile(r"fallen off the bus", re.I), "XID79"),
    (re.compile(r"DUE TO PREEMPTION", re.I), "SLURM_PREEMPTED"),
    (re.compile(r"DUE TO NODE FAIL", re.I), "SLURM_NODE_FAIL"),
    (re.compile(r"DUE TO TIME LIMIT", re.I), "SLURM_TIME_LIMIT"),
    (re.compile(r"\boom[-_]kill\b|oom_kill event|Out of memory: Killed process|killed by the cgroup out-of-memory", re.I), "OOM_KILL"),
    (re.compile(r"Heartbeat Lost", re.I), "HCCL_HEARTBEAT_LOST"),
    (re.compile(r"\b(?:lm loss|loss|grad[_ ]?norm)['\"]?\s*[:=]\s*['\"]?nan\b|found NaN|"
                r"\bLoss is NaN|nan iterations:\s*[1-9]", re.I), "NAN_VALUE"),
    (re.compile(r"Attempted loss scale: 1(?:\.0)?, reducing to 1(?:\.0)?\b|loss scale already at minimum|"
                r"reducing loss scale to 1(?:\.0)?\b(?!\d)|loss scale reached minimum", re.I), "LOSS_SCALE_MIN"),
    (re.compile(r"\b(UCE ERROR|HBM MULTI BIT ECC ERROR|HCCS LINK ERROR|SUSPECT REMOTE ERROR|SUSPECT MEM ERROR)\b"), "NPU_{0}"),
]


_SIGNALS = {"1": "SIGHUP", "2": "SIGINT", "6": "SIGABRT", "7": "SIGBUS", "9": "SIGKILL",
            "11": "SIGSEGV", "15": "SIGTERM"}
# Codes of one family that exclude each other: each names one thing that went wrong (a
# signal, an Xid, Slurm's reason for a cancel, NCCL's result), so a pattern whose
# indicators name Xid 79, SIGHUP or NCCL's "invalid argument" is contradicted by a query
# that names only other Xids, other signals or another NCCL result ("unhandled system
# error").
CONFLICT_FAMILIES = ("SIG", "XID", "SLURM_", "nccl")
# ... except codes that name the same kind of trouble: NCCL has reported the same misuse
# (a library or version mismatch) as "invalid usage" in one release, "invalid argument" in
# another
_CONFLICT_ALIKE = {"ncclInvalidArgument": "ncclInvalidUsage"}
CONFLICT_FACTOR = 0.75  # score of a pattern the query's codes contradict (and no template)


# Slurm says why it cancelled a job or step.  A reason no fault code stands for (a task
# failed, or none: the teardown after a task failed, or scancel) still contradicts a
# pattern about another reason (a preemption, a time limit, a node failure), though it
# names no fault itself, so it is no code: it takes part in the conflict check only.
_SLURM_CANCEL = re.compile(r"CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")


_EXIT_STATUS = re.compile(r"\bexit\s*code\s*[:=]?\s*(\d{1,3})\b", re.I)


def stated_reasons(text: str) -> set[str]:
    """Conflict-only codes for what a line states without naming a code: Slurm's reason
    for a cancel ('SLURM_TASK_FAILURE', 'SLURM_CANCELLED' when no reason is given), and
    'SIG_NONE' for a process that exited with a status of its own ("exitcode: 1"): it was
    not killed by a signal, so a pattern of a signal death (SIGKILL's "exitcode: -9")
    does not describe it, however alike the launcher's two lines read once numbers are
    masked.  Empty otherwise."""
    out: set[str] = set()
    if _EXIT_STATUS.search(text):
        out.add("SIG_NONE")
    for m in _SLURM_CANCEL.finditer(text):
        reason = (m.group(1) or "").strip()
        if not reason:
            out.add("SLURM_CANCELLED")
        elif not extract_codes(m.group(0)):
            out.add("SLURM_" + reason.replace(" ", "_"))
    return out


def _conflicts(pattern_codes: set[str], query_codes: set[str]) -> bool:
    """True when, for some family, both name codes and none is shared."""
    for fam in CONFLICT_FAMILIES:
        mine = {_CONFLICT_ALIKE.get(c, c) for c in pattern_codes if c.startswith(fam)}
        theirs = {_CONFLICT_ALIKE.get(c, c) for c in query_codes if c.startswith(fam)}
        if mine and theirs and not mine & theirs:
            return True
    return False


def extract_codes(text: str) -> set[str]:
    """Canonical error codes found in one text (e.g. {'XID79', 'EI0002', 'ENOSPC'})."""
    return set(_extract_codes(text))


@lru_cache(maxsize=65536)
def _extract_codes(text: str) -> frozenset[str]:
    found: set[str] = set()
    for rx, fmt in _CODE_RULES:
        for m in rx.finditer(text):
            groups = [g for g in m.groups() if g] if m.groups() else []
            value = groups[0] if groups else ""
            code = (fmt or "{0}").format(value)
            if code.startswith("SIGNUM"):
                code = _SIGNALS.get(code[6:], "SIG" + code[6:])
            found.add(code.replace(" ", "_").upper() if not code.startswith("nccl") else code)
    return frozenset(found)


# --- exact evidence: wildcard templates -----------------------------------------------------

_TOKEN = re.compile(r"<\*>|[a-z0-9_]+|[^\w\s]")


def _tokens(masked: str) -> list[str]:
    return _TOKEN.findall(masked.lower())


@lru_cache(maxsize=4096)
def template_regex(indicator: str) -> re.Pattern[str] | None:
    """Regex that finds the indicator (masked, <*> as wildcard) inside a masked text.

    Indicators with fewer than three literal words are too generic to count as exact
    evidence and give None.
    """
    toks = _tokens(mask_text(indicator))
    if sum(1 for t in toks if len(t) >= 2 and t.isalpha()) < 3:
        return None
    parts: list[str] = []
    for i, t in enumerate(toks):
        if t == "<*>":
            parts.append(r" (?:\S+ ){0,3}?\S+")
        else:
            parts.append((" " if i else "") + re.escape(t))
            # After punctuation a line may carry extra fields (pid, time, rank) that the
            # indicator does not: allow a few tokens there, never inside a phrase.
            if not t[0].isalnum() and i + 1 < len(toks):
                parts.append(r"(?: \S+){0,8}?")
    return re.compile(r"(?:^| )" + "".join(parts).lstrip() + r"(?: |$)")


def _norm_for_template(text: str) -> str:
    return " ".join(_tokens(mask_text(text)))


# --- exact evidence: rare tokens ---------------------------------------------------------------

# Identifiers that name one fault: error class names (SafetensorError, ncclSystemError),
# errno names, function names (cudaMemcpyAsync), file names (ProcessGroupNCCL.cpp),
# configuration keys (NCCL_IB_HCA).  The embedding blurs them into "some CUDA/checkpoint
# error"; an SRE's grep does not.  A token starts with a letter; dotted and path-like
# names are kept whole and also split, so 'torch.distributed.elastic' matches 'elastic'.
_RARE_TOKEN = re.compile(r"(?<![\w/])[A-Za-z_][A-Za-z0-9_]*(?:[.:][A-Za-z_][A-Za-z0-9_]*)*(?![\w/])")
_RARE_STOP = frozenset(
    "the and for with from this that was are not has have had been into than then when while "
    "you your please see more use using can will may line file call error errors failed "
    "failure warn warning info debug notice fatal critical rank process int str none true "
    "false self return "
    # a distributed job's coordinates, printed by every launcher and in every failure
    # summary ("local_rank: 3 (pid: 1762)"): they say where, not what went wrong
    "local_rank global_rank node_rank group_rank world_size local_world_size".split())


_BIGRAM_WORD = re.compile(r"[a-z_]{3,}")


def rare_tokens(text: str) -> frozenset[str]:
    """Lower-case identifier tokens of one text (no stop words, at least 3 characters);
    the canonical error codes of the text are tokens too ('code:XID79')."""
    return _rare_tokens(text)


#: a Python file named on its own ("main.py FAILED", "train.py: error: ...") is the
#: user's script: whatever it is called, it names no fault (a library's frames are
#: named with their path, which the token pattern leaves out anyway)
_SCRIPT = re.compile(r"[\w-]+\.py")


def _identifier(tok: str) -> bool:
    """An identifier, not a dictionary word: camelCase or CamelCase with an inner capital
    (SafetensorError, cudaMemcpyAsync), snake_case (find_unused_parameters) or dotted
    (ProcessGroupNCCL.cpp).  Plain words ('iteration', 'loss') and capitalised ones
    ('STEP', 'CANCELLED', 'PID') are left to the embedding: logs are full of them, and the
    library's IDF cannot know that; errno names and codes come from extract_codes.  Parts
    of a path (build/CMakeFiles/...) are not tokens either: they name where code was built."""
    if "_" in tok.strip("_") or "." in tok or ":" in tok:
        return True
    if tok.isupper():
        return False
    return any(c.isupper() for c in tok[1:]) and any(c.islower() for c in tok)


@lru_cache(maxsize=65536)
def _rare_tokens(text: str) -> frozenset[str]:
    out: set[str] = set()
    for m in _RARE_TOKEN.finditer(text):
        whole = m.group(0).strip("_.:")
        if _SCRIPT.fullmatch(whole):
            continue
        parts = [whole] + (re.split(r"[.:]", whole) if ("." in whole or ":" in whole) else [])
        for t in parts:
            t = t.strip("_")
            if len(t) >= 3 and t.lower() not in _RARE_STOP and _identifier(t):
                out.add(t.lower())
    out.update("code:" + c for c in _extract_codes(text))
    if RARE_BIGRAMS:  # a shared phrase ('prior iteration') is rarer than its words
        words = [w for w in _BIGRAM_WORD.findall(text.lower()) if w not in _RARE_STOP]
        out.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    return frozenset(out)


_PLAIN_WORD = re.compile(r"(?<![\w.])[a-z]{4,}(?![\w.])")
_FAULT_LINE = re.compile(r"error|exception|fail|fatal|abort|traceback|killed|timed out|timeout|"
                         r"refused|cannot|can't|unable|denied|not found|no such|invalid", re.I)


#: a line that shares an indicator's frame but states something else keeps this much of its
#: embedding similarity (1.0: off).  Chosen on development data, 2026-12-05: 0.8 and 0.6
#: both kept silence on the 33 normal excerpts; 0.6 with the whole-sentence rule left the
#: leave-one-source-out pattern top-1 as it was (ranked in the first three +4 of 140) and
#: gave the diagnosed development jobs' category 3 more right of 416.
FRAME_FACTOR = 0.6
FRAME_PREFIX = 3  # tokens the two texts must share at the start to be one frame
_FRAME_TOKEN = re.compile(r"<[^<>\s]{1,8}>|[a-z0-9_]+|[^\sa-z0-9_]")
_FRAME_STOP = frozenset("the and for with from this that was are not has have had been into than "
                        "then when while error errors failed failure warn warning info line file".split())


@lru_cache(maxsize=65536)
def _frame_tokens(text: str) -> tuple[str, ...]:
    return tuple(_FRAME_TOKEN.findall(mask_text(text).lower()))


def frame_conflict(line: str, indicator: str) -> bool:
    """Does ``line`` fill the indicator's frame with another statement?

    A sentence embedding rates two lines that share a long frame as close whatever the
    frame says: "srun: error: <host>: tasks 0-3: Aborted (core dumped)" and "srun: error:
    <host>: task 5: Out Of Memory" have a cosine similarity of 0.82; "CUDA error: an
    illegal memory access was encountered" and "CUDA error: unspecified launch failure"
    share their frame the same way.  What differs
    after the shared start (and before a shared end) is the statement; when both sides
    state something in words and share none of them, the two lines report different
    faults in one logger's frame.  A shared start that ends a sentence ("Weights only
    load failed. <two different explanations>"), or that has more words than either
    differing part, is the same statement, not a frame."""
    a, b = _frame_tokens(line), _frame_tokens(indicator)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if n < FRAME_PREFIX or a[n - 1] == ".":  # a whole sentence shared: the same statement
        return False
    m = 0
    while m < min(len(a), len(b)) - n and a[-1 - m] == b[-1 - m]:
        m += 1
    ta, tb, shared = _content(a[n:len(a) - m]), _content(b[n:len(b) - m]), _content(a[:n])
    # the frame must not say more than what differs: "Must flatten tensors with uniform
    # <dtype | requires_grad>" shares the statement and differs in a detail
    return bool(ta) and bool(tb) and not ta & tb and len(shared) <= min(len(ta), len(tb))


def _content(tokens: tuple[str, ...]) -> set[str]:
    return {w[:5] for w in tokens if len(w) >= 3 and w.isalpha() and w not in _FRAME_STOP}


def rare_words(text: str) -> frozenset[str]:
    """Plain lower-case words (4+ letters) of a text, prefixed 'w:'.  They count as rare
    evidence only on lines that state a fault (``_FAULT_LINE``): progress lines of a
    healthy job ('iteration', 'loss', 'grad norm') are full of words that few patterns use."""
    return frozenset("w:" + w for w in _PLAIN_WORD.findall(text) if w not in _RARE_STOP)


def rare_idf(token_sets: list[frozenset[str]]) -> dict[str, float]:
    """Inverse document frequency of each token over the library (one document per
    pattern): log(N / df).  A token every pattern has weighs 0."""
    n = len(token_sets)
    df: dict[str, int] = {}
    for ts in token_sets:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    return {t: float(np.log(n / d)) for t, d in df.items()}


def rare_overlap(query: frozenset[str] | set[str], pattern: frozenset[str] | set[str],
                 idf: dict[str, float]) -> tuple[float, list[str]]:
    """Rare-token evidence in [0, 1) and the shared tokens, rarest first.

    Only tokens rarer than RARE_MIN_IDF count (a word half the library uses says
    nothing); the evidence grows with the summed IDF of the shared tokens, saturating
    as 1 - exp(-sum / RARE_SCALE), so one identifier only a single pattern carries is
    strong evidence and a few common-ish words are weak, however long the query."""
    shared = [t for t in pattern & query if idf.get(t, 0.0) >= RARE_MIN_IDF]
    if not shared:
        return 0.0, []
    shared.sort(key=lambda t: (-idf[t], t))
    total = sum(idf[t] for t in shared)
    return float(1.0 - np.exp(-total / RARE_SCALE)), shared


# --- query units ------------------------------------------------------------------------------

_NOISE = re.compile(
    r"""^\s*(?:File\ ".*",\ line|frame\ \#|Traceback\ \(most\ recent\ call\ last\)|
        During\ handling\ of\ the\ above\ exception|The\ above\ exception\ was\ the\ direct|
        [-=*#~^_ ]{3,}$|\d+\ 0x[0-9a-f]+|at\ [\w.$]+\()""",
    re.VERBOSE,
)
_WORD = re.compile(r"[A-Za-z]{3,}")
_ERRORISH = re.compile(
    r"error|errno|fail|fatal|exception|timeout|timed out|times out|kill|abort|refused|reset|"
    r"denied|unreachable|\bnan\b|overflow|\boom\b|out of memory|cancel|xid|\becc\b|lost|"
    r"terminat|broken|invalid|mismatch|not found|cannot|can't|unable|no space|exceeded|stale|"
    r"segfault|sigkill|sigsegv|sigbus|signal|warn|evict|preempt|exit|died|unknown|corrupt|"
    r"\bunhandled|not equal|insufficient|hang|stuck|fallen off", re.I)


@dataclass
class Unit:
    """One text of one event that is embedded and checked for codes and templates."""

    event_index: int
    event_id: str | None
    text: str
    masked: str
    norm: str = ""
    codes: set[str] = field(default_factory=set)
    plain: bool = False  # no error word and no code
    role: str = ""  # report events: "culprit" (on the top node), "symptom" (victims' echo),
    # "wrapper" (the generic lines of a message that states its cause below, ``_stated_causes``) or ""
    first: bool = False  # where the top node's trouble began (``_first_trouble``)


def _informative(text: str) -> bool:
    if _NOISE.search(text):
        return False
    return len(_WORD.findall(text)) >= 2 or bool(extract_codes(text))


def units_from_events(events: Iterable[dict], *, max_events: int = 12,
                      top: str | None = None, onset: dict | None = None) -> list[Unit]:
    """Texts to match from report events (template plus up to two example lines each).

    The report's first ``max_events`` events, and the culprit's first trouble wherever the
    report ranks it (``_first_trouble``): after one node fails, its peers' timeouts are
    louder and outrank its own first line, but what went wrong is said where the failing
    node's trouble began, so that line is matched even when it ranks below the cut.  A
    bare "Last error:" is matched together with the line after it (``_stated_causes``),
    wherever the report ranks that line.

    ``top`` is the node the report ranks first (its ``nodes``); without it, the node of
    the first event that is not an echo stands in.  The events are ordered by how
    unusual they are, not by whose they are: a launcher's "srun: error: <host>: tasks
    0-3: Aborted" on a victim's host can head them while the culprit the engine named
    printed the cause (a missing module, an unreachable hub) below it.

    ``onset`` is the report's failure point (``{"node", "file", "line", "worked_past"}``,
    l4.onset): the engine already told the culprit's failure from what it printed and
    then worked past (a start-up warning thousands of steps before the end), and such a
    line is not where its trouble began, however error-like it reads."""
    events = [ev for ev in events if isinstance(ev, dict)]
    if top is None:
        top = _top_node(events[:max_events])
    first = _first_trouble(events, top, onset) if FIRST_TROUBLE else set()
    stated, wrappers = _stated_causes(events) if STATED_CAUSE else ({}, set())
    units: list[Unit] = []
    seen: set[str] = set()
    for i, ev in enumerate(events):
        if i >= max_events and i not in first:
            continue
        role = "wrapper" if i in wrappers and ev.get("symptom") is not True else _role(ev, top)
        texts = [str(ev.get("template") or "")]
        for ex in (ev.get("examples") or [])[:2]:
            if isinstance(ex, dict) and ex.get("text"):
                texts.append(str(ex["text"]))
            elif isinstance(ex, str):
                texts.append(ex)
        if i in stated:  # "Last error:" says nothing alone; it is read with the line it introduces
            texts = [f"{_STATED_HEAD} {t}" for t in stated[i]]
        for t in texts:
            t = t.strip()[:1000]
            if not t or not _informative(t):
                continue
            masked = mask_text(t)
            if masked in seen:
                # an example line masks to its template, but only the line still has the
                # numbers that are codes ("got signal: 15", "Xid 79"): keep the line
                same = next(u for u in units if u.masked == masked)
                if len(extract_codes(t)) > len(extract_codes(same.text)):
                    same.text = t
                continue
            seen.add(masked)
            units.append(Unit(min(i, max_events), ev.get("event_id"), t, masked, role=role,
                              first=i in first))
    return units


#: NCCL's errors as torch raises them end "<result>: <generic text>\nLast error:\n<what NCCL
#: saw>"; the generic part ("Internal check failed", "unhandled system error") is the same
#: for every cause, the line after "Last error:" is the one that says which.
STATED_CAUSE = True
_STATED_HEAD = "Last error:"
_STATED = re.compile(r"(?:^|[\s:\]])Last error:\s*$")
_WRAPPER_LINES = 2  # lines above "Last error:" that belong to the same message


def _stated_causes(events: list[dict]) -> tuple[dict[int, list[str]], set[int]]:
    """Who names whom inside one message: for each event that is a bare "Last error:",
    the texts of the line right after it in the same file (template and example), and the
    events printed on the ``_WRAPPER_LINES`` lines above it (the generic wrapper of that
    message), by event index."""
    at: dict[tuple[str, int], int] = {}
    text_at: dict[tuple[str, int], str] = {}
    for i, ev in enumerate(events):
        for ex in ev.get("examples") or []:
            if isinstance(ex, dict) and isinstance(ex.get("line"), int):
                key = (f"{ex.get('node')}/{ex.get('file')}", ex["line"])
                at.setdefault(key, i)
                text_at.setdefault(key, str(ex.get("text") or ""))
    stated: dict[int, list[str]] = {}
    wrappers: set[int] = set()
    for i, ev in enumerate(events):
        if not _STATED.search(str(ev.get("template") or "").strip()):
            continue
        for ex in ev.get("examples") or []:
            if not (isinstance(ex, dict) and isinstance(ex.get("line"), int)):
                continue
            where, line = f"{ex.get('node')}/{ex.get('file')}", ex["line"]
            j = at.get((where, line + 1))
            if j is None or j == i:
                continue
            texts = [str(events[j].get("template") or ""), text_at[(where, line + 1)]]
            stated.setdefault(i, [t.strip() for t in texts if t.strip()])
            wrappers.update(k for d in range(1, _WRAPPER_LINES + 1)
                            if (k := at.get((where, line - d))) is not None and k != i)
    return stated, wrappers - set(stated)


def _first_trouble(events: list[dict], top: str | None, onset: dict | None = None) -> set[int]:
    """Indices of the events where the top node's trouble began: in each of its log files,
    the ``FIRST_EVENTS`` earliest lines (by position, which is time within one file) of
    events it printed whose text reads like trouble.  Lines before them on that node were
    normal or are not in the report; lines long after may be its reaction to its own fault
    or echoes of its peers'.  (The first such line of a Python traceback can be a frame,
    "raise exception", with the statement of the fault a few lines later; taking the 2-4
    earliest lines to reach it scored worse on the development jobs than taking one.)
    When the report's failure point (``onset``) is on the top node, the events it lists
    as ``worked_past`` do not count: the node logged normally long after them.
    Empty when the report names no node or the events carry no positions."""
    if top is None:
        return set()
    past: set[str] = set()
    if isinstance(onset, dict) and str(onset.get("node")) == top:
        past = {str(e) for e in onset.get("worked_past") or []}
    by_file: dict[str, dict[int, int]] = {}  # file -> event index -> its earliest line there
    for i, ev in enumerate(events):
        if ev.get("symptom") or str(ev.get("event_id")) in past:
            continue
        text = str(ev.get("template") or "")
        if not (_ERRORISH.search(text) or extract_codes(text)):
            continue
        for ex in ev.get("examples") or []:
            if not (isinstance(ex, dict) and str(ex.get("node")) == top):
                continue
            line, lines = ex.get("line"), by_file.setdefault(str(ex.get("file") or ""), {})
            if isinstance(line, int) and line < lines.get(i, line + 1):
                lines[i] = line
    return {i for lines in by_file.values()
            for i in sorted(lines, key=lines.__getitem__)[:FIRST_EVENTS]}


def _top_node(events: list[dict]) -> str | None:
    """The culprit the report ranks first, as its events show it: the engine orders each
    event's examples top node first, and the first event that is not a victims' echo is
    the most suspicious one of its own."""
    for ev in sorted(events, key=lambda e: bool(e.get("symptom"))):  # stable: report order
        for ex in ev.get("examples") or []:
            if isinstance(ex, dict) and ex.get("node"):
                return str(ex["node"])
    return None


#: A culprit's own launcher lines that only report that something failed ("srun: error:
#: <host>: task 0: Exited with exit code 1", "Sending process 4002 closing signal
#: SIGTERM", "ChildFailedError") read like its victims' echoes: they weigh as echoes.
TEARDOWN_AS_ECHO = True


def _role(ev: dict, top: str | None) -> str:
    """'symptom' for what the victims echo (the engine's flag), 'culprit' for an event the
    top node logged itself, '' when the report does not say.  With ``TEARDOWN_AS_ECHO``
    the top node's own teardown and exit notices (``l4.severity.is_teardown``) are
    'symptom' too: every failed job prints them, whatever failed."""
    if ev.get("symptom"):
        return "symptom"
    nodes = ev.get("nodes")
    if top is not None and isinstance(nodes, list) and nodes:
        if top not in [str(n) for n in nodes]:
            return "symptom"
        if TEARDOWN_AS_ECHO and is_teardown(str(ev.get("template") or "")):
            return "symptom"
        return "culprit"
    return ""


def units_from_lines(lines: Iterable[str]) -> list[Unit]:
    units: list[Unit] = []
    seen: set[str] = set()
    for line in lines:
        t = str(line).rstrip("\n").strip()[:1000]
        if not t or not _informative(t):
            continue
        masked = mask_text(t)
        if masked in seen:
            continue
        seen.add(masked)
        units.append(Unit(0, None, t, masked))
    if len(units) > MAX_UNITS:
        errorish = [u for u in units if _ERRORISH.search(u.text)]
        rest = [u for u in units if not _ERRORISH.search(u.text)]
        units = (errorish + rest)[:MAX_UNITS]
    return units


# --- the library as needed for matching -------------------------------------------------------


def ensure_embeddings(kb: Path | str | None = None) -> int:
    """Embed patterns whose text changed since they were last embedded; returns how many."""
    stale = kbstore.stale_embeddings(kb=kb)
    if not stale:
        return 0
    texts: list[str] = []
    for p in stale:
        texts.append(p["_whole"])
        texts.extend(p["_ind"])
    vecs = embed(texts, kb=kb, use_store=True)
    items = []
    k = 0
    for p in stale:
        wvec = vecs[k].tolist()
        k += 1
        ind = []
        for t in p["_ind"]:
            ind.append((t, vecs[k].tolist()))
            k += 1
        items.append((p["id"], p["_whole"], wvec, ind))
    kbstore.store_embeddings(items, kb=kb)
    return len(stale)


@dataclass
class _PatternInfo:
    id: str
    title: str
    category: str
    kind: str
    action: str
    indicators: list[str]
    codes: set[str]
    requires_code: bool
    tokens: frozenset[str] = frozenset()


def _library(kb: Path | str | None, exclude: frozenset[str] = frozenset()) -> list[_PatternInfo]:
    out = []
    for p in kbstore.list_patterns(kb=kb):
        if p["id"] in exclude:
            continue
        codes = {c.upper() if not c.startswith("nccl") else c for c in p["codes"]}
        for ind in p["indicators"]:
            codes |= extract_codes(ind)
        texts = [p["title"], *p["indicators"]]
        tokens = frozenset().union(*(rare_tokens(t) for t in texts))
        if RARE_WORDS:
            tokens |= frozenset().union(*(rare_words(t) for t in p["indicators"]))
        out.append(_PatternInfo(p["id"], p["title"], p["category"], p["kind"], p["action"],
                                p["indicators"], codes, p["requires_code"],
                                tokens | {"code:" + c for c in codes}))
    return out


def _similarities(units: list[Unit], kb: Path | str | None, exclude: frozenset[str] = frozenset(),
                  ) -> tuple[dict[str, dict[int, tuple]], object]:
    """({pattern_id: {unit_index: (indicator_sim, best_indicator, whole_sim)}}, unit vectors)
    from DuckDB; patterns in ``exclude`` are left out (leave-one-source-out evaluation)."""
    vecs = embed([u.masked for u in units], kb=kb, use_store=True)
    qv = [v.tolist() for v in vecs]
    out: dict[str, dict[int, tuple]] = {}
    with kbstore.connect(kb) as con:
        q = """
            WITH q AS (
                SELECT i - 1 AS qi, ($qv::FLOAT[384][])[i] AS v
                FROM range(1, len($qv::FLOAT[384][]) + 1) t(i)
            ),
            ind AS (
                SELECT pv.pattern_id, q.qi,
                       max(array_cosine_similarity(pv.embedding, q.v)) AS s,
                       arg_max(pv.text, array_cosine_similarity(pv.embedding, q.v)) AS best
                FROM pattern_vectors pv CROSS JOIN q
                WHERE pv.pattern_id NOT IN (SELECT unnest($ex::VARCHAR[]))
                GROUP BY pv.pattern_id, q.qi
            ),
            whole AS (
                SELECT p.id AS pattern_id, q.qi, array_cosine_similarity(p.embedding, q.v) AS s
                FROM patterns p CROSS JOIN q
                WHERE p.embedding IS NOT NULL AND p.id NOT IN (SELECT unnest($ex::VARCHAR[]))
            )
            SELECT w.pattern_id, w.qi, coalesce(i.s, 0.0), i.best, w.s
            FROM whole w LEFT JOIN ind i ON i.pattern_id = w.pattern_id AND i.qi = w.qi
        """
        rows = con.execute(q, {"qv": qv, "ex": sorted(exclude)}).fetchall()
        for pid, qi, s_ind, best, s_whole in rows:
            out.setdefault(pid, {})[int(qi)] = (float(s_ind), best, float(s_whole or 0.0))
    return out, vecs


# --- scoring ------------------------------------------------------------------------------------


@dataclass
class Match:
    """Root-cause suggestions (above the threshold) and the four categories, best first."""

    root_causes: list[dict]
    categories: list[dict]


def _rank(units: list[Unit], kb: Path | str | None, top_k: int, decay: bool,
          threshold: float, exclude: frozenset[str] = frozenset(),
          model: cat.CategoryModel | None = None) -> Match:
    ensure_embeddings(kb)
    if model is None:
        model = category_model(kb)
    library = _library(kb, exclude)
    if not units or not library:
        return Match([], _categories(model, units, None, [], {}))
    df: dict[str, int] = {}
    for p in library:
        for c in p.codes:
            df[c] = df.get(c, 0) + 1
    for u in units:
        u.codes = extract_codes(u.text)
        u.norm = _norm_for_template(u.text)
        u.plain = not u.codes and not _ERRORISH.search(u.text)
    sims, vecs = _similarities(units, kb, exclude)
    query_codes: set[str] = set().union(*(u.codes for u in units))
    conflict_codes = query_codes.union(*(stated_reasons(u.text) for u in units))
    idf = rare_idf([p.tokens for p in library]) if RARE_WEIGHT > 0 else {}
    unit_tokens: list[frozenset[str]] = [frozenset()] * len(units)
    if RARE_WEIGHT > 0:
        # the victims' echoes (NCCL timeouts, resets) name ProcessGroupNCCL, WorkNCCL ...
        # in every failed job: with the culprit's own lines at hand, only those count
        culprit_known = any(u.role == "culprit" for u in units)
        for qi, u in enumerate(units):
            if culprit_known and u.role == "symptom":
                continue
            toks = rare_tokens(u.text) if not u.plain else frozenset()
            if RARE_WORDS and _FAULT_LINE.search(u.text):
                toks |= rare_words(u.text)
            unit_tokens[qi] = toks
    query_tokens: frozenset[str] = frozenset().union(*unit_tokens)

    relevance = [0.0] * len(units)
    line_kind = [""] * len(units)  # kind of the pattern each line resembles most
    results = []
    echo_only: set[str] = set()
    has_culprit = any(u.role == "culprit" for u in units)
    for p in library:
        per_unit = sims.get(p.id, {})
        best_sem, best_unit, best_ind = 0.0, None, None
        for qi, (s_ind, ind, s_whole) in per_unit.items():
            u = units[qi]
            s = max(s_ind, WHOLE_WEIGHT * s_whole) * SEM_SCALE
            if FRAME_FACTOR < 1.0 and ind and s_ind >= WHOLE_WEIGHT * s_whole \
                    and frame_conflict(u.masked, ind):
                s *= FRAME_FACTOR
            if u.plain:
                s *= PLAIN_FACTOR
            if decay:
                s *= 1.0 - EVENT_DECAY * u.event_index
            if s > relevance[qi]:
                relevance[qi] = s
                line_kind[qi] = p.kind
            if s > best_sem:
                best_sem, best_unit = s, u
                best_ind = ind if s_ind >= WHOLE_WEIGHT * s_whole else f"{p.title} (description)"
        evidence: list[dict] = []
        code_miss = 1.0
        for c in sorted(p.codes):
            hits = [u for u in units if c in u.codes]
            if hits:
                code_miss *= 1.0 - CODE_STRENGTH / df[c]
                evidence.append({"kind": "code", "code": c, "event_id": hits[0].event_id,
                                 "text": hits[0].text[:300]})
        tmpl_hit = None
        for ind in p.indicators:
            rx = template_regex(ind)
            if rx is None:
                continue
            for u in units:
                if rx.search(u.norm):
                    tmpl_hit = (ind, u)
                    break
            if tmpl_hit:
                break
        if p.requires_code and code_miss == 1.0:
            continue
        contradicted = CONFLICT_FACTOR < 1.0 and _conflicts(p.codes, conflict_codes)
        if contradicted:
            tmpl_hit = None
        if tmpl_hit:
            evidence.append({"kind": "template", "indicator": tmpl_hit[0],
                             "event_id": tmpl_hit[1].event_id, "text": tmpl_hit[1].text[:300]})
        if best_unit is not None:
            evidence.append({"kind": "embedding", "similarity": round(best_sem / SEM_SCALE, 4),
                             "indicator": best_ind, "event_id": best_unit.event_id,
                             "text": best_unit.text[:300]})
        rare, shared = rare_overlap(_scoped_tokens(per_unit, units, unit_tokens, query_tokens), p.tokens, idf) \
            if RARE_WEIGHT > 0 else (0.0, [])
        if shared:
            where = next((u for u in units if shared[0] in rare_tokens(u.text)), units[0])
            evidence.append({"kind": "rare_tokens", "tokens": shared[:8], "strength": round(rare, 4),
                             "event_id": where.event_id, "text": where.text[:300]})
        score = 1.0 - (1.0 - max(best_sem, 0.0)) * code_miss * (1.0 - (TEMPLATE_BONUS if tmpl_hit else 0.0)) \
            * (1.0 - RARE_WEIGHT * rare)
        if p.kind == "symptom":
            score *= SYMPTOM_FACTOR
        if contradicted:
            score *= CONFLICT_FACTOR
        results.append((score, p, evidence))
        if best_unit is not None and best_unit.role == "symptom" and not any(
                c in u.codes for c in p.codes for u in units if u.role != "symptom"):
            echo_only.add(p.id)  # matched on what the victims echo, not on the culprit

    spread = category_spread(sims, {p.id: p.category for p in library}, len(units)) \
        if GENERIC_RELEVANCE else [0.0] * len(units)
    for qi, u in enumerate(units):  # an exact code makes a line a fault line whatever its wording
        # a line that the library's faults of several teams all contain near-copies of
        # (a launcher's "failed (exitcode: 1)", "ChildFailedError") names no team
        relevance[qi] += GENERIC_RELEVANCE * spread[qi]
        if u.codes:
            relevance[qi] += CODE_RELEVANCE
        if EXCEPTION_RELEVANCE and _EXCEPTION_LINE.search(u.text):
            relevance[qi] += EXCEPTION_RELEVANCE
        # the culprit's own lines decide the job's category, not the victims' timeouts
        relevance[qi] += ROLE_RELEVANCE.get(u.role, 0.0)
        if u.first and line_kind[qi] != "symptom":  # unless the library calls it an echo
            relevance[qi] += FIRST_RELEVANCE
        # a line that reads most like an echo the library itself calls a symptom (a
        # collective timeout, an agent shutting workers down) says little about the owner
        if line_kind[qi] == "symptom":
            relevance[qi] += ECHO_LINE_RELEVANCE

    results.sort(key=lambda r: (-r[0], r[1].id))
    best_by_cat: dict[str, float] = {}
    for score, p, _ in results:  # only a suggestion (THRESHOLD, whatever the caller's) votes
        if score >= THRESHOLD:
            vote = score * (SYMPTOM_VOTE if p.id in echo_only and has_culprit else 1.0)
            if p.kind == "symptom":  # the library says: an echo, the cause is elsewhere
                vote *= SYMPTOM_KIND_VOTE
            best_by_cat[p.category] = max(best_by_cat.get(p.category, 0.0), vote)
    if CATEGORY_PRIOR > 0 and model is not None:
        results = _category_prior(results, _categories(
            model, units, vecs, relevance, best_by_cat if PRIOR_WITH_VOTES else {}))
    out = []
    for score, p, evidence in results[:top_k]:
        if score < threshold:
            break
        out.append({
            "pattern_id": p.id, "title": p.title, "category": p.category, "kind": p.kind,
            "similarity": round(score, 4), "action": p.action, "evidence": evidence,
        })
    return Match(out, _categories(model, units, vecs, relevance, best_by_cat,
                                  neighbour_votes(results)))


def _scoped_tokens(per_unit: dict[int, tuple], units: list[Unit], unit_tokens: list[frozenset[str]],
                   pooled: frozenset[str]) -> frozenset[str]:
    """The query's identifiers that may count as rare evidence for one pattern
    (``RARE_SCOPE``): those of the lines that read most like the pattern."""
    if RARE_SCOPE not in ("line", "event") or not per_unit:
        return pooled
    sims = {qi: max(s_ind, WHOLE_WEIGHT * s_whole) for qi, (s_ind, _, s_whole) in per_unit.items()
            if qi < len(unit_tokens)}
    best = max(sims.values(), default=0.0)
    near = [qi for qi, s in sims.items() if s >= best - RARE_LINE_MARGIN]
    if RARE_SCOPE == "event":
        events = {units[qi].event_id for qi in near}
        near = [qi for qi, u in enumerate(units) if u.event_id in events]
    return frozenset().union(*(unit_tokens[qi] for qi in near))


def _category_prior(results: list[tuple[float, _PatternInfo, list]], categories: list[dict],
                    ) -> list[tuple[float, _PatternInfo, list]]:
    """Re-rank the patterns with the query's category (``categories``: the report's
    category vote, from the classifier and the suggested patterns' scores before this
    re-ranking): two patterns that read alike but belong to different teams (an NCCL
    version mismatch vs an NCCL null buffer; a /dev/shm bus error vs a GPU lost on PCIe)
    are told apart by what the whole excerpt says about its owner.  A pattern of a less
    likely category keeps ``1 - CATEGORY_PRIOR * (1 - p / p_max)`` of its score, so the
    most likely category's patterns are unchanged and a strong exact match of another
    category still wins.  The reported categories are computed from the scores before it
    (it never feeds back into them)."""
    conf = {c["category"]: float(c["confidence"]) for c in categories}
    top = max(conf.values(), default=0.0)
    scored = [(score * (1.0 - CATEGORY_PRIOR * (1.0 - conf.get(p.category, 0.0) / top)) if top > 0
               else score, score, p, ev) for score, p, ev in results]
    # ties after the re-ranking (scores that round alike) keep the matcher's order
    scored.sort(key=lambda r: (-r[0], -r[1], r[2].id))
    return [(new, p, ev) for new, _, p, ev in scored]


def neighbour_votes(results: list[tuple[float, _PatternInfo, list]]) -> dict[str, float]:
    """A k-nearest-patterns vote on the category: the KNN_K best-scoring patterns (any
    score, ranked as the matcher ranks them), each voting exp(KNN_SHARPNESS * score) for
    its category, normalised to shares.  Unlike a suggestion it needs no threshold: a
    new fault's nearest known faults usually belong to the same team."""
    votes: dict[str, float] = {}
    for score, p, _ in results[:KNN_K]:
        votes[p.category] = votes.get(p.category, 0.0) + float(np.exp(KNN_SHARPNESS * score))
    total = sum(votes.values())
    return {k: v / total for k, v in votes.items()} if total > 0 else {}


# a line that raises an exception ("ModuleNotFoundError: No module named ...") states the
# fault; the launcher's summary around it ("exitcode", "Root Cause", "error_file") does not
_EXCEPTION_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception):")
EXCEPTION_RELEVANCE = 0.10  # 0.15 and 0.2: one simulated job fewer; 0.1: LOSO +1 pattern, dev3 +1 run
CODE_RELEVANCE = 0.10  # a line carrying an exact code weighs more in the category vote
# In a diagnosed job the victims' echoes (timeouts, resets) outnumber the culprit's own
# lines and read like platform trouble; these shift the vote to the culprit's lines.
# (Only differences matter: when every line is an echo, e.g. a culprit that hung silently,
# all shift alike and the vote is unchanged.)
ROLE_RELEVANCE = {"culprit": 0.15, "symptom": -0.6, "wrapper": -0.6}
# Where the top node's trouble began (its earliest trouble line in the report) says what
# went wrong; what it printed after may be its reaction or its peers' echo.
FIRST_TROUBLE = True
FIRST_RELEVANCE = 0.6
FIRST_EVENTS = 1  # the top node's earliest trouble events per log file
ECHO_LINE_RELEVANCE = 0.0  # < 0: a line most like a symptom pattern weighs less (tried -0.3: -1 job)
SYMPTOM_KIND_VOTE = 0.5  # a suggested pattern of kind "symptom" votes this much for its category
SYMPTOM_VOTE = 0.25  # with culprit lines, a pattern matched only on echoes votes this much
#: How much a line whose nearest library lines belong to several categories
#: (``category_spread``) weighs less in the category vote (0: off).  2026-12-05, library
#: leave-one-source-out category / pattern top-1: off 74.2 / 30.0 %, -0.5 74.2 / 30.7 %,
#: -1.0 73.3 / 27.9 %; the development jobs' category top-3 rose with either.
GENERIC_RELEVANCE = -0.5
GENERIC_MARGIN = 0.03  # library lines this close to a line's best match count as ties
GENERIC_FLOOR = 0.6  # a line less like any library line than this: its spread is unknown (0)


def category_spread(sims: dict[str, dict[int, tuple]], category_of: dict[str, str],
                    n_units: int, *, margin: float | None = None,
                    floor: float | None = None) -> list[float]:
    """Per query line, how much the library disagrees about its category: 1 minus the
    largest category's share among the patterns whose closest indicator is within
    ``margin`` of the line's best one (0 when one pattern or one category stands out).

    Every failed job prints its launcher's summary ("failed (exitcode: 1) local_rank: 0",
    "ChildFailedError"), whatever went wrong, so the library's patterns of every
    category quote it, all about equally well.  Such a line is evidence of a failure,
    not of whose it is; the vote should come from the lines that set one team apart.
    ``sims`` is ``_similarities``' {pattern: {line: (indicator_sim, _, whole_sim)}}."""
    margin = GENERIC_MARGIN if margin is None else margin
    floor = GENERIC_FLOOR if floor is None else floor
    per_line: list[list[tuple[float, str]]] = [[] for _ in range(n_units)]
    for pid, rows in sims.items():
        c = category_of.get(pid)
        if c is None:
            continue
        for qi, (s_ind, _, _) in rows.items():
            if 0 <= qi < n_units:
                per_line[qi].append((float(s_ind), c))
    out = []
    for rows in per_line:
        best = max((s for s, _ in rows), default=0.0)
        if best < floor:
            out.append(0.0)
            continue
        near = [c for s, c in rows if s >= best - margin]
        top = max(near.count(c) for c in set(near))
        out.append(1.0 - top / len(near))
    return out


# How much the query's category re-ranks the patterns (``_category_prior``), chosen on the
# leave-one-source-out pattern ranking (103 patterns with a same-fault pattern from another
# source; benchmarks/kb_accuracy.py --misses), 2026-12-01: off 30 shown / 36 ranked first;
# classifier alone as the prior 0.3: 31 / 39, 0.45-0.6: 32 / 40, 0.8: 31 / 39; the reported
# category (classifier and pattern votes) at 0.5: 31 / 39 (adopted: with the classifier
# alone, a culprit's exact hardware match fell behind a framework pattern in a diagnosed
# job whose lines the classifier alone read as framework; tests/test_kb_category.py).
CATEGORY_PRIOR = 0.5
PRIOR_WITH_VOTES = True  # the prior is the reported category (classifier and pattern votes)
KNN_K = 5  # nearest patterns that vote on the category (l4.category.KNN_WEIGHT mixes them in)
KNN_SHARPNESS = 10.0  # how much a closer pattern's vote outweighs a farther one's


def _categories(model: cat.CategoryModel | None, units: list[Unit], vecs, relevance: list[float],
                best_by_cat: dict[str, float], knn: dict[str, float] | None = None) -> list[dict]:
    if model is None:  # empty library: no basis for any category, say so evenly
        return [{"category": k, "confidence": 0.25} for k in cat.CATEGORIES]
    if not units or vecs is None:
        return cat.predict(model, [], [], [], None)
    feats = [cat.exact_features(u.text, u.codes or extract_codes(u.text)) for u in units]
    return cat.predict(model, vecs, feats, relevance, best_by_cat, knn)


# --- the category classifier, trained on the library and confirmed diagnoses ----------------

_model_memo: dict[tuple[str, str], cat.CategoryModel] = {}


def training_samples(rows: dict, kb: Path | str | None = None) -> list[cat.Sample]:
    """Classifier samples from ``kbstore.category_training_rows``: every indicator and the
    title+description of every pattern, and every confirmed diagnosis' texts."""
    samples: list[cat.Sample] = []
    for p in rows["patterns"]:
        sources = tuple(p["sources"])
        raw_of = {}
        for raw in p["raw_indicators"]:
            raw_of.setdefault(mask_text(raw), raw)
        whole_text, whole_vec = p["whole"]
        if whole_vec is not None:
            codes = {c.upper() if not c.startswith("nccl") else c for c in p["codes"]}
            samples.append(cat.Sample(np.asarray(whole_vec, dtype=np.float32),
                                      cat.exact_features(whole_text, codes | extract_codes(whole_text)),
                                      p["category"], cat.WHOLE_SAMPLE_WEIGHT, p["id"], sources))
        for text, vec in p["indicators"]:
            raw = raw_of.get(text, text)
            samples.append(cat.Sample(np.asarray(vec, dtype=np.float32),
                                      cat.exact_features(raw, extract_codes(raw)),
                                      p["category"], 1.0, p["id"], sources))
    _, descriptions = kbstore.category_descriptions()
    desc = [(name, t) for name, texts in descriptions.items() for t in texts]
    if desc:
        vecs = embed([t for _, t in desc], kb=kb, use_store=True)
        for (name, t), v in zip(desc, vecs, strict=True):
            samples.append(cat.Sample(v, cat.exact_features(t, extract_codes(t)), name,
                                      cat.DESCRIPTION_WEIGHT, f"category:{name}", ("kb/categories.yaml",)))
    _, exemplars = kbstore.category_exemplars()
    ex = [(i, e, t) for i, e in enumerate(exemplars) for t in e["lines"]]
    if ex and cat.EXEMPLAR_WEIGHT > 0:
        vecs = embed([mask_text(t) for _, _, t in ex], kb=kb, use_store=True)
        for (i, e, t), v in zip(ex, vecs, strict=True):
            samples.append(cat.Sample(v, cat.exact_features(t, extract_codes(t)), e["category"],
                                      cat.EXEMPLAR_WEIGHT, f"exemplar:{i}", (e["source"],)))
    texts = [(d, t) for d in rows["confirmed"] for t in d["texts"]]
    if texts:
        vecs = embed([mask_text(t) for _, t in texts], kb=kb, use_store=True)
        for (d, t), v in zip(texts, vecs, strict=True):
            samples.append(cat.Sample(v, cat.exact_features(t, extract_codes(t)), d["category"],
                                      cat.CONFIRMED_WEIGHT, d["pattern_id"], (f"diagnosis:{d['id']}",)))
    return samples


def category_model(kb: Path | str | None = None) -> cat.CategoryModel | None:
    """The classifier for the current library and confirmations: from memory, from the
    knowledge base, or fitted now (and stored) when either changed.  None: empty library."""
    state = kbstore.category_training_state(kb=kb)
    if not any(r[0] != "diagnosis" for r in state):
        return None
    fp = cat.fingerprint([*state, ("categories", kbstore.category_descriptions()[0]),
                          ("exemplars", kbstore.category_exemplars()[0])], model_name())
    key = (str(kbstore.resolve_kb(kb)), fp)
    model = _model_memo.get(key)
    if model is not None:
        return model
    stored = kbstore.load_category_model(fp, kb=kb)
    model = cat.CategoryModel.from_json(stored) if stored else None
    if model is None:
        samples = training_samples(kbstore.category_training_rows(kb=kb), kb)
        if not samples:
            return None
        model = cat.train(samples)
        kbstore.store_category_model(fp, model.to_json(), kb=kb)
    _model_memo.clear()
    _model_memo[key] = model
    return model


def match_root_causes(events: list[dict], *, kb: Path | str | None = None, top_k: int = 3,
                      threshold: float = THRESHOLD) -> list[dict]:
    """Root-cause suggestions for report events, best first; [] means no known pattern."""
    return match_events(events, kb=kb, top_k=top_k, threshold=threshold).root_causes


def match_events(events: list[dict], *, kb: Path | str | None = None, top_k: int = 3,
                 threshold: float = THRESHOLD, top: str | None = None,
                 onset: dict | None = None) -> Match:
    """Root causes and categories for report events (what ``l4 diagnose`` attaches);
    ``top``: the node the report ranks first, whose own lines are the culprit's;
    ``onset``: the report's failure point (where the culprit's trouble began)."""
    return _rank(units_from_events(events, top=top, onset=onset), kb, top_k, decay=True,
                 threshold=threshold)


def match_lines(lines: list[str], *, kb: Path | str | None = None, top_k: int = 3,
                threshold: float = THRESHOLD) -> list[dict]:
    """Root-cause suggestions for raw log lines (``l4 kb match FILE``)."""
    return match_lines_full(lines, kb=kb, top_k=top_k, threshold=threshold).root_causes


def match_lines_full(lines: list[str], *, kb: Path | str | None = None, top_k: int = 3,
                     threshold: float = THRESHOLD, exclude: frozenset[str] = frozenset(),
                     model: cat.CategoryModel | None = None) -> Match:
    """Root causes and categories for raw log lines.  ``exclude`` leaves patterns out and
    ``model`` replaces the stored classifier (both for leave-one-source-out evaluation)."""
    return _rank(units_from_lines(lines), kb, top_k, decay=False, threshold=threshold,
                 exclude=frozenset(exclude), model=model)
