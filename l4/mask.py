"""Masking made for training logs: one function shared by the fast path and plain drain3.

The fast parser collapses every digit to ``0`` (``bytes.translate``, gigabytes per second)
before it groups lines, and masks each *distinct* collapsed line once.  That is only
correct if masking cannot tell ``7`` from ``0``; every rule here therefore uses digit
*classes* (never a particular digit) and replaces whole digit-bearing tokens, so that
``mask_line(x) == mask_line(collapse_digits(x))`` for every ``x`` (a property test holds
us to it).  Plain drain3 fed ``mask_line(raw)`` and the fast path then see the same text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

WILDCARD = "<*>"

#: bytes.translate table mapping the ten ASCII digits to ``0``.
DIGIT_TABLE = bytes.maketrans(b"123456789", b"000000000")
_STR_DIGIT_TABLE = str.maketrans("123456789", "000000000")

# Prefixes that say *who* wrote a line, not *what* happened: torchrun's [rank3]: and
# [default3]:, Slurm --label "  3: ", pdsh "node-021: " / "cn210: ", kubectl --prefix, mpirun
# [1,3]<stdout>:.  They never consume the message's own indentation.  A bare word with a
# number ("cn210: ") is a host name, unless it is a counter a message may start with.
_WHO_RE = re.compile(
    r"^(?:"
    r"\[(?:rank|default)\d+\]:"
    r"|\s*\d+: "
    r"|[A-Za-z][\w.]*-(?=[\w.\-]*\d)[\w.\-]*+: "
    r"|(?!(?:epoch|step|iter|iteration|batch|layer|loss|stage|phase|round|part|test)\d)"
    r"[a-z][a-z]*\d[a-z\d]*(?:\.[a-z][\w\-]*)*: "
    r"|\[\d+,\d+\]<std(?:out|err)>:"
    # mpirun's tagged output as SageMaker writes it: "[1,mpirank:22,algo-6]<stderr>:"
    r"|\[\d+,mpirank:\d+,[\w.\-]+\]<std(?:out|err)>:"
    # a process gatherer's origin tag: Ray's "(WorkerDict pid=3182044, ip=10.0.0.7) ",
    # SkyPilot's "(worker2, rank=2, pid=356686, ip=10.239.77.30) "
    r"|\([^()\n]{0,80}\bpid=\d+[^()\n]{0,60}\) "
    r"|\[pod/[^\]\s]+\] "
    # a container or task id and a rank tag before a "||" column, Determined AI's trial
    # logs: "78cd38d8 [rank=3] || ", "         || " (the master's own lines)
    r"|[\w.\-]*\s*(?:\[\w+=\d+\]\s*)?\|\| "
    r")"
)

# Leading timestamps in the formats training stacks print (ISO, Megatron's
# "[2024-05-01 12:00:00]", syslog "May  1 12:00:00", k8s RFC3339).
_LEAD_TS_RE = re.compile(
    r"^ ?\[?\d{4}-\d\d-\d\d[T \-_]\d\d:\d\d:\d\d(?:[.,:]\d+)*(?:Z|[+-]\d\d:?\d\d)?\]? ?"
    r"|^ ?(?:[A-Z][a-z]{2} )?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?: \d{4})? ?"
)

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
#: top-level domains common enough that a dotted name ending in one is a host name.  Left
#: out: country codes that are source-file suffixes (.py .sh .so .pt .rs .md .cc) and names
#: that end Python attributes (torch.int, logging.info, threading.local)
_TLD = (r"(?:com|net|org|edu|gov|mil|biz|io|ai|cn|hk|jp|kr|tw|sg|uk|de|fr|nl|ru"
        r"|eu|au|ca|br|localdomain|internal|arpa)")
#: one DNS label: letters, digits, dashes (no leading dash)
_LABEL = r"[A-Za-z\d][A-Za-z\d\-]*"
#: a host name: dotted labels ending in a known TLD, or any dotted/dashed name with a
#: number in a dashed part (node-17, gpu-a100-03.cluster, ip-10-0-3-7.ec2)
_HOSTNAME = (rf"(?:{_LABEL}\.)+{_TLD}(?![\w\-]|\.\w)"
             # any name of three or more labels in front of a port (not file.py:12)
             rf"|(?:{_LABEL}\.){{2,}}[A-Za-z]{{2,}}(?=:\d)"
             r"|[A-Za-z][\w]*(?:-[\w]+)*-\d+[\w]*(?:\.[A-Za-z][\w\-]*)+(?![\w\-])")
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"


def _host_or_address(m: re.Match[str]) -> str:
    """A host name followed by a port is an address; on its own it is a host."""
    return "<ADDR>" if m.group(1) else "<HOST>"


#: a progress bar's "[elapsed<remaining": clocks, not numbers a counter could be read from
_BAR_CLOCKS_RE = re.compile(r"\[(?:\d+:)?\d{1,2}:\d\d<(?:(?:\d+:)?\d{1,2}:\d\d\b|\?)")
_GLOG_TS_RE = re.compile(r"\[([IWEF])\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?")
#: a word that says the clock after it is a span of time, not a time of day
_TIMEDELTA_RE = re.compile(
    r"(?i)(\b(?:time|elapsed|remaining|eta|left|took|duration|uptime|runtime)\b[^0-9|,;\n]{0,16}?)"
    r"(?<![\w\-:])(?:\d+ days?, )?\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b")
_ISO_TS_RE = re.compile(r"\d{4}-\d\d-\d\d[T \-_]?\d\d:\d\d:\d\d(?:[.,:]\d+)*(?:Z|[+-]\d\d:?\d\d)?")

#: (pattern, replacement, a substring the pattern cannot match without: skip it when absent)
_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str], str | None]] = [
    # URLs first: their host, port and path are one value (scheme://anything up to a space)
    (re.compile(r"(?<![\w+.\-])[A-Za-z][A-Za-z\d+.\-]*://[^\s\"'<>()\[\]{},;]+"), "<URL>", "://"),
    # a progress bar's "[elapsed<remaining": "[1:51:26<1:00:39" and "[1:50:29<59:03" are one
    # shape (hours appear and go as a bar runs; else its counter splits in two)
    (_BAR_CLOCKS_RE, "[<DUR><<DUR>", "<"),
    # glog/c10 level prefixes "[W1110 20:20:28.519282102 socket.cpp:752]": keep the level
    # letter (a warning must stay recognisable as one), drop the date and time
    (_GLOG_TS_RE, r"[\1 <TS>", "["),
    # timestamps anywhere (plog "2024-05-01-12:00:00.123.456", ISO, times), ctime and
    # syslog dates ("Fri Jul  1 07:57:30 2005", "Mon Sep 27 22:15:07 EDT 2004", "Jul 1 07:57:30")
    (_ISO_TS_RE, "<TS>", "-"),
    (re.compile(rf"\b(?:{_WEEKDAY},? +)?{_MONTH} +\d{{1,2}},? +(?:\d{{4}} +)?\d\d:\d\d:\d\d"
                r"(?:[.,]\d+)?(?: +[A-Z]{3,4}(?![\w]))?(?: +\d{4}\b)?"), "<TS>", ":"),
    # a span of time printed as Python prints a timedelta ("remaining time: 1 day, 7:03:17",
    # "elapsed 9:59:58" and later "elapsed 10:00:03"): one value, whatever its hours; else
    # the hours' digit count and the days split a counter line into interleaved shapes
    # (H:MM:SS for one-digit hours, a clock for two), and neither shape counts its steps
    (_TIMEDELTA_RE, r"\1<DUR>", ":"),
    (re.compile(r"(?<![\w\-:])\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<TS>", ":"),
    # file system paths with at least two components (URL paths after a method too); before
    # the host and hex rules, so a path is one value whatever its components look like
    (re.compile(r"(?<![\w<>])(?:~|\.{1,2})?(?:/[\w.@%+=,\-]+){2,}/?(?:\?[^\s\"'<>]*)?"), "<PATH>", "/"),
    # UUIDs (request, instance, volume ids)
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
     "<UUID>", "-"),
    # PCI ids 0000:3b:00.0 / 00000000:3B:00.0
    (re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d\b"), "<PCI>", ":"),
    # network endpoints: an IP or host name with a port is one address, whichever it is
    (re.compile(rf"(?<![\w.\-])(?:localhost(?=[:<]\d)|(?=[\w.\-]*\.[A-Za-z])(?:{_HOSTNAME}))"
                r"(:\d{1,5}\b|<\d+>)?"), _host_or_address, None),
    (re.compile(rf"\b{_IPV4}(?::\d{{1,5}}\b|<\d+>)"), "<ADDR>", "."),
    # an IP, or a list of them (X-Forwarded-For), is one address
    (re.compile(rf"\b{_IPV4}(?:, ?{_IPV4})*\b"), "<IP>", "."),
    # IPv6-ish and MAC/GUID-like hex groups containing a digit
    (re.compile(r"\b(?=[0-9a-fA-F:]*\d)[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{0,4}){3,7}\b"), "<HEX>", ":"),
    # a float in scientific notation is one number: the long mantissa of
    # "1.4999999999999998e-06" must not read as a run of hex digits (three wildcards), or
    # one metrics line makes a new template whenever its learning rate is printed that way
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?[eE][-+]?\d+(?![\w.])"), WILDCARD, None),
    # hex literals; a bare run of hex digits is a number that may happen to hold no letter,
    # so it is the generic wildcard (40000500 and c0000700 are the same field)
    (re.compile(r"\b\d[xX][0-9a-fA-F]+\b"), "<HEX>", None),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), WILDCARD, None),
    # progress bars: the bar's fill and the rate change every redraw, the message does not
    (re.compile(r"\|[█▏▎▍▌▋▊▉#=>\- ]*\|"), "|<BAR>|", "|"),
    (re.compile(r"(?:\d+(?:\.\d+)?|\?)\s?(?:s/it|it/s|s/step|steps?/s|examples/s|ba/s|s/ba)\b"), "<RATE>", "/"),
    # sizes and durations with their unit are one value ("1190 bytes", "1.16 KB", "<1 sec",
    # "12ms"); a size restated in parentheses ("1190 bytes (1.16 KB)") is the same value
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)? ?(?:[KMGTP]i?B|[kmgt]b|bytes?|B)(?![\w])"), "<SIZE>", None),
    (re.compile(r"<SIZE> \(<SIZE>(?:, <SIZE>)*\)"), "<SIZE>", "<SIZE> ("),
    (re.compile(r"(?<![\w.])[<>~]?\d+(?:\.\d+)? ?(?:ns|us|µs|ms|s|secs?|seconds?|mins?|minutes?"
                r"|h|hrs?|hours?|days?|(?:milli|micro|nano)seconds?)(?![\w])"), "<DUR>", None),
    # tensor shapes torch.Size([4096, 1024]) / [4096, 1024] / (8, 512)
    (re.compile(r"\[\s*\d+(?:\s*,\s*\d+)+\s*\]"), "<SHAPE>", "["),
    (re.compile(r"\(\s*\d+(?:\s*,\s*\d+)+\s*\)"), "<SHAPE>", "("),
    # a number with thousands separators is one number: "wps: 1,009" and "wps: 961" are one
    # line's shape (else each redraw of a throughput makes its own template)
    (re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,])"), WILDCARD, ","),
    # any remaining token that carries a digit: numbers, floats, rank3, cuda:0, 1.2E+03 (tried
    # only where a token starts: the same matches, but linear on long digit-free tokens)
    (re.compile(r"(?<![\w.+\-])[\w.+\-]*\d[\w.+\-]*"), WILDCARD, None),
]

_SPACES_RE = re.compile(r"\s+")


def collapse_digits(text: str) -> str:
    """Map every ASCII digit to ``0``; the fast path's cheap pre-grouping key."""
    return text.translate(_STR_DIGIT_TABLE)


