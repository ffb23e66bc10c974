"""Indicator and symptom lines of a real run, found in its logs from what was injected.

Why rules on the logs and not l4: truth must not come from the tool it scores.  The
injection says which node, which fault and when; these rules say which of the lines that
node printed are *about* the fault (indicators: the exception's final line, the signal in
the launcher's report, faulthandler's header) and which lines anywhere are consequences
(symptoms: peers' gloo / c10d errors, their tracebacks, every launcher's teardown).  Lines
of a traceback that carry no evidence themselves (frames, the "Traceback" header, C++
frames) get the kind ``<kind>:context``, as in :mod:`l4.sim.simulate`.

Line numbers count "\\n"-separated lines from 1, as ``benchmarks/accuracy.py`` reads them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from l4.wrapped import unwrap_lines  # noqa: E402

# a launcher's prefixes: --tee gives "[default0]:", a worker's own traceback "[rank3]: "
_PREFIX = re.compile(r"^((?:\[(?:default|rank)\d+\]:\s?)*)")

# what the culprit prints about each fault (searched in the culprit's file only)
INDICATORS: dict[str, re.Pattern] = {
    "sigkill": re.compile(r"exitcode: -9\)|exitcode\s*:\s*-9 |Signal 9 \(SIGKILL\) received"),
    "sigsegv": re.compile(r"exitcode: -11\)|exitcode\s*:\s*-11 |Signal 11 \(SIGSEGV\) received|"
                          r"Fatal Python error: Segmentation fault"),
    "oom": re.compile(r"can't allocate memory|DefaultCPUAllocator|Cannot allocate memory|out of memory",
                      re.I),
    "dl_worker_kill": re.compile(r"DataLoader worker \(pid.*(exited unexpectedly|killed by signal)"),
    "nan": re.compile(r"FloatingPointError: Loss is nan"),
    "missing_module": re.compile(r"ModuleNotFoundError: No module named"),
    "bad_ifname": re.compile(r"Unable to find address for: ib0|ib0"),
    "missing_shard": re.compile(r"No such file or directory: .*shard-\d+\.pt"),
    "truncated_ckpt": re.compile(r"PytorchStreamReader failed"),
    "ckpt_enospc": re.compile(r"No space left on device|PytorchStreamWriter failed|file write failed|"
                              r"unexpected pos"),
    "missing_eval_file": re.compile(r"No such file or directory: .*val\.pt"),
    "final_save_fail": re.compile(r"Parent directory .* does not exist"),
    "bad_sample": re.compile(r"IndexError: index -?\d+ is out of bounds"),
    "weights_mismatch": re.compile(r"Error\(s\) in loading state_dict|size mismatch for "),
    "port_in_use": re.compile(r"EADDRINUSE|address already in use"),
    "wrong_master": re.compile(r"gai error|Name or service not known|failed to connect to any network"),
    "hang": re.compile(r"(?!)"),
    "sigstop": re.compile(r"(?!)"),
    "node_down": re.compile(r"(?!)"),
    "straggler": re.compile(r"(?!)"),
}
# the lines of the exception that are evidence besides its final line, e.g. the frame
# that names the failing call ("torch.save(...)", "torch.load(...)")
KEY_FRAMES: dict[str, re.Pattern] = {
    "ckpt_enospc": re.compile(r"torch\.save\(|_save\(|zipfile\.write_record"),
    "final_save_fail": re.compile(r"torch\.save\("),
    "truncated_ckpt": re.compile(r"torch\.load\(|_open_zipfile_reader|PyTorchFileReader"),
    "weights_mismatch": re.compile(r"load_state_dict\("),
    "bad_sample": re.compile(r"BUCKET_WEIGHTS\[bucket\]"),
}

PEER = re.compile(
    r"Connection closed by peer|Connection reset by peer|Timed out waiting|wait timeout after|"
    r"DistStoreError|DistNetworkError|DistBackendError|Broken pipe|Failed to recv|"
    r"recvValueWithTimeout failed|waitForInput|timed out after|keep-alive heartbeat|Rendezvous\w*Error|"
    r"Connection refused|connect\(\) failed|Socket Timeout|Read error|sendBytes failed|"
    r"This is typically caused by a remote worker crashing|Application timeout caused pair closure|"
    r"GlooDeviceError|The client socket has failed to connect|ProcessGroupGloo.*(timeout|failed)", re.I)
TEARDOWN = re.compile(
    r"failed \(exitcode:|Sending process \d+ closing signal|ChildFailedError|\.py FAILED$|"
    r"Root Cause \(first observed failure\)|^\s*exitcode\s*:|^\s*error_file\s*:|^\s*traceback\s*:|"
    r"^Failures:|Received Signals?\.SIG\w+ death signal|SignalException|Process \d+ exited with|"
    r"Unable to shutdown process|no error file defined for parent|Signal 15 \(SIGTERM\)|"
    r"Terminated|forcefully terminating|Stopping worker group|worker group .*(FAILED|failed)|"
    r"process group .*(terminat|abort)", re.I)
_FRAME = re.compile(r"^\s+File \"|^\s+\^+\s*$|^\s{2,}\S|^Traceback \(most recent call last\):|"
                    r"^frame #\d+:|^<omitting python frames>|^Exception raised from |"
                    r"^During handling of the above exception|^The above exception was the direct cause|"
                    r"^Current thread 0x|^Thread 0x|^Extension modules:|^\s*$")
_FINAL = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)?: |^[A-Za-z_][\w.]*Error$")


def _read_lines(path: Path) -> list[str]:
    """The file's lines as the program printed them (a container runtime's wrapper, if the
    run was stored as one stores it, is not part of them; ``l4.wrapped``)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return unwrap_lines([ln.removesuffix("\r") for ln in fh.read().split("\n")])


