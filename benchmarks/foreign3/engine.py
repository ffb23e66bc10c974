"""Core model of a synthetic multi-node job: nodes, ranks, clocks and the
per-node chunk writer that produces byte-exact log files plus truth items.

Everything here is deterministic given the job's random stream."""
from __future__ import annotations

import datetime as _dt
import math

UTC = _dt.UTC


def ceil_to(x: int, k: int) -> int:
    return int(math.ceil(x / k) * k) if k > 1 else x


class Node:
    def __init__(self, idx, name, ip, skew, rpn, pid0):
        self.idx = idx
        self.name = name
        self.ip = ip
        self.skew = skew
        self.rpn = rpn
        self.pids = [pid0 + 7 * i for i in range(rpn)]
        self.agent_pid = pid0 - 13

    def grank(self, lr):
        return self.idx * self.rpn + lr


class Chunk:
    __slots__ = ("t", "order", "raw", "tag")

    def __init__(self, t, order, raw, tag):
        self.t, self.order, self.raw, self.tag = t, order, raw, tag


class Job:
    """One run (failed or baseline). `style` renders, the caller drives."""

    def __init__(self, rng, style, cfg, hosts, ips, skews, role):
        self.rng = rng
        self.style = style
        self.cfg = cfg            # shared configuration dict (same for baselines)
        self.role = role          # 'failed' | 'baseline'
        rpn = cfg["rpn"]
        self.nodes = [Node(i, h, ips[i], skews[i], rpn, rng.randrange(1200, 390000))
                      for i, h in enumerate(hosts)]
        self.chunks = {n.idx: [] for n in self.nodes}
        self._order = 0
        self.dead = set()          # node idx whose file has ended (power loss)
        self.world = rpn * len(hosts)

    # ---------------------------------------------------------------- output
    def raw(self, node_idx, t, raw, tag=None):
        if node_idx in self.dead:
            return
        self._order += 1
        self.chunks[node_idx].append(Chunk(t, self._order, raw, tag))

    def line(self, node_idx, t, text, tag=None):
        self.raw(node_idx, t, text + "\n", tag)

    def lines(self, node_idx, t, items, dt=0.0005):
        """items: list of str or (str, tag)."""
        for i, it in enumerate(items):
            if isinstance(it, tuple):
                self.line(node_idx, t + i * dt, it[0], it[1])
            else:
                self.line(node_idx, t + i * dt, it)
        return t + len(items) * dt

    # process output routed through the style (prefixes, relaying)
    def proc(self, node, lr, t, text, tag=None, stream="stderr"):
        dest, prefixed = self.style.route(self, node, lr, text, stream, t)
        if dest is None:
            return
        self.line(dest, t, prefixed, tag)

    def proc_lines(self, node, lr, t, items, stream="stderr", dt=0.0003):
        for i, it in enumerate(items):
            if isinstance(it, tuple):
                self.proc(node, lr, t + i * dt, it[0], it[1], stream)
            else:
                self.proc(node, lr, t + i * dt, it, None, stream)
        return t + len(items) * dt

    # ---------------------------------------------------------------- clocks
    def wall(self, node, t):
        """node-local wall clock (glog/c10/elastic lines use the host's local time)."""
        return self.local(node, t)

    def local(self, node, t):
        off = self.cfg.get("tz_offset_h", 0)
        return _dt.datetime.fromtimestamp(t + node.skew, tz=_dt.timezone(_dt.timedelta(hours=off)))

    # ---------------------------------------------------------------- render
    def render(self, crlf=False):
        """Return {node_name: (bytes, [truth items])}."""
        out = {}
        for n in self.nodes:
            chunks = sorted(self.chunks[n.idx], key=lambda c: (c.t, c.order))
            buf = []
            tagged = []
            lineno = 1
            for c in chunks:
                if c.tag is not None:
                    tagged.append((lineno, c.tag))
                buf.append(c.raw)
                lineno += c.raw.count("\n")
            text = "".join(buf)
            if crlf:
                text = text.replace("\n", "\r\n")
            lines = text.split("\n")
            items = []
            seen = set()
            for ln, tag in tagged:
                if (ln, tag[0]) in seen:
                    continue
                seen.add((ln, tag[0]))
                lt = lines[ln - 1]
                if lt.endswith("\r"):
                    lt = lt[:-1]
                items.append({"role": tag[0], "kind": tag[1],
                              "node": tag[2] if len(tag) > 2 and tag[2] else n.name,
                              "file": f"logs/{n.name}.log", "line": ln, "text": lt})
            out[n.name] = (text.encode("utf-8"), items)
        return out


# ---------------------------------------------------------------- helpers
def ind(kind, origin=None):
    return ("indicator", kind, origin)


def sym(kind, origin=None):
    return ("symptom", kind, origin)


def fmt_hms(sec):
    sec = int(max(sec, 0))
    h, r = divmod(sec, 3600)
    m, s = divmod(r, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm_bar(n, total, elapsed, rate_s_it, width=10, prefix=""):
    frac = n / total if total else 0
    pct = int(frac * 100)
    full = int(frac * width)
    rem = frac * width - full
    parts = " ▏▎▍▌▋▊▉"
    bar = "█" * full
    if full < width:
        bar += parts[int(rem * 8)].replace(" ", " ") if int(rem * 8) else " "
        bar += " " * (width - full - 1)
    remaining = (total - n) * rate_s_it
    if rate_s_it >= 1 or rate_s_it == 0:
        rate = f"{rate_s_it:5.2f}s/it"
    else:
        rate = f"{1 / rate_s_it:5.2f}it/s"
    return f"{prefix}{pct:3d}%|{bar}| {n}/{total} [{fmt_hms(elapsed)}<{fmt_hms(remaining)}, {rate}]"


def hexaddr(rng, hi=0x7f):
    return f"0x{hi:x}{rng.randrange(0x1000000000, 0xffffffffff):010x}"


def py_traceback(frames, final, chained=None):
    """frames: list of (file, line, func, code). Returns list of (text, kindsuffix)."""
    out = [("Traceback (most recent call last):", "context")]
    for f, ln, fn, code in frames:
        out.append((f'  File "{f}", line {ln}, in {fn}', "context"))
        if code:
            out.append((f"    {code}", "context"))
    if isinstance(final, str):
        final = [final]
    for i, fl in enumerate(final):
        out.append((fl, "key" if i == 0 else "context"))
    return out