#: after a syslog or journald date, the host and the program that wrote the line
#: ("dgx0806 torchrun[505915]: ", "combo sshd(pam_unix)[19939]: ", "node3 kernel: ")
_SYSLOG_WHO_RE = re.compile(r"^[A-Za-z][\w.\-]* [\w.\-/]+(?:\([\w.\-]+\))?(?:\[\d+\])?: ")
_SYSLOG_DATE_RE = re.compile(r"^ ?(?:[A-Z][a-z]{2} )?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ")


def _strip_who_when(line: str) -> str:
    for _ in range(3):
        cut = _WHO_RE.sub("", line, count=1)
        if _SYSLOG_DATE_RE.match(cut):
            cut = _SYSLOG_WHO_RE.sub("", _SYSLOG_DATE_RE.sub("", cut, count=1), count=1)
        else:
            cut = _LEAD_TS_RE.sub("", cut, count=1)
        if cut == line:
            break
        line = cut
    return line


def strip_prefix(line: str) -> str:
    """Drop rank/launcher/host prefixes and a leading timestamp: they say who and when."""
    return _strip_who_when(line).lstrip()


_CONT_RE = re.compile(r"^(?:\s+File \"|\s{4,}\S|\t+(?:at |\.\.\. \d+ more|/)|\s*[~^]{3,}\s*$"
                      r"|frame #\d+: )")