def _split(line: str) -> tuple[str, str]:
    m = _PREFIX.match(line)
    pre = m.group(1) if m else ""
    # the stream is who printed the line ("[default0]:[rank0]:"), whatever space follows
    return re.sub(r"\s", "", pre), line[len(pre):]


_SILENT = {"hang", "sigstop", "node_down", "straggler"}  # faults that print nothing themselves
_WORKER_EXIT = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) ")
_ROOT_CAUSE = re.compile(r"^Root Cause \(first observed failure\)")
_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) ")


def _launcher_report(lines: list[str], local_rank: int) -> list[int]:
    """The culprit launcher's own report of the faulty worker's exit: its "failed
    (exitcode: N) local_rank: R" line and the exit code under "Root Cause".  When the
    worker's output is filtered (``--local-ranks-filter``) this is all the node says."""
    out, in_root = [], False
    for no, raw in enumerate(lines, 1):
        body = _split(raw)[1]
        m = _WORKER_EXIT.search(body)
        if m and int(m.group(2)) == local_rank and m.group(1) != "-15":
            out.append(no)
        if _ROOT_CAUSE.search(body):
            in_root = True
        elif in_root:
            e = _EXITCODE.search(body)
            if e:
                if e.group(1) != "-15":
                    out.append(no)
                in_root = False
    return out


def classify_file(lines: list[str], *, culprit: bool, kind: str,
                  local_rank: int | None = None) -> list[tuple[int, str, str]]:
    """(line number, role, kind) for every indicator / symptom line of one node's log.

    On the culprit, a fault that prints something but whose text never reached the file
    (the faulty rank's output filtered away) is indicated by the launcher's report of
    that worker's exit (``local_rank`` names the worker)."""
    ind = INDICATORS[kind]
    key = KEY_FRAMES.get(kind)
    out: dict[int, tuple[str, str]] = {}
    # open traceback blocks per stream (a launcher prefix), so that ranks interleaved in
    # one file keep their own tracebacks apart
    blocks: dict[str, list[int]] = {}
    for no, raw in enumerate(lines, 1):
        stream, body = _split(raw)
        if not body.strip():
            continue
        if culprit and ind.search(body):
            out[no] = ("indicators", kind)
            blk = blocks.pop(stream, None)
            for b in blk or []:
                out.setdefault(b, ("indicators", f"{kind}:context"))
            continue
        if body.startswith("Traceback (most recent call last):") or body.startswith("Fatal Python error"):
            blocks[stream] = [no]
            continue
        if stream in blocks and _FRAME.search(body):
            blocks[stream].append(no)
            if culprit and key is not None and key.search(body):
                out[no] = ("indicators", kind)
            continue
        if stream in blocks and _FINAL.search(body):
            blk = blocks.pop(stream)
            if culprit and key is not None and any(out.get(b) == ("indicators", kind) for b in blk):
                # the exception raised inside the failing call (torch.load of a truncated
                # file says "OSError: [Errno 22] Invalid argument" on torch 2.13)
                out[no] = ("indicators", kind)
                for b in blk:
                    out.setdefault(b, ("indicators", f"{kind}:context"))
                continue
            # the final line of a traceback that is not the fault's own: a consequence
            if TEARDOWN.search(body):
                k2 = "launcher_teardown"
            else:
                k2 = "peer_error" if PEER.search(body) or not culprit else "teardown"
            out[no] = ("symptoms", k2)
            for b in blk:
                if b not in out:
                    out[b] = ("symptoms", out[no][1] + ":context")
            continue
        blocks.pop(stream, None)
        if PEER.search(body):
            out[no] = ("symptoms", "peer_error")
        elif TEARDOWN.search(body):
            out[no] = ("symptoms", "launcher_teardown")
    if (culprit and kind not in _SILENT and local_rank is not None
            and not any(role == "indicators" for role, _ in out.values())):
        for no in _launcher_report(lines, local_rank):
            out[no] = ("indicators", f"{kind}_worker_exit")
    return sorted((no, role, k) for no, (role, k) in out.items())


def extract_truth(job_dir: Path, *, kind: str, culprit: str, hosts: list[str], at_iter: int | None,
                  local_rank: int | None = None) -> dict:
    """``indicators`` and ``symptoms`` of a failed real run, in :mod:`l4.sim.simulate`'s format."""
    indicators, symptoms = [], []
    for host in hosts:
        for suffix in ("log", "out", "err"):  # .out and .err: stdout and stderr apart
            rel = f"logs/{host}.{suffix}"
            path = job_dir / rel
            if not path.exists():
                continue
            for no, role, k in classify_file(_read_lines(path), culprit=host == culprit, kind=kind,
                                             local_rank=local_rank):
                (indicators if role == "indicators" else symptoms).append(
                    {"file": rel, "line": no, "kind": k})
    return {"indicators": indicators, "symptoms": symptoms}
