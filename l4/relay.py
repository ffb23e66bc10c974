"""Relayed lines: output one node printed on behalf of another.

A driver that gathers its workers' output prints their lines in its own log, each behind a
prefix that says where it came from: Ray's ``(WorkerDict pid=3182044, ip=192.168.54.27)``,
pdsh's ``worker-3: ``.  When the worker dies, the driver's log holds the worker's error,
often more of it and with the driver's own failure after it, so the driver looks like the
culprit.  The prefix names the node that printed the line first ("who names whom"); that
node's evidence, not the driver's.

Only a leading group is read (a bracketed or parenthesised first token that holds an
address or a node's name, or a node's name before a colon): an address in the middle of a
line is a peer the line talks about, which ``l4.spatial.named_by_peers`` reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from l4.merge import ParsedJob

IPV4 = re.compile(r"(?<![\d.])((?:\d{1,3}\.){3}\d{1,3})(?![\d.])")
# "(WorkerDict pid=3182044, ip=192.168.54.27) msg", "[10.0.0.7] msg", and mpirun's tagged
# output as SageMaker prints it: "[1,mpirank:22,algo-6]<stderr>:msg"
_LEAD_GROUP = re.compile(r"^\s*[(\[]([^()\[\]]{1,160})[)\]](?:\s|<std(?:out|err)>:)")
# "worker-3: msg" (pdsh, clush)
_LEAD_HOST = re.compile(r"^\s*([A-Za-z][\w.-]{2,}):\s")


def lead_tokens(text: str) -> tuple[list[str], list[str]]:
    """(addresses, words) of a line's leading origin group; two empty lists without one."""
    m = _LEAD_GROUP.match(text)
    if m is not None:
        group = m.group(1)
        return IPV4.findall(group), re.findall(r"[A-Za-z][\w.-]{2,}", group)
    m = _LEAD_HOST.match(text)
    if m is not None:
        return [], [m.group(1)]
    return [], []


def relays_an_address(text: str) -> bool:
    """Does the line begin with an origin group that holds an address?  Such a line is
    another process's output: the addresses in it are not the printer's own."""
    return bool(lead_tokens(text)[0])


def _examples(job: ParsedJob, j: int) -> Iterator[tuple[int, str]]:
    for c, ex in job.examples[j].items():
        yield c, ex[1]
    for c, text in job.last_examples[j].items():
        yield c, text


def relayed(job: ParsedJob, ids: dict[str, int]) -> np.ndarray:
    """(nodes, events) bool: node ``j`` printed event ``c`` on behalf of another node, as
    its leading origin group says (``ids``: token -> the node it names,
    ``l4.spatial._identities``)."""
    out = np.zeros((job.n_nodes, len(job.templates)), dtype=bool)
    if job.n_nodes < 2 or not ids:
        return out
    for j in range(job.n_nodes):
        for c, text in _examples(job, j):
            if out[j, c]:
                continue
            ips, words = lead_tokens(text)
            origin = {ids[t] for t in (*ips, *words) if t in ids}
            if origin and j not in origin:
                out[j, c] = True
    return out


def relay_origins(job: ParsedJob, ids: dict[str, int]) -> np.ndarray:
    """(nodes, events) bool: event ``c`` was printed on behalf of node ``i`` by another
    node's log (its leading origin group names ``i``).

    When one process gathers every node's output (mpirun on SageMaker writes all ranks'
    lines, each tagged "[1,mpirank:22,algo-6]<stderr>:", into the first host's log) the
    origin's own file holds almost nothing: the relayed lines are its evidence.  Read
    from the first and last example of each event, as ``relayed`` reads them."""
    out = np.zeros((job.n_nodes, len(job.templates)), dtype=bool)
    if job.n_nodes < 2 or not ids:
        return out
    for j in range(job.n_nodes):
        for c, text in _examples(job, j):
            ips, words = lead_tokens(text)
            for i in {ids[t] for t in (*ips, *words) if t in ids}:
                if i != j:
                    out[i, c] = True
    return out


_TOKEN = re.compile(r"[A-Za-z][\w.-]{2,}|(?:\d{1,3}\.){3}\d{1,3}")


def _named(text: str, ids: dict[str, int]) -> set[int]:
    return {ids[t] for t in _TOKEN.findall(text) if t in ids}


def reports_on_others(job: ParsedJob, ids: dict[str, int]) -> np.ndarray:
    """(nodes, events) bool: node ``j``'s event ``c`` is a report about other nodes of the
    job, one line per node: its first and its last line name two different ones, and
    never ``j`` (a Slurm batch host prints "srun: error: cn-d057: tasks 161-167: Aborted"
    for every node whose tasks died).  Such lines are the job's teardown as one node saw
    it, not that node's own trouble."""
    out = np.zeros((job.n_nodes, len(job.templates)), dtype=bool)
    if job.n_nodes < 3 or not ids:
        return out
    for j in range(job.n_nodes):
        for c, ex in job.examples[j].items():
            last = job.last_examples[j].get(c)
            if not last or job.counts[j, c] < 2:
                continue
            first, final = _named(ex[1], ids), _named(last, ids)
            if first and final and first != final and j not in first | final:
                out[j, c] = True
    return out
