"""Spatial comparison: which node is the culprit, not merely the loudest victim.

After one node fails, every other node logs timeouts and resets — often more lines than the
culprit, sometimes earlier (clock skew) — and a crashed node may go silent.  So besides the
paper's Isolation Forest over per-node counts of the events that survived the cross-job
filter, the ranking weighs evidence that tells a culprit from its victims:

* **specific trouble**: unusual events logged by few nodes weigh more than events every
  node logs (a timeout on 63 nodes is a symptom; an Xid on one is a cause);
* **missing the shared symptom**: when most nodes report the same failure and one does not,
  that one is the node the others were waiting for;
* **stopped first**: a node whose log ends before the others reached their failure (crash,
  hang) — judged by time when clocks allow, by progress otherwise;
* **named**: the platform itself says which node failed ("srun: error: Node failure on
  cn346") — the strongest evidence there is, since that node often logs nothing at all;
* **named by its peers**: the others' errors name it ("Connection closed by peer
  10.0.0.7:5531", "Got completion from peer 10.0.0.7<43200> with error 12", a host name),
  by an address or host name that only this node prints as its own.  A culprit whose NIC
  or link failed often logs nothing; its peers say whom they lost;
* **slowed first**: the one node whose iterations turned slow a step before everyone
  else's (its peers then wait for it at every collective);
* **odd measurements**: the one node whose own timers disagree with everybody else's by a
  wide margin in a line all nodes print (a straggler computes 8 s where the others compute
  1.8 s and then wait 24 s in all-reduce) — a slow node prints no error at all;
* **odd in the shared symptom**: the one node whose copy of the failure line every node
  prints says something else (another collective, another peer, another exit code).

Scores are combined by fixed weights into [0, 1]; every node is ranked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from l4.clocks import clock_offsets
from l4.crossjob import CrossJobResult
from l4.gather import host_tokens
from l4.iterations import find_counter, slowed_first, stopped_counting_first
from l4.mask import decimals_in
from l4.merge import ParsedJob
from l4.oddwords import odd_node
from l4.profiles import choose_profile
from l4.relay import IPV4, lead_tokens, relay_origins, relayed, relays_an_address, reports_on_others
from l4.scan import LAST_TEXT_BYTES
from l4.severity import is_boilerplate, is_symptom, is_teardown

W_SPECIFIC = 0.55
W_MISSING = 0.2
W_STOPPED = 0.15
W_IFOREST = 0.1
W_NAMED = 0.6
#: being named by the peers' own errors (an address or host name only that node has)
W_PEERS = 0.35
#: specific trouble of one novel, severe (1.0) event on a single node
LONE_CAUSE = (0.1 + 1.0) ** 2
W_ODD = 0.3
#: turning slow a step before every other node (see l4.iterations.slowed_first)
W_SLOW = 0.3
#: stopping clearly before all others, which stopped together (``first_to_stop``)
W_FIRST = 0.3
#: the one node whose copy of the job-wide failure line says something else
#: (``odd_in_symptom``)
W_APART = 0.3
#: the one node whose counter stopped behind every other's (``stopped_counting_first``)
W_BEHIND = 0.3
#: the one node that alone names something new in a routine line every node prints, which
#: no healthy run named there ("Using [0]docker0" where all use ib0; ``l4.oddwords``)
W_SETUP = 0.3
#: how far (as a factor) a node's measurement must be from the other nodes' median
ODD_FACTOR = 3.0
#: Messages in which the scheduler or launcher names the node that failed (group ``host``,
#: matched against the job's node ids).  Only failures *of* a node: a peer a message
#: merely mentions (the rendezvous host every rank dials) is no evidence.
NAMED_FAILURE = tuple(re.compile(p) for p in (
    r"Node failure on (?P<host>[\w.\-]+)",
    r"host=(?P<host>[\w.\-]+) was not reachable",
    r"\b[Nn]ode (?P<host>[\w.\-]+) (?:is )?(?:down|not responding|NotReady|unreachable)\b",
    # Ray's GCS: "The node with node id: d44a... and address: 10.64.33.82 and node name:
    # 10.64.33.82 has been marked dead because the detector has missed too many heartbeats"
    r"\baddress: (?P<host>[\w.\-]+) and node name: [\w.\-]+ has been marked dead\b",
    # Open MPI's (ORTE's, PRRTE's) head under "... has lost communication with a remote
    # daemon": "Remote daemon: [[14709,0],3] on node cn0245"
    r"\bRemote daemon\s*: \[\[\d+,\d+\],\d+\] on node (?P<host>[\w.\-]+)",
))
#: the ranks a collective waits for, as the collective layer lists them: inline ("missing
#: ranks: {3, 7}") or Horovod's stall inspector, one rank per line under a heading
#: ("Missing ranks:" then "5: [allreduce.grad.h.51 ...]")
_MISSING_INLINE = re.compile(r"\bmissing ranks?\s*[:=]?\s*[\[{(]\s*(?P<ranks>\d+(?:\s*,\s*\d+)*)\s*[\]})]", re.I)
_MISSING_HEAD = re.compile(r"\bMissing ranks:\s*$")
_MISSING_ITEM = re.compile(r"^\s*(?P<rank>\d+): \[")
#: launchers' and libraries' words for the one process that exited or failed first, by
#: its global rank: Open MPI's "The first process to do so was: Process name: [[24721,1],29]" and
#: "mpirun noticed that process rank 29 with PID ... on node ...", torch's monitored
#: barrier "Rank 3 failed to pass monitoredBarrier"
NAMED_RANK = tuple(re.compile(p) for p in (
    r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]",
    r"\bprocess rank (?P<rank>\d+) with PID\b",
    r"\bRanks? (?P<rank>\d+) failed to pass monitoredBarrier",
))
#: a peer named by its global rank as the one out of step: torch's collective checker
#: (TORCH_DISTRIBUTED_DEBUG=DETAIL) "Detected mismatch between collectives on ranks. Rank 9
#: is running collective: ..., but Rank 647 is running collective: ..."
PEER_RANK = re.compile(r"\bbut Rank (?P<rank>\d+) is running collective\b")
#: the prefixes that say which global rank wrote a line: torchrun's "[rank29]:" /
#: "[default29]:", mpirun's "[1,29]<stdout>:", srun's "29: "
_RANK_PREFIX = re.compile(r"^(?:\[(?:rank|default)(\d+)\]:|\[\d+,(\d+)\]<std(?:out|err)>:|\s*(\d+): )")
#: a rank naming itself inside its own message: the prefix of torch's process-group logs
#: ("[Rank 10] Watchdog caught ...", "[PG 0 (default_pg) Rank 10] Timeout at NCCL work"),
#: and the collective checker's "... collectives on ranks. Rank 23 is running collective"
_SELF_RANK = re.compile(r"\[(?:PG [^\]\[]*? )?Rank (\d+)\]|\bcollectives on ranks\. Rank (\d+) is running\b")
#: how much a propagated-failure message (timeout, reset...) counts next to a cause
SYMPTOM_WEIGHT = 0.25


@dataclass
class NodeScore:
    node: str
    score: float
    parts: dict[str, float]


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    top = x.max() if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def iforest_scores(features: np.ndarray, seed: int = 0) -> np.ndarray:
    """Isolation Forest anomaly in [0, 1] (1 = most isolated); zeros when it cannot tell."""
    n = features.shape[0]
    if n < 3 or features.shape[1] == 0 or np.allclose(features, features[0]):
        return np.zeros(n)
    # imported here: scikit-learn costs ~1.3 s of start-up, which jobs too small for the
    # forest (and every served run that never reaches it) should not pay
    from sklearn.ensemble import IsolationForest

    model = IsolationForest(n_estimators=100, random_state=seed, contamination="auto")
    model.fit(features)
    raw = -model.score_samples(features)
    lo, hi = raw.min(), raw.max()
    return (raw - lo) / (hi - lo) if hi > lo else np.zeros(n)


def only_echoes_beside_a_pack(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: True when it is one of two or more nodes that logged only echoes
    (timeouts, peers gone, the teardown every node logged) while at least half the nodes,
    two or more, each stated a cause of their own.

    Every node that wrote to a full shared volume says "No space left on device"; the
    nodes that had nothing to write only time out waiting for them.  They differ from the
    pack, so by counts and by their copies of the timeout they look like the odd ones out;
    but the job told its cause through the pack.  (A lone culprit among echoing peers is
    untouched: one node stating a cause is no pack.)"""
    n = job.n_nodes
    out = np.zeros(n, dtype=bool)
    if n < 3:
        return out
    echo = np.array([is_symptom(t) for t in job.templates], dtype=bool)
    severe = cross.anomalous & (cross.severity >= 0.5)[None, :]
    # what every node logged is the job's teardown (each launcher's "exited with code 1")
    everyone = cross.anomalous.sum(axis=0) >= n
    states = (severe & ~(echo | everyone)[None, :]).any(axis=1)
    if states.sum() < max(2, 0.5 * n):
        return out
    # several such nodes: a lone node lacking the pack's lines is the classic silent
    # culprit, whose peers all report on it ("CheckpointException ranks: [7]", its own
    # launcher stopping its other workers first), and ``missing_symptom`` reads that one
    echoing = ~states & (severe & echo[None, :]).any(axis=1)
    # nor one with a severe line no other node logged: that line, whatever its words ("the
    # client socket has timed out while trying to connect" to the store), is its own
    alone = (severe & (cross.anomalous.sum(axis=0) == 1)[None, :]).any(axis=1)
    echoing &= ~alone
    return echoing if echoing.sum() >= 2 else out


