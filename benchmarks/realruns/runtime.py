"""A launcher's output stored as a container runtime stores it: every line wrapped with the
time it was written.

On Kubernetes a job's log is the runtime's file, not what the program printed: containerd
and CRI-O write ``<RFC 3339 time> <stream> F|P <line>`` (``P`` for each 16 KiB piece of a
longer line), Docker's json-file driver ``{"log":"<line>\\n","stream":...,"time":...}`` (a
piece without its newline).  ``--runtime cri|docker`` in ``make_runs.py`` captures each
launcher's stdout and stderr as two pipes, as the runtime does, and writes their lines with
the time each was read: the times are real, and so are the runtime's interleaving and
splitting.  (l4 reads such files through ``l4.wrapped``.)
"""

from __future__ import annotations

import json
import threading
import time
from typing import BinaryIO

#: the longest piece of a line a runtime writes as one record (containerd's and Docker's)
PIECE = 16 * 1024
KINDS = ("none", "cri", "docker", "split")  # split: two plain files (make_runs.py)


def rfc3339nano(ns: int) -> str:
    """Go's ``time.RFC3339Nano`` in UTC (trailing zeros of the fraction trimmed)."""
    sec, frac = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    digits = f"{frac:09d}".rstrip("0")
    return f"{base}.{digits}Z" if digits else f"{base}Z"


def _go_json(text: str) -> str:
    """A JSON string as Go's encoder writes it: UTF-8 kept, and <, >, & escaped."""
    s = json.dumps(text, ensure_ascii=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def records(kind: str, line: bytes, stream: str, ns: int) -> bytes:
    """The runtime's records for one line the program wrote (``line`` ends in a newline,
    except a last line cut off when the program exited)."""
    whole = line.endswith(b"\n")
    body = line[:-1] if whole else line
    pieces = [body[i:i + PIECE] for i in range(0, len(body), PIECE)] or [b""]
    out = []
    stamp = rfc3339nano(ns)
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        if kind == "cri":
            tag = "F" if last and whole else "P"
            out.append(f"{stamp} {stream} {tag} ".encode() + piece + b"\n")
        else:
            text = piece.decode("utf-8", "replace") + ("\n" if last and whole else "")
            out.append(('{"log":' + _go_json(text) + f',"stream":"{stream}","time":"{stamp}"}}\n')
                       .encode())
    return b"".join(out)


class RuntimeLog:
    """One container's log file: a thread per stream copies the program's lines into it,
    wrapped (``records``), as they arrive."""

    def __init__(self, fh: BinaryIO, kind: str):
        self.fh = fh
        self.kind = kind
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def attach(self, pipe: BinaryIO, stream: str) -> None:
        t = threading.Thread(target=self._pump, args=(pipe, stream), daemon=True)
        t.start()
        self.threads.append(t)

    def _pump(self, pipe: BinaryIO, stream: str) -> None:
        with pipe:
            for line in iter(pipe.readline, b""):
                data = records(self.kind, line, stream, time.time_ns())
                with self.lock:
                    self.fh.write(data)
                    self.fh.flush()

    def join(self, timeout: float = 10.0) -> None:
        for t in self.threads:
            t.join(timeout)
