"""Timestamps as training stacks print them, to epoch seconds of the wall clock they show.

A host's lines come from many programs: torchrun, Python's logging and dmesg print local
time with no zone, a structured logger may add its offset ("17:53:11.230+09:00").  Read
apart, the two would disagree by the offset, hours, on one node.  So every time is read as
the wall clock it shows (as if UTC), and a printed offset is left aside: lines of one host
stay on one clock, which is what ordering a failure needs.

Only a handful of lines per node are ever parsed (first/last lines, first occurrence of each
event, iteration markers), so clarity beats speed here.
"""

from __future__ import annotations

import calendar
import math
import re

import numpy as np

_MONTHS = {m: i for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)}

# 2024-05-01 12:00:00,123 | 2024-05-01T12:00:00.123Z | 2024-05-01-12:00:00.123.456 (plog)
_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T \-_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:[.:](\d{1,6}))?"
    r"(Z|[+-]\d\d:?\d\d)?"
)
# 2024/05/01 12:00:00 | 05/01/2024 12:00:00 - INFO - transformers.trainer (the %m/%d/%Y of
# Hugging Face's and accelerate's example scripts) | [05/01/24 12:00:00] (Rich's "%x %X",
# ColossalAI's logger): month first, as those print it, unless it cannot be a month
_YMD_SLASH = re.compile(r"(?<![\d/])(\d{4})/(\d\d)/(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_MDY_SLASH = re.compile(r"(?<![\d/])(\d\d)/(\d\d)/(\d{4}|\d\d)[ ,]+(\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
# [Wed May  1 12:00:00 2024] (dmesg -T)
_DMESG_T = re.compile(r"\b([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\b")
# "Oct  9 12:42:15 host kernel: ..." (syslog, journalctl): no year
_SYSLOG = re.compile(r"^(?:[A-Z][a-z]{2} )?([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.\d+)?(?! \d{4})\b")

# glog, as torch, torchrun, NCCL's C++ side and absl print it: "W1201 08:11:41.657000 7427
# file.cc:12] ..." (level letter, month, day; no year), possibly after who-prefixes, and
# c10's own logging since torch 2.3, without a thread id and in brackets:
# "[E0726 19:03:27.741584736 ProcessGroupNCCL.cpp:616] [Rank 15] Watchdog caught ..."
# c10 prints month * 100 + day unpadded: "[E324 15:38:29.094793960 ...]" is 24 March, so
# the month may be one digit
_GLOG = re.compile(r"(?:^|[\s\]:\[])[IWEF](\d\d?)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?"
                   r"(?:\s+\d+ |\s+[\w./-]+:\d+\])")

#: Times below this are *yearless* (syslog): month, day and time of day packed as
#: ``((month * 32 + day) * 86400 + seconds of day)``, placed in a year by
#: :func:`place_yearless` once the job's dated lines say which year it ran in.
YEARLESS_MAX = 1e8


def parse_ts(line: str) -> float:
    """Epoch seconds of the first timestamp in ``line``, or ``nan``."""
    m = _ISO.search(line, 0, 200)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
            return math.nan
        frac = m.group(7)
        t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + (
            int(frac) / 10 ** len(frac) if frac else 0.0
        )
        return float(t)  # a printed offset is left aside (module docstring)
    slashed = _slashed(line)
    if not math.isnan(slashed):
        return slashed
    m = _DMESG_T.search(line, 0, 200)
    if m and m.group(1) in _MONTHS:
        mo, d, h, mi, s, y = _MONTHS[m.group(1)], *(int(g) for g in m.groups()[1:])
        return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    # syslog stamps without a year ("Oct 14 12:11:11"): kept as a yearless time for now,
    # placed in a year later (better no time than a time in 1970)
    m = _SYSLOG.search(line, 0, 40)
    if m and m.group(1) in _MONTHS:
        mo, d, h, mi, s = _MONTHS[m.group(1)], *(int(g) for g in m.groups()[1:])
        if 1 <= d <= 31 and h < 24 and mi < 60 and s < 62:
            return float((mo * 32 + d) * 86400 + h * 3600 + mi * 60 + s)
    m = _GLOG.search(line, 0, 120)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        frac = m.group(6)
        if 1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62:
            return float((mo * 32 + d) * 86400 + h * 3600 + mi * 60 + s) + (
                int(frac) / 10 ** len(frac) if frac else 0.0)
    return math.nan


def _slashed(line: str) -> float:
    """Epoch seconds of a date written with slashes (see ``_YMD_SLASH``), or nan."""
    m = _YMD_SLASH.search(line, 0, 200)
    if m:
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    else:
        m = _MDY_SLASH.search(line, 0, 200)
        if not m:
            return math.nan
        mo, d, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if mo > 12 and d <= 12:
            mo, d = d, mo  # 25/12/2024: day first
        if y < 100:
            y += 2000
    h, mi, sec = (int(g) for g in m.groups()[3:6])
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and sec < 62):
        return math.nan
    frac = m.group(7)
    return float(calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))) + (
        int(frac) / 10 ** len(frac) if frac else 0.0)