def specific_trouble(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: unusual events, weighted by severity and by how few nodes share them."""
    anom = cross.anomalous
    share = np.maximum(anom.sum(axis=0), 1).astype(np.float64)
    echo = np.array([is_symptom(t) for t in job.templates], dtype=bool)
    weight = (0.1 + cross.severity) ** 2 * np.where(cross.novel, 1.0, 0.6) / share
    weight = weight * np.where(echo, SYMPTOM_WEIGHT, 1.0)
    strength = np.log1p(cross.excess)
    strength = np.where(anom, 1.0 + 0.25 * strength, 0.0)
    contrib = strength * weight[None, :]
    if ECHO_FIRST:
        # a node whose trouble began with waiting on a peer (a collective's timeout) was a
        # victim from its first line: what it printed next, short of a named cause (its
        # abort, its launcher's failure summary, its scheduler's return codes), is how it
        # went down, not why the job did
        first, at = waited_first(job, cross)
        after = (first[:, None] & ~echo[None, :] & (cross.severity < 1.0)[None, :]
                 & (job.first_pos > at[:, None]))
        contrib = np.where(after, contrib * SYMPTOM_WEIGHT, contrib)
    # one named cause outweighs a pile of echoes: the k-th strongest event counts 0.35^k
    contrib = -np.sort(-contrib, axis=1)
    decay = 0.35 ** np.arange(contrib.shape[1])
    return contrib @ decay


#: whether ``specific_trouble`` reads a node whose first trouble was an echo as a victim
ECHO_FIRST = True
#: whether a launcher's bookkeeping (``_launcher_bookkeeping``) is kept out of what sets
#: nodes apart (missing symptoms, the Isolation Forest's counts) and out of "waited first"
TEARDOWN_SKIP = True


#: the least severity of a node's first trouble: an error, or a warning that names a cause
#: (``l4.severity``: 0.45); a plain warning (0.15, "NCCL WARN ... Got completion from
#: peer ...") is no start of a node's own trouble
TROUBLE = 0.3


def waited_first(job: ParsedJob, cross: CrossJobResult) -> tuple[np.ndarray, np.ndarray]:
    """(per node: its first troubling line echoes another's failure, ``l4.severity.
    is_symptom``; where that line is).  A troubling line is unusual against the healthy
    runs and says something of its own: a warning that names a cause ("the network
    addresses of (<host>, <port>) cannot be retrieved") counts, a traceback's header does
    not (every Python exception, a victim's too, begins with one)."""
    out = np.zeros(job.n_nodes, dtype=bool)
    at = np.full(job.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
    worded = np.array([not is_boilerplate(t) for t in job.templates], dtype=bool)
    trouble = cross.anomalous & ((cross.severity >= TROUBLE) & worded)[None, :]
    # the node's own launcher stopping its workers (``is_teardown``) is its reaction to a
    # worker of its own that failed, maybe one whose output is filtered away: an echo, but
    # not yet a sign of waiting on a peer.  When a visible rank echoes a peer's failure
    # while the launcher is still tearing down ("connection closed by peer" between its
    # "closing signal SIGTERM" and its ChildFailedError), the node waited from there on;
    # what a rank prints after the launcher's last notice is late output, not the order
    teardown = np.array([TEARDOWN_SKIP and is_teardown(t) for t in job.templates], dtype=bool)
    peer = np.array([is_symptom(t) for t in job.templates], dtype=bool) & ~teardown
    for i in range(job.n_nodes):
        cols = np.nonzero(trouble[i])[0]
        if not cols.size:
            continue
        c = int(cols[np.argmin(job.first_pos[i, cols])])
        if teardown[c]:
            ends = cols[teardown[cols]]
            last = int(job.last_pos[i, ends].max()) if job.last_pos is not None else -1
            echoes = cols[peer[cols] & (job.first_pos[i, cols] < last)]
            if echoes.size:
                c = int(echoes[np.argmin(job.first_pos[i, echoes])])
        out[i] = is_symptom(job.templates[c])
        at[i] = int(job.first_pos[i, c])
    return out, at


def missing_symptom(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: troubling events most other nodes share but this node never logged, or
    logged fewer times than every other node did (half as much)."""
    n = job.n_nodes
    if n == 2:
        return _missing_beside_one(job, cross)
    if n < 3:
        return np.zeros(n)
    widespread = _widespread(cross)
    if TEARDOWN_SKIP:
        # a launcher that stopped no workers (all of its own had failed already) prints no
        # "closing signal SIGTERM" and lists no stopped worker in its failure summary
        widespread &= ~_launcher_bookkeeping(job.templates)
    if not widespread.any():
        return np.zeros(n)
    counts = job.counts[:, widespread]
    absent = (counts == 0).astype(np.float64)
    return (absent + 0.5 * short_of_pack(counts)).mean(axis=1)


def _missing_beside_one(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Two nodes: 1 for the node with no troubling line at all when the other's trouble
    began by waiting on a peer (a collective's timeout).  With one other node to wait for,
    the silent one is who it waited for (a node that lost power prints nothing more); a
    rank that hung beside healthy ones on the same node leaves both nodes waiting, and
    nothing is scored then."""
    out = np.zeros(2)
    severe = (cross.anomalous & (cross.severity >= 0.5)[None, :]).any(axis=1)
    waited, _ = waited_first(job, cross)
    for i in (0, 1):
        if not severe[i] and waited[1 - i]:
            out[i] = 1.0
    return out


#: a launcher's failure summary entry for a worker that left no error file (one it stopped)
_NO_ERROR_FILE = re.compile(r"^\s*error_file\s*:\s*<N/A>\s*$")


def _launcher_bookkeeping(templates: list[str]) -> np.ndarray:
    """Per event: a launcher's notice of stopping its remaining workers, or its failure
    summary's entry for one it stopped ("exitcode : -15 (pid: N) (SIGTERM)", "error_file:
    <N/A>"); any line naming SIGTERM counts, as a signal that every node of a job receives
    (a preemption's "Received SIGTERM death signal") sets none apart either.  How many
    workers a launcher had left to stop (none, when all of its own had failed already)
    says nothing of its node."""
    return np.array([is_teardown(t) or "sigterm" in t.lower() or _NO_ERROR_FILE.search(t) is not None
                     for t in templates], dtype=bool)


def _widespread(cross: CrossJobResult) -> np.ndarray:
    """Troubling events that at least half the nodes (two or more) logged: the pack's."""
    anom = cross.anomalous
    return (anom.mean(axis=0) >= 0.5) & (cross.severity >= 0.5) & (anom.sum(axis=0) >= 2)


def short_of_pack(counts: np.ndarray) -> np.ndarray:
    """Per node and column: 1 where the node logged the event fewer times than every other
    logging node, which all logged it about equally often.

    Each rank that waited in a collective logs its own timeout; a rank that never entered
    the collective (hung in I/O, in a data loader, in a kernel) has none to log, so its
    node reports one rank fewer than every other node.  Counts that vary from node to node
    anyway (teardown cut some ranks short) tell nothing, and nothing is scored then.
    """
    out = np.zeros(counts.shape, dtype=np.float64)
    for j in range(counts.shape[1]):
        col = counts[:, j]
        logging = np.nonzero(col > 0)[0]
        if logging.size < 4:
            continue
        order = logging[np.argsort(col[logging], kind="stable")]
        low, others = order[0], col[order[1:]]
        lo, hi = int(others.min()), int(others.max())
        if int(col[low]) < lo and hi - lo <= max(0, 0.1 * float(np.median(others))):
            out[low, j] = 1.0
    return out


def stopped_first(job: ParsedJob, cross: CrossJobResult,
                  last: np.ndarray | None = None) -> np.ndarray:
    """Per node: how early its log ends relative to the others (0 = with the pack).

    ``last``: when each node's log ended, on one clock (``ends``); by default as each
    node's own clock says."""
    n = job.n_nodes
    if n < 2:
        return np.zeros(n)
    last = job.node_last_ts if last is None else last
    ok = ~np.isnan(last)
    out = np.zeros(n)
    if ok.sum() >= max(2, 0.8 * n):
        med = np.median(last[ok])
        spread = max(float(np.median(np.abs(last[ok] - med))), 30.0)
        early = np.where(ok, (med - last) / spread, 0.0)
        out = np.clip(early - 2.0, 0.0, None)
        out = np.maximum(out, _lone_early_stop(last))
    # progress: fewer records than nodes of the same role (same set of event types)
    recs = job.n_records.astype(np.float64)
    med_r = np.median(recs)
    if med_r > 0:
        short = np.clip((med_r - recs) / med_r - 0.2, 0.0, None)
        out = out + short
    empty = np.array([s in ("empty", "error") for s in job.status])
    out[empty] += 0.5
    return out


#: a node's log must end at least this much before the others' to have "stopped first"
MIN_LEAD_S = 5.0


def _lone_early_stop(last: np.ndarray) -> np.ndarray:
    """Per node: how long before everyone else its log ended, against how closely the
    others ended together.

    The peers of a node that died wait for it (a rendezvous, a collective timeout) and then
    stop within seconds of each other; the dead node stopped that whole wait earlier.  This
    holds at any scale (a 30 s store timeout or a 30 min collective one), unlike a fixed
    "more than a minute early" rule.  Only one node at a time can lead this way.
    """
    n = len(last)
    out = np.zeros(n)
    ok = ~np.isnan(last)
    if ok.sum() < 2:
        return out
    order = np.argsort(np.where(ok, last, np.inf))
    first, rest = order[0], order[1:][ok[order[1:]]]
    others = last[rest]
    med = float(np.median(others))
    spread = float(np.median(np.abs(others - med))) if others.size > 1 else 0.0
    lead = med - float(last[first])
    if lead >= max(MIN_LEAD_S, 4.0 * spread) and float(others.min() - last[first]) >= MIN_LEAD_S:
        out[first] = min(lead / max(spread, MIN_LEAD_S), 10.0) / 10.0 + 0.5
    return out


#: how many times the spread of the others' ends the lone first stopper must lead by
FIRST_LEAD = 10.0
#: clocks and log flushing blur ends by this much at least (seconds)
END_BLUR_S = 0.1


def first_to_stop(job: ParsedJob, last: np.ndarray | None = None) -> np.ndarray:
    """Per node: 1.0 for the one node whose log ended clearly before all the others, when
    those others ended together.

    When a rank dies, its own launcher reacts first (it stops its other workers); the
    peers' launchers react when their collectives break, seconds later but together.  A
    node that stopped a few seconds before a pack that stopped within a tenth of a second
    of itself is the first failure, however little it logged; a node merely lacking the
    pack's errors (an output filter, an early SIGTERM) is not.  The lead is measured in
    the spread of the pack, so skewed clocks (a wide pack) need a wider lead.  Needs two
    nodes in the pack: with one, "together" means nothing.  ``last`` as for
    ``stopped_first``.
    """
    last = job.node_last_ts if last is None else last
    n = len(last)
    out = np.zeros(n)
    ok = ~np.isnan(last)
    if ok.sum() < 3 or ok.sum() < 0.8 * n:
        return out
    order = np.argsort(np.where(ok, last, np.inf))
    first, rest = int(order[0]), order[1:][ok[order[1:]]]
    others = last[rest]
    # the pack's spread: its median deviation, or half its middle half where many ends
    # share one whole second (whole-second clocks make the median deviation 0); not both,
    # as one straggler of three (a launcher that lost the store a second later) would
    # widen the middle half of a pack that stopped within milliseconds
    q1, q3 = np.percentile(others, [25, 75])
    mad = float(np.median(np.abs(others - np.median(others))))
    spread = max(mad if mad > 0 else float(q3 - q1) / 2, END_BLUR_S)
    gap = float(others.min() - last[first])
    if gap >= max(1.0, FIRST_LEAD * spread):
        out[first] = 1.0
    return out


def unusual_texts(job: ParsedJob, cross: CrossJobResult,
                  keep: np.ndarray | None = None) -> Iterator[tuple[int, str]]:
    """(node, text): the first and last line of every unusual event of every node (of the
    events ``keep`` marks, when given), the lines that may name another node."""
    anom = cross.anomalous if keep is None else cross.anomalous & keep[None, :]
    for i in range(job.n_nodes):
        for c in np.nonzero(anom[i])[0].tolist():
            yield i, job.last_examples[i].get(c, "")
            if c in job.examples[i]:
                yield i, job.examples[i][c][1]


def named_failed(job: ParsedJob, cross: CrossJobResult,
                 ids: dict[str, int] | None = None) -> np.ndarray:
    """Per node: 1 when an unusual message on any node names it as the node that failed
    (by name, or by an address ``ids`` resolves: ``_identities``)."""
    out = np.zeros(job.n_nodes)
    index = {name: i for i, name in enumerate(job.nodes)}
    short = {name.split(".")[0]: i for i, name in enumerate(job.nodes)}
    for _, text in unusual_texts(job, cross):
        for rx in NAMED_FAILURE:
            m = rx.search(text)
            if m is None:
                continue
            host = m.group("host")
            j = index.get(host, short.get(host.split(".")[0]))
            if j is None and IPV4.fullmatch(host):
                # an address: the node that printed it as its own
                ids = _identities(job, cross) if ids is None else ids
                j = ids.get(host)
            if j is not None:
                out[j] = 1.0
    return out


def waited_for(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: 1 when the collective layer lists one of its ranks among those the others
    wait for (``_MISSING_INLINE``, or Horovod's "Missing ranks:" and the rank lines right
    after it) and its lines carry that rank's prefix (``rank_hosts``).  A hung or silent
    rank prints nothing; rank 0's stall report says whom everybody waits for.  Ranks on
    more than half the nodes say nothing apart."""
    out = np.zeros(job.n_nodes)
    named: set[int] = set()
    for _, text in unusual_texts(job, cross):
        m = _MISSING_INLINE.search(text)
        if m is not None:
            named.update(int(x) for x in re.findall(r"\d+", m.group("ranks")))
    heads = [c for c, t in enumerate(job.templates) if _MISSING_HEAD.search(t)]
    for j in range(job.n_nodes) if heads else ():
        seq = job.seqs[j]
        at = np.nonzero(np.isin(seq, heads))[0]
        for c in {int(seq[k + 1]) for k in at.tolist() if k + 1 < len(seq)}:
            if not cross.anomalous[j, c]:
                continue
            for text in (job.examples[j].get(c, (0, ""))[1], job.last_examples[j].get(c, "")):
                m = _MISSING_ITEM.match(_after_tag(text))
                if m is not None:
                    named.add(int(m.group("rank")))
    if not named:
        return out
    ranks = rank_hosts(job)
    for rank in named:
        i = ranks.get(rank)
        if i is not None:
            out[i] = 1.0
    if out.sum() > max(1, job.n_nodes // 2):
        return np.zeros(job.n_nodes)
    return out


def _after_tag(text: str) -> str:
    """A line without its launcher's rank tag ("[1,0]<stderr>:", "[rank0]:"); srun's bare
    "N: " is left, as it reads like the rank lines it would strip."""
    m = _RANK_PREFIX.match(text)
    return text[m.end():] if m is not None and m.group(3) is None else text


def exited_first(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: 1 when a launcher's unusual lines name the global rank that exited first
    (``NAMED_RANK``) and that rank's lines carry this node's prefix (``rank_hosts``).

    The launcher saw the exits in order, so this is "who stopped first" without clocks;
    and like it, it is no proof: after a hang the first to exit is the peer whose timeout
    fired first."""
    out = np.zeros(job.n_nodes)
    ranks: dict[int, int] | None = None  # read on first need
    for _, text in unusual_texts(job, cross):
        for rx in NAMED_RANK:
            m = rx.search(text)
            if m is None:
                continue
            if ranks is None:
                ranks = rank_hosts(job)
            j = ranks.get(int(m.group("rank")))
            if j is not None:
                out[j] = 1.0
    # a rank that exited on its own collective timeout was only the fastest watchdog: in
    # a hang every waiting rank times out, and the hung one need not be first
    return np.where(timed_out(job, cross), 0.0, out)


_TIMEOUT = re.compile(r"\btime[ds]? ?out\b|\btimeout\b", re.I)


def timed_out(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: did it log an unusual timeout of its own (a collective, a barrier, a
    store)?  A node that was killed or crashed has no time left to time out."""
    hits = np.array([bool(_TIMEOUT.search(t)) for t in job.templates], dtype=bool)
    return (cross.anomalous & hits[None, :]).any(axis=1)


def rank_hosts(job: ParsedJob) -> dict[int, int]:
    """Global rank -> the node whose log carries that rank's line prefix, for ranks that
    exactly one node's lines carry (``_RANK_PREFIX``; read from every event's first and
    last example of every node, so each rank that printed anything is seen).  Without a
    prefix, a rank that names itself in its own message (``_SELF_RANK``) says the same."""
    seen: dict[int, set[int]] = {}
    for i in range(job.n_nodes):
        texts = [ex[1] for ex in job.examples[i].values()]
        texts += list(job.last_examples[i].values())
        for text in texts:
            rank = _writer_rank(text)
            if rank is not None:
                seen.setdefault(rank, set()).add(i)
    return {rank: next(iter(who)) for rank, who in seen.items() if len(who) == 1}


#: how troubling a line must be for a peer it names to count.  Not a warning's 0.15: every
#: rank's "[W TCPStore.cpp] recvValue failed" names the store's host, the same one for all
#: (tried 2026-12-03: it put the store's host first in two simulated rendezvous failures)
NAMING_SEVERITY = 0.5

#: the writer's own address in a line about a connection ("localGid ::ffff:10.0.0.3",
#: "local address 10.0.0.3", "local_addr=10.0.0.3")
_LOCAL_IP = re.compile(r"\blocal[ _]?(?:Gid|addr(?:ess)?|ip)\s*[:=]?\s*(?:::ffff:)?"
                       r"((?:\d{1,3}\.){3}\d{1,3})(?![\d.])", re.I)


def _identities(job: ParsedJob, cross: CrossJobResult) -> dict[str, int]:
    """Token -> the node it names: every node's id and short host name, and the IPv4
    addresses that exactly one node prints in its ordinary lines (its own interface, as
    NCCL's and gloo's start-up lines show).  An address several nodes print is the
    rendezvous host every rank dials, or a loopback: it names nobody."""
    ids: dict[str, int] = {t: i for i, name in enumerate(job.nodes) for t in host_tokens(name)}
    seen: dict[str, set[int]] = {}
    own: dict[str, set[int]] = {}
    tagged = _self_tags(job)
    for i, ip in tagged.items():
        seen.setdefault(ip, set()).add(i)
    for i in range(job.n_nodes):
        for c, ex in job.examples[i].items():
            if cross.anomalous[i, c]:
                # an error states its own end of a connection too: NCCL's "localGid
                # ::ffff:10.0.242.149" beside the peer it names
                for ip in _LOCAL_IP.findall(ex[1]):
                    own.setdefault(ip, set()).add(i)
                continue
            if relays_an_address(ex[1]) and lead_tokens(ex[1])[0][:1] != [tagged.get(i)]:
                continue  # another node's line, relayed: its addresses are not this node's
            for ip in IPV4.findall(ex[1]):
                seen.setdefault(ip, set()).add(i)
    for ip, who in own.items():
        if ip not in seen:
            seen[ip] = who
    for ip, who in seen.items():
        if len(who) == 1 and not ip.startswith(("127.", "0.")):
            ids[ip] = next(iter(who))
    return ids


def _self_tags(job: ParsedJob) -> dict[int, str]:
    """Node -> the address in the origin tag that most of its own lines carry.

    A gatherer that prefixes every line with where it came from (SkyPilot's "(worker2,
    rank=2, pid=356686, ip=10.0.0.3) ") writes that prefix into the node's own log too:
    there the tag names the node itself, and is no relay.  Only an address that one
    node's lines carry mostly, and no other node's mostly, counts."""
    mine: dict[int, str] = {}
    for i in range(job.n_nodes):
        # by lines, not by events: a driver relays a dying worker's traceback (a dozen
        # events, once each) among thousands of its own tagged progress lines
        tally: dict[str, int] = {}
        for c, ex in job.examples[i].items():
            ips = lead_tokens(ex[1])[0]
            if ips:
                tally[ips[0]] = tally.get(ips[0], 0) + int(job.counts[i, c])
        if tally:
            ip, k = max(tally.items(), key=lambda kv: kv[1])
            if k >= 0.5 * float(job.counts[i].sum()):
                mine[i] = ip
    counts: dict[str, int] = {}
    for ip in mine.values():
        counts[ip] = counts.get(ip, 0) + 1
    return {i: ip for i, ip in mine.items() if counts[ip] == 1}


def named_by_peers(job: ParsedJob, cross: CrossJobResult,
                   ids: dict[str, int] | None = None) -> np.ndarray:
    """Per node: the share of the other nodes whose troubling unusual lines name it
    (``ids``: ``_identities``, when the caller has it already)."""
    n = job.n_nodes
    out = np.zeros(n)
    if n < 2:
        return out
    ids = _identities(job, cross) if ids is None else ids
    # names need hosts to point at; ranks name without them
    host_rx = re.compile(r"(?<![\w.-])(" + "|".join(
        re.escape(t) for t in sorted(ids, key=len, reverse=True)) + r")(?![\w-]|\.\d)") if ids else None
    # a namer is a node, or a rank of one where its line says which: ranks of one node
    # each saw it apart, and a rank may name another rank of its own node
    namers: list[set[tuple[int, int | None]]] = [set() for _ in range(n)]
    ranks: dict[int, int] | None = None  # read on first need
    for j, text in unusual_texts(job, cross, cross.severity >= NAMING_SEVERITY):
        for m in host_rx.finditer(text) if host_rx is not None else ():
            i = ids[m.group(1)]
            if i != j:
                namers[i].add((j, None))
        for m in PEER_RANK.finditer(text):
            ranks = rank_hosts(job) if ranks is None else ranks
            named = int(m.group("rank"))
            i = ranks.get(named, j)
            own = _writer_rank(text)
            if i != j or (own is not None and own != named):
                namers[i].add((j, own))
    count = np.array([len(who) for who in namers], dtype=np.float64)
    out = np.minimum(count / (n - 1), 1.0)
    # a name every node's errors carry (the one rendezvous host) tells nothing apart; nor
    # do nodes naming each other, unless one is named by twice as many as any other (a
    # collective mismatch: every rank names the one that diverged, and it names rank 0)
    if (out > 0).sum() > max(1, n // 2):
        top = int(np.argmax(count))
        rest = np.delete(count, top)
        if count[top] < 2 * rest.max():
            return np.zeros(n)
        out = np.where(np.arange(n) == top, out, 0.0)
    return out


def _writer_rank(text: str) -> int | None:
    """The global rank that wrote a line, where its prefix or its own words say so."""
    m = _RANK_PREFIX.match(text) or _SELF_RANK.search(text)
    return None if m is None else int(next(g for g in m.groups() if g is not None))


def _progress(job: ParsedJob) -> tuple[np.ndarray, np.ndarray]:
    """``l4.iterations.slowed_first`` and ``stopped_counting_first`` over the job's own
    counter."""
    profile = choose_profile(job.templates, job.framework)
    stages = [profile.stage_of(t) for t in job.templates]
    counter = find_counter(job, profile, stages)
    return slowed_first(job, counter), stopped_counting_first(job.n_nodes, counter)


def odd_measurements(job: ParsedJob) -> np.ndarray:
    """Per node: how far its last measured values (timings, rates) stand apart from every
    other node's, in lines that most nodes print (``odd_cells``)."""
    out = np.zeros(job.n_nodes)
    for i, _, far in odd_cells(job):
        out[i] += far
    return out


def odd_cells(job: ParsedJob) -> list[tuple[int, int, float]]:
    """(node, event column, how far) for each measured value of a line most nodes print
    that stands apart from every other node's: a step time ten times the others', a rate
    a third of theirs.

    Only a lone outlier counts (at most one node in twenty per field): roles that differ
    by design, pipeline stages say, differ in groups, not one node at a time.  Only lines
    a node prints again and again (per-iteration timers) are compared.
    """
    n = job.n_nodes
    out: list[tuple[int, int, float]] = []
    if n < 4:
        return out
    # lines most nodes print again and again (per-iteration timers), not one-off start-up
    # lines whose figures vary for no reason (a dataset map's examples/s)
    present = job.counts > 0
    common = (present.sum(axis=0) >= max(4, n // 2)) & (
        np.median(np.where(present, job.counts, 0), axis=0) >= 5
    )
    for c in np.nonzero(common)[0].tolist():
        if "<*>" not in job.templates[c]:
            continue
        rows = {i: decimals_in(job.last_examples[i][c]) for i in range(n)
                if job.counts[i, c] > 0 and c in job.last_examples[i]}
        widths = [len(v) for v in rows.values() if v]
        if not widths:
            continue
        width = max(set(widths), key=widths.count)
        keep = [i for i, v in rows.items() if len(v) == width]
        if len(keep) < 4:
            continue
        values = np.array([rows[i] for i in keep])
        for j in range(width):
            v = values[:, j]
            if (v <= 0).any():
                continue
            spread = np.abs(np.log(v / np.median(v)))
            far = spread > math.log(ODD_FACTOR)
            if 0 < far.sum() <= max(1, len(keep) // 20):
                logv = np.log(v)
                for k in np.nonzero(far)[0].tolist():
                    # apart from every other node's value, not only from their median: a
                    # field that varies fourfold from node to node anyway (a data-loading
                    # time of 2 to 9 ms) has no outlier at 0.8 ms
                    if np.abs(np.delete(logv, k) - logv[k]).min() > math.log(ODD_FACTOR):
                        out.append((keep[k], c, min(float(spread[k]), math.log(20.0))))
    return out


#: the pieces of a line whose values are compared across nodes (words, digit runs, marks)
_PIECE = re.compile(r"[A-Za-z_]+|\d+|[^\sA-Za-z_\d]")
#: dates and times of day, read out before comparing: a node whose clock runs a minute
#: off prints another minute in the same line and is no culprit for it
_WHEN = re.compile(r"\d{4}-\d\d-\d\d|(?<!\d)\d{1,2}:\d\d:\d\d(?:[.,]\d+)?|\b[IWEF]\d{3,4}\b")


#: how much of a line is compared: the scan keeps only the start of a last occurrence,
#: so first occurrences are cut alike
EXAMPLE_CUT = LAST_TEXT_BYTES


def _pieces(text: str) -> list[str]:
    """The pieces of a line with dates and times read out; a line cut short loses its last
    piece, which may be a number cut in two ("ran for 180")."""
    pieces = _PIECE.findall(_WHEN.sub(" ", text))
    return pieces[:-1] if len(text) >= EXAMPLE_CUT else pieces


def odd_in_symptom(job: ParsedJob, cross: CrossJobResult) -> np.ndarray:
    """Per node: 1 for the one node whose copy of a failure line that (nearly) every node
    prints carries a value that every other node's copy agrees on otherwise.

    When the job breaks, the victims report the same thing: the same collective timed out
    ("WorkNCCL(SeqNum=171610, OpType=ALLREDUCE"), the same peer closed the connection, the
    same signal ended their workers.  The node the others waited for says something else
    in that line: it was in another collective (BROADCAST) or one behind, it names
    another peer, its worker exited with its own code.  Fields that differ from node to
    node anyway (ranks, clocks, pids) have no agreement to break and say nothing.  Only
    a single such node counts; two or more are a split, not a culprit.
    """
    n = job.n_nodes
    out = np.zeros(n)
    if n < 4:
        return out
    severe = cross.severity >= NAMING_SEVERITY
    shared = (cross.anomalous & severe[None, :]).sum(axis=0)
    odd: set[int] = set()
    for c in np.nonzero(shared >= max(4, math.ceil(0.75 * n)))[0].tolist():
        if "<*>" not in job.templates[c]:
            continue
        pieces: dict[int, list[list[str]]] = {}
        for i in range(n):
            if not cross.anomalous[i, c]:
                continue
            texts = {job.last_examples[i].get(c, "")[:EXAMPLE_CUT]}
            if c in job.examples[i]:
                texts.add(job.examples[i][c][1][:EXAMPLE_CUT])
            pieces[i] = [_pieces(t) for t in texts if t]
        lengths = [len(p) for ps in pieces.values() for p in ps]
        if not lengths:
            continue
        width = max(set(lengths), key=lengths.count)
        rows = {i: [p for p in ps if len(p) == width] for i, ps in pieces.items()}
        rows = {i: ps for i, ps in rows.items() if ps}
        if len(rows) < 4:
            continue
        for k in range(width):
            values = {i: {p[k] for p in ps} for i, ps in rows.items()}
            common: dict[str, int] = {}
            for vs in values.values():
                if len(vs) == 1:
                    v = next(iter(vs))
                    common[v] = common.get(v, 0) + 1
            if not common:
                continue
            v, agree = max(common.items(), key=lambda kv: kv[1])
            # a node of several ranks may show the odd value beside the common one
            apart = [i for i, vs in values.items() if vs != {v}]
            if len(apart) == 1 and agree == len(values) - 1:
                odd.add(apart[0])
    if len(odd) == 1:
        out[next(iter(odd))] = 1.0
    return out


def rank_nodes(job: ParsedJob, cross: CrossJobResult, seed: int = 0,
               words: dict[int, frozenset[str]] | None = None) -> list[NodeScore]:
    """Every node, most suspicious first; ``words``: what healthy runs named in each line
    (``l4.phases.Timeline.words``), for the node that alone names something new."""
    n = job.n_nodes
    if n == 0:
        return []
    # a driver's log that relays its workers' output holds their errors: those are the
    # workers' evidence (they are named by it below), not the driver's
    ids = _identities(job, cross)
    relay = relayed(job, ids) | reports_on_others(job, ids)
    if job.launcher is not None and job.launcher.shape == relay.shape:
        relay |= job.launcher  # a gathering launcher's reports on the job (l4.gather)
    named = np.maximum(named_failed(job, cross, ids), waited_for(job, cross))
    peers = named_by_peers(job, cross, ids)  # a relayed line names the node it came from
    if relay.any():
        # the relayed lines are their origin's trouble: it inherits them (as much excess
        # as the relaying node showed), however little its own file holds
        origin = relay_origins(job, ids) & (cross.anomalous & relay).any(axis=0)[None, :]
        carried = np.where(relay, cross.excess, 0.0).max(axis=0)
        cross = replace(cross, anomalous=(cross.anomalous & ~relay) | origin,
                        excess=np.where(relay, 0.0,
                                        np.where(origin, np.maximum(cross.excess, carried[None, :]),
                                                 cross.excess)))
    # scaled against one clear cause on one node, not against the loudest node: when all
    # anybody logged is echoes (timeouts after a straggler), the loudest echo is no culprit
    raw = specific_trouble(job, cross)
    spec = raw / max(float(raw.max()) if raw.size else 0.0, LONE_CAUSE)
    miss = missing_symptom(job, cross)
    ends = job.node_last_ts - clock_offsets(job, cross)
    stop = _normalise(stopped_first(job, cross, ends))
    kept = cross.kept
    if TEARDOWN_SKIP:  # how many workers each launcher had left to stop: no node's trait
        kept = kept & ~_launcher_bookkeeping(job.templates)
    feats = np.log1p(cross.excess[:, kept]) if kept.any() else np.zeros((n, 0))
    extra = np.stack([stop, miss], axis=1)
    iso = iforest_scores(np.hstack([feats, extra]), seed=seed)
    odd = _normalise(odd_measurements(job))
    slow, behind = _progress(job)
    lead = np.maximum(first_to_stop(job, ends), exited_first(job, cross))
    apart = odd_in_symptom(job, cross)
    setup = odd_node(job, words or {})
    echoed = only_echoes_beside_a_pack(job, cross)
    if echoed.any():
        # echoes are a victim's trouble, and being the odd one out of a pack that states
        # the cause is no sign of guilt: only independent evidence (stopping first, being
        # named) still speaks for such a node
        spec, iso, miss, apart, setup = (np.where(echoed, 0.0, x)
                                         for x in (spec, iso, miss, apart, setup))
    total = (W_SPECIFIC * spec + W_MISSING * miss + W_STOPPED * stop + W_IFOREST * iso
             + W_ODD * odd + W_PEERS * peers + W_SLOW * slow + W_FIRST * lead
             + W_APART * apart + W_BEHIND * behind + W_SETUP * setup) / (
                 1.0 + W_ODD * (odd.max() > 0) + W_PEERS * (peers.max() > 0)
                 + W_SLOW * (slow.max() > 0) + W_FIRST * (lead.max() > 0)
                 + W_APART * (apart.max() > 0) + W_BEHIND * (behind.max() > 0)
                 + W_SETUP * (setup.max() > 0))
    if named.any():
        total = (total + W_NAMED * named) / (1.0 + W_NAMED)
    # nodes the evidence cannot tell apart (every log the same teardown, the culprit's own
    # output filtered away): the one whose log ended first comes first, its launcher saw its
    # worker die before the others' collectives broke
    ends = np.where(np.isnan(ends), np.inf, ends)
    order = sorted(range(n), key=lambda i: (-round(float(total[i]), 6), float(ends[i]),
                                            job.nodes[i]))
    return [
        NodeScore(
            node=job.nodes[i],
            score=round(float(total[i]), 6) if math.isfinite(total[i]) else 0.0,
            parts={
                "specific": round(float(spec[i]), 4),
                "missing_symptom": round(float(miss[i]), 4),
                "stopped_first": round(float(stop[i]), 4),
                "iforest": round(float(iso[i]), 4),
                "named": round(float(named[i]), 4),
                "odd_measurements": round(float(odd[i]), 4),
                "named_by_peers": round(float(peers[i]), 4),
                "slowed_first": round(float(slow[i]), 4),
                "first_to_stop": round(float(lead[i]), 4),
                "odd_in_symptom": round(float(apart[i]), 4),
                "stopped_counting_first": round(float(behind[i]), 4),
                "set_up_apart": round(float(setup[i]), 4),
            },
        )
        for i in order
    ]