#: an exception line, however indented: a child's traceback quoted inside a launcher's
#: error summary ("  traceback : Traceback ..." then "  RuntimeError: DataLoader worker
#: ... is killed") ends with the line that says what went wrong
_INDENTED_EXCEPTION_RE = re.compile(
    r"^\s+(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:")


#: a line indented deeper than a traceback's code line (eight spaces or more) that reports
#: a failure: Ascend CANN prints its error details so ("        rtGetDevMsg execute
#: failed, reason=[driver error:internal error]..."), each naming a cause
_DEEP_FAILURE_RE = re.compile(r"^\s{8,}\S.*\b(?:[Ff]ail(?:ed|ure)?|[Ee]rror)\b")


#: a field of an indented report aligned in columns ("      Reason:       OOMKilled",
#: "      Exit Code:    137" under a pod's "State: Terminated"): each states a fact of its
#: own, not a line of code under a traceback frame (code puts one space after a colon)
_ALIGNED_FIELD_RE = re.compile(r"^\s{4,}[A-Z][\w ()./-]{0,40}:\s{2,}\S")


def is_continuation(line: str) -> bool:
    """A line that continues the record above it: Python traceback frames and their code
    lines (indented), caret markers, C++ ``frame #N:`` stack lines, Java's and Go's
    tab-indented frames.  Other tab-indented lines are details an error lists, one per
    problem (PyTorch's "\tsize mismatch for ..."): each names a cause, so it is a record.
    A single leading space is not enough (Megatron's iteration lines start with one), and an
    exception line is a record of its own even when indented: it is the informative end of
    a traceback; so is a field of a report aligned in columns (``kubectl describe``'s
    "Reason:       OOMKilled")."""
    text = _strip_who_when(line)
    return (bool(_CONT_RE.match(text)) and not _INDENTED_EXCEPTION_RE.match(text)
            and not _DEEP_FAILURE_RE.match(text) and not _ALIGNED_FIELD_RE.match(text))


