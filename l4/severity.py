"""How much a template *reads* like trouble, as a prior in [0, 1].

The cross-job filter decides what is unusual; this decides what is worth an SRE's attention
among unusual things, and keeps a job with no baseline diagnosable.  Words are grouped by
strength; benign phrasings that contain alarming words ("0 errors", "warning: deprecated")
are discounted.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Wording that names a *cause*: hardware faults, exhausted resources, bad data or code,
# scheduler decisions.  These are what an SRE acts on.
_CAUSE = re.compile(
    r"(?:\bxid\b|\becc\b|uncorrectable|fallen off the bus|fell off the bus|nvlink|\bhbm\b"
    r"|aicore|ai core|row remap|page retire|pcie? .*error|\baer\b|link (?:is )?down|port (?:error|down)"
    r"|out of memory|\boom\b|oom-kill|killed process|memory cgroup|cannot allocate memory"
    r"|\bnan\b(?! iterations)|\binf\b(?! iterations)|overflow.*loss scale|loss scale.*(?:minimum|1\.0)|grad norm: nan"
    r"|no space left|disk quota|stale file handle|input/output error|read-only file system"
    r"|storagefull|file write failed|failed writing|failed reading"
    r"|segmentation fault|sigsegv|signal 11|exitcode: -11|exitcode: -9|signal 9|sigkill\b|bus error"
    r"|illegal memory access|illegal address|device-side assert|unspecified launch failure"
    r"|size mismatch|shape mismatch|shape .* (?:does not|doesn't) match|mismatch between saved"
    r"|no such file or directory|filenotfounderror|permission denied|does not exist"
    r"|unexpected key|missing key|corrupt|invalid (?:header|magic)|checksum"
    r"|version (?:mismatch|incompatib)|incompatible|not supported by|undefined symbol"
    r"|preempt|evict|node fail|due to node failure|cancelled|canceled|time limit"
    r"|low on resource|ephemeral-storage|oomkilled|exceeded (?:its|the) (?:memory|storage|ephemeral)"
    r"|ei\d{4}|ee\d{4}|eh\d{4}|el\d{4}|ej\d{4}|err\d{5}|507\d{3}"
    r"|could not find net|failed to find reverse path|unhandled system error|unhandled cuda error"
    r"|cuda error|cudaerror|nccl error|ncclinternalerror|ncclsystemerror|ncclinvalidusage"
    r"|fatal|panic|core dumped"
    # the environment or the code itself is wrong: it cannot be retried away
    r"|no module named|cannot import name|modulenotfounderror|importerror|undefined symbol"
    r"|unpicklingerror|pytorchstreamreader"
    # a host name that does not resolve (getaddrinfo's own words, whoever prints them): a
    # wrong address in the launch or a broken resolver, not an echo of another failure
    r"|name or service not known|temporary failure in name resolution"
    r"|no address associated with hostname|could not resolve host)",
    re.I,
)
# The last line of a Python traceback names the exception and what went wrong
# ("ValueError: ...", "torch.distributed.DistStoreError: ..."); CamelCase class names are
# no words to the patterns above ("\berror\b" does not match "RuntimeError").
_EXCEPTION = re.compile(r"^(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:?"
                        # a class of a module's exceptions, whatever its name ends with
                        # ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"):
                        # a CamelCase class in a module's exc / exceptions / errors
                        # namespace, at the start of a line, a colon after it
                        r"|^(?:[a-z_]\w*\.)+(?:exc|exceptions?|errors?)\.[A-Z][A-Za-z0-9]+:")
# "Traceback (most recent call last):" only says that an exception follows; the exception
# line after its frames says which.  It counts as trouble, but weakly.
_TB_HEADER = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_MEDIUM = re.compile(
    r"\b(?:error|errno|exception|failed|failure|fail|abort\w*|killed|timeout|timed out|time out"
    r"|unreachable|refused|reset by peer|broken pipe|connection closed|lost|mismatch|not found"
    r"|invalid|denied|terminat\w*|hang|stuck|exitcode|exit code|exited|signal|watchdog"
    r"|sigterm|sigabrt|traceback)",
    re.I,
)
_WEAK = re.compile(r"\b(?:warn|warning|deprecat\w*|slow|straggler|waiting|retry\w*|skipped)", re.I)
_BENIGN = re.compile(
    r"\b(?:0 errors?|no errors?|errors?[=:] ?0\b|success\w*|completed?|ok\b|init complete"
    r"|skipped=0|deprecat\w*)",
    re.I,
)
# a warning-level line that merely mentions trouble ("this can potentially cause a hang")
_WARN_LEVEL = re.compile(r"^\[W[ \d]|^W\d{4}|\bWARNING\b|\[WARN\]|\w+Warning:|^warn(?:ing)?:", re.I)
# the INFO level as loggers print it: "2025-06-03 ... INFO  msg", "[INFO] msg", "| INFO |",
# "INFO:root:msg", glog's "I1205 04:06:22.118 ..."
_INFO_LEVEL = re.compile(r"(?:^|[\s\[|])INFO(?:[\]\s|:]|$)|^I\d{4} ")
_LEVEL_ERR = re.compile(r"(?:^|[\s\[|])(?:E|ERROR|CRITICAL|FATAL)(?:[\]\s|:]|$)")


# Lines that frame an error rather than state one: Python's own traceback and chaining
# headers, the C++ stack header torch prints, rules of dashes, blank lines.  The exception
# line they frame is the event; they are its context.
_BOILERPLATE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):"
    r"|During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:"
    r"|Exception raised from .* \(most recent call first\):"
    r"|frame #\S+: .*|<omitting python frames>"
    # Python's faulthandler frames a fatal error with these; "Fatal Python error: ..." says it
    r"|(?:Current thread|Thread) \S+ \(most recent call first\):"
    r"|Extension modules: .*)\s*$"
)
# Lines that lay out a report an operator's tool printed rather than say anything: a
# banner ("==== pod x (namespace y) ===="), a section heading with nothing after it
# ("Events:"), a table's header row ("Type  Reason  Age  From  Message"), and a shell's
# trace of the command it runs next ("+ dmesg -T | grep -iE 'xid|oom'": `set -x`, whose
# words are the command's, not an outcome).  What they frame is the event.  A heading
# that names an error ("Last error:", under which torch prints what NCCL saw) introduces
# the cause on the next line: it is kept, so the matcher can read that line as the cause.
_FRAMING = re.compile(
    r"^\s*(?:={3,}.*={3,}"
    r"|(?![A-Za-z ]*\b(?:[Ee]rror|[Ff]ailure|[Ee]xception)s?\b)[A-Z][A-Za-z ]{0,30}:"
    r"|[A-Z][a-z]+(?:\s+[A-Z][a-z]+){3,}"
    r"|\+{1,3} \S.*)\s*$"
)
_WORD = re.compile(r"[A-Za-z]{3,}")
_PLACEHOLDER = re.compile(r"<[A-Z*]+>")


def has_words(template: str) -> bool:
    """Does a template say anything of its own (a word outside the placeholders)?  A blank
    line, a rule of dashes or a bare number does not."""
    return _WORD.search(_PLACEHOLDER.sub(" ", template)) is not None


#: "host      : <*>", "rank : <*> (local_rank: <*>)": one field of a structured report
_FIELD = re.compile(r"^\s*[\w-]+(?: [\w-]+)?\s*[:=]\s*<[A-Z*]+>")


def is_field(template: str) -> bool:
    """A field of a structured report (a launcher's failure summary): a key and a value
    that is all that varies.  It belongs to the report, and says nothing by itself."""
    return bool(_FIELD.match(template)) and len(_WORD.findall(_PLACEHOLDER.sub(" ", template))) <= 3


def speaks_for_itself(template: str) -> bool:
    """An exception's own line ("RuntimeError: ... can't allocate memory") or a line that
    names a cause: an event wherever it is printed, also quoted inside another program's
    report (torchrun's failure box carries the dead rank's exception)."""
    return bool(_EXCEPTION.match(template.strip())) or severity(template) >= 1.0


@lru_cache(maxsize=65536)
def is_boilerplate(template: str) -> bool:
    """True for lines that frame an error without saying what it is, lines that lay out
    a tool's report (``_FRAMING``), and lines with no word of their own (separators, blank
    lines): never an indicator by themselves."""
    return (bool(_BOILERPLATE.match(template)) or bool(_FRAMING.match(template))
            or not has_words(template))


@lru_cache(maxsize=65536)
def severity(template: str) -> float:
    """0 for routine lines, 0.15 warnings, 0.6 errors, 1.0 when a cause is named."""
    if _TB_HEADER.match(template) or _BOILERPLATE.match(template):
        return 0.3
    if _CAUSE.search(template):
        score = 1.0
    elif _MEDIUM.search(template) or _LEVEL_ERR.search(template) or _EXCEPTION.match(template):
        score = 0.6
    elif _WEAK.search(template):
        score = 0.15
    else:
        return 0.0
    if _WARN_LEVEL.search(template):
        # a warning can name a cause ("infoROM is corrupted") but did not stop the job
        score *= 0.45 if score >= 1.0 else 0.3
    elif score < 1.0 and (_BENIGN.search(template) or (
            _INFO_LEVEL.search(template) and not _LEVEL_ERR.search(template))):
        # a line its own program logged as routine ("sagemaker-training-toolkit INFO
        # Orted process exited") mentions trouble without being any
        score *= 0.3
    return score


_REPORT_LEVEL = re.compile(r"\bNCCL WARN\b|\bHCCL WARN\b|\[WARN\]|\bWARN\b:")


@lru_cache(maxsize=65536)
def reports_trouble(template: str) -> bool:
    """A line logged at error level, a library's warning report ("NCCL WARN ...") or an
    exception: whatever numbers advance in it, it does not count training steps."""
    return bool(_LEVEL_ERR.search(template) or _REPORT_LEVEL.search(template)
                or _EXCEPTION.match(template))


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
    r"|^srun: error|srun: error:|pdsh@|ssh exited with exit code|sigkill_handler|killing subprocess"
    r"|job step aborted|force terminated"
    r"|mpirun noticed|returned a non-zero exit code|exited with non-zero status"
    r"|the first process to do so was|^exit code: <\*>$|step .* cancelled at|job .* cancelled at"
    r"|terminate called after throwing|childfailederror|elastic.*(?:failed|exitcode)"
    r"|ei0002|notify wait|ei0006|getting socket times out|hccl.*timeout|ProcessGroupNCCL"
    # a store client whose server went away: the host that ran it stopped first
    r"|did the remote (?:server )?shut ?down or crash|connection was likely closed"
    r"|connection to the \S+ store has failed|rendezvousconnectionerror)",
    re.I,
)


@lru_cache(maxsize=65536)
def is_symptom(template: str) -> bool:
    """True for messages that usually echo another node's failure (see _SYMPTOM)."""
    return bool(_SYMPTOM.search(template))


# A launcher's own notices that one of its workers failed and that it stops the others
# (srun's "<host>: task 0: Exited with exit code 1", torchrun's "Sending process N closing
# signal SIGTERM", "failed (exitcode: 1)", "ChildFailedError").  Every failed job prints
# them on every node, so they are echoes; but they are the launcher's reaction to a worker
# on its own node, never a sign that the node waited on a peer.
_TEARDOWN = re.compile(
    r"\bExited with exit code\b|\bclosing signal SIG[A-Z]+|\bfailed \(exitcode\b"
    r"|ChildFailedError|\bkilling subprocess\b", re.I)


@lru_cache(maxsize=65536)
def is_teardown(template: str) -> bool:
    """True for a launcher's notices that it saw a worker fail and stops the rest."""
    return bool(_TEARDOWN.search(template))