def place_yearless(ts: np.ndarray, ref: float) -> np.ndarray:
    """Epoch seconds for the yearless times in ``ts`` (see :data:`YEARLESS_MAX`): the year
    that puts each closest to ``ref``, a dated time of the same job (a job that runs over
    New Year's Eve gets December in one year and January in the next).  Others unchanged;
    without a reference yearless times become ``nan``."""
    ts = np.array(ts, dtype=np.float64, copy=True)
    yl = ~np.isnan(ts) & (ts < YEARLESS_MAX)
    if not yl.any():
        return ts
    if math.isnan(ref):
        ts[yl] = np.nan
        return ts
    v = ts[yl]
    secs = np.mod(v, 86400.0)
    dd = (v // 86400).astype(np.int64)
    mo, d = dd // 32, dd % 32
    y0 = int(np.floor(ref / (365.2425 * 86400))) + 1970
    best = np.full(v.shape, np.nan)
    for y in (y0 - 1, y0, y0 + 1):
        t = _days_from_civil(np.full(v.shape, y), mo, d) * 86400.0 + secs
        better = np.isnan(best) | (np.abs(t - ref) < np.abs(best - ref))
        best = np.where(better, t, best)
    ts[yl] = best
    return ts


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 for proleptic Gregorian dates, vectorised (H. Hinnant)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def ts_layout(key: str) -> tuple[int, int, list[tuple[int, int]]] | None:
    """Where the ISO timestamp sits in a digit-collapsed key: (start, end, group spans).

    Lines sharing a key share this layout, so :func:`ts_from_matrix` can read all of their
    timestamps with array arithmetic.  ``None`` when the key has no ISO timestamp.  A
    printed offset is left aside, as :func:`parse_ts` leaves it.
    """
    m = _ISO.search(key, 0, 200)
    if not m:
        return None
    a = m.start()
    groups = [(m.start(g) - a, m.end(g) - a) if m.group(g) else (0, 0) for g in range(1, 8)]
    return a, m.end(), groups


def ts_from_matrix(mat: np.ndarray, groups: list[tuple[int, int]]) -> np.ndarray:
    """Epoch seconds from an (n, width) uint8 matrix of same-layout ISO timestamps (see
    :func:`ts_layout`), with array arithmetic only."""
    digits = mat.astype(np.int64) - 48
    n = len(digits)

    def field(span: tuple[int, int]) -> np.ndarray:
        s, e = span
        if e <= s:
            return np.zeros(n, np.int64)
        powers = 10 ** np.arange(e - s - 1, -1, -1, dtype=np.int64)
        return digits[:, s:e] @ powers

    y, mo, d, h, mi, sec = (field(g) for g in groups[:6])
    fs, fe = groups[6]
    frac = field(groups[6]) / float(10 ** (fe - fs)) if fe > fs else 0.0
    days = _days_from_civil(y, mo, d)
    return days * 86400.0 + h * 3600 + mi * 60 + sec + frac