def mask_line(line: str) -> str:
    """The masked message of one raw line, as fed to drain3 (prefixes dropped)."""
    body = strip_prefix(line.rstrip("\r\n"))
    for pattern, repl, needle in _RULES:
        if needle is None or needle in body:
            body = pattern.sub(repl, body)
    return _SPACES_RE.sub(" ", body).strip()


_NUM_RE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_ANY_TS_RE = _GLOG_TS_RE
_CLOCK_RE = _ISO_TS_RE
_ANY_CLOCK_RE = re.compile(f"{_ANY_TS_RE.pattern}|{_CLOCK_RE.pattern}")


def numbers_in(line: str) -> list[float]:
    """Free-standing numbers of a raw line, timestamps excluded (for iteration markers)."""
    body = _ANY_CLOCK_RE.sub(" ", strip_prefix(line))
    return [float(m.group(0)) for m in _NUM_RE.finditer(body)]


_PATHLIKE_RE = re.compile(r"\S*/\S*")
# host names and job names with digits: ip-10-0-2-21, gpu-a17, rr-dev-54-3x2-f163
_NAMEISH_RE = re.compile(r"(?<![\w.-])[A-Za-z][\w.]*-[\w.-]*\d[\w.-]*")


def named_numbers(line: str) -> list[float]:
    """The numbers a message names (``numbers_in``), not the digits of the host names and
    directories it mentions; of a path, its file name's digits ("step_000015.pt" names
    15).  "[Rank 2] Saving model checkpoint: /ckpt/ip-10-0-2-20/step_000015.pt" names 2
    and 15, not 20."""
    def base(m: re.Match[str]) -> str:
        name = m.group(0).rstrip("/").rsplit("/", 1)[-1]
        return " " + " ".join(re.findall(r"\d+", name)) + " "

    return numbers_in(_NAMEISH_RE.sub(" ", _PATHLIKE_RE.sub(base, line)))


def digit_runs(line: str) -> list[int]:
    """Every run of digits in a raw line, timestamps excluded, also those inside words:
    the iteration in "iter_0000100" or "checkpoint-2500" is a name's part, not free-standing."""
    body = _ANY_CLOCK_RE.sub(" ", strip_prefix(line))
    return [int(m) for m in re.findall(r"\d+", body)]


_DECIMAL_RE = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def decimals_in(line: str) -> list[float]:
    """Measured values of a raw line: numbers with a decimal point, timestamps excluded.
    (Integers are mostly identities: ranks, pids, ports, step numbers.)"""
    body = _ANY_CLOCK_RE.sub(" ", strip_prefix(line))
    return [float(m.group(0)) for m in _DECIMAL_RE.finditer(body)]


def number_spans(line: str) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """(timestamp span, spans of free-standing numbers) in ``line``'s own offsets.

    Digit-class regexes give the same spans for a raw line and its digit-collapsed key, so
    the layout of a key is computed once and every line of that key is sliced at the same
    offsets (the fast path reads iteration numbers and timestamps without a regex per line).
    """
    ts = _ANY_TS_RE.search(line)
    ts_span = ts.span() if ts else None
    blocked: list[tuple[int, int]] = []
    for rx in (_ANY_TS_RE, _CLOCK_RE, _BAR_CLOCKS_RE):
        blocked.extend(m.span() for m in rx.finditer(line))
    prefix = len(line) - len(strip_prefix(line))
    spans = []
    for m in _NUM_RE.finditer(line, prefix):
        a, b = m.span()
        if any(x <= a < y for x, y in blocked):
            continue
        spans.append((a, b))
    return ts_span, spans
