"""Simulated distributed-training jobs with ground truth, for tests and the accuracy benchmark.

Why a simulator: real failed jobs with a *confirmed* culprit node, stage and iteration are
rare and cannot be shipped.  This module writes job directories that fail the way real jobs
fail -- the texts come from real excerpts (see :mod:`l4.sim.simdata`) -- and records what really
happened in ``truth.json``, so that l4 and the paper's baselines can be scored.

What makes the cases hard (on purpose, because real jobs are like that):

* five frameworks with their own line formats, launcher prefixes (``[default3]:``,
  ``[rank3]:``, Slurm ``3: ``, pdsh ``host: ``, mpirun ``[1,3]<stdout>:``), container
  runtime timestamps, several timestamp formats and lines with no timestamp at all;
* ranks interleaved in one node file; rank 0 prints banners and argument dumps, the last
  rank prints Megatron's iteration lines, the other ranks are quiet;
* benign alarming lines (``ERROR: ld.so``, ``NCCL WARN ... GID table change``,
  ``wandb: ERROR``, early fp16 overflows) that healthy baselines also print;
* propagation: after the culprit fails its peers print *more* errors (watchdog timeouts,
  connection resets, launcher teardown), sometimes with earlier timestamps because host
  clocks are skewed and a killed process may not print anything itself;
* anomalies with no error line at all (a hang, a slow node);
* no single dialect per framework: every job draws a :class:`~l4.sim.dialect.Dialect`
  (script timestamps and levels, progress-line wording, paraphrased announcements,
  layered who-prefixes, host names, ranks per node, who prints what); the fault's own
  messages stay verbatim.

Everything is a pure function of the seed.  ``bytes_per_node`` grows the training phase so
that the performance benchmark gets large files quickly.

``truth.json``: ``faulty_nodes`` are the culprits (every node for a user error or scheduler
action that hits all of them); ``stage`` is where the fault began; ``iteration`` is the
number the job prints for the first iteration that did not complete normally (null outside
the training loop); ``indicators`` are the lines the fault itself produced (kernel lines,
the exception, the launcher's report of a SIGKILL), ``symptoms`` the consequences (peers'
timeouts and resets, launcher and scheduler teardown on any node).  Lines of a message that
are context, not evidence (traceback frames, boilerplate), carry the kind ``<kind>:context``.
Extra keys (``baselines``, ``style``) are informative.
"""

from __future__ import annotations

import gzip
import heapq
import json
import math
import os
import random
import time
import zlib
from collections import ChainMap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import count
from pathlib import Path

from l4.sim import dialect as V
from l4.sim import simdata as D

__all__ = [
    "list_faults",
    "list_frameworks",
    "simulate_case",
    "simulate_suite",
]

SIZES = (8, 8, 12, 16, 16, 24, 32, 48, 64)
RANKS_PER_NODE = (8, 8, 8, 8, 4, 16)
_ROLE_IND = "indicator"
_ROLE_SYM = "symptom"


def list_faults() -> list[str]:
    """Every fault kind the simulator can inject (stable order)."""
    return sorted(D.FAULTS)


def list_frameworks() -> list[str]:
    """Framework log formats the simulator can write."""
    return list(D.FRAMEWORKS)


# ======================================================================================
# Plans: what a job looks like (style, shared by a failed job and its baselines) and what
# happens in it (job plan, fault plan).
# ======================================================================================


@dataclass
class Style:
    """Configuration-level choices: same for every job of one ``config_id``."""

    framework: str
    platform: str  # slurm | k8s | bare
    launcher: str  # torchrun | srun | mpirun | deepspeed
    prefix: str  # default | rank | label | host | mpi | none
    k8s_ts: bool
    mpi_ts: bool
    kmsg: str  # uptime | ctime | syslog
    new_torch: bool
    nccl_info: bool
    chatter: bool
    rpn: int
    tp: int
    pp: int
    timeout_s: int
    iter_time: float
    eval_interval: int
    save_interval: int
    mg_ts: bool
    fp16: bool
    kill_on_bad_exit: bool
    layout: str  # flat | nested
    gz_frac: float
    host_scheme: str
    noise: tuple[str, ...]
    fields: dict = field(default_factory=dict)


@dataclass
class FaultPlan:
    spec: D.FaultSpec
    mode: str
    stage: str
    iteration: int | None
    culprits: list[int]
    blocks: tuple[str, ...]
    at_iter: int | None = None  # eval/save/training iteration the fault is attached to
    frac: float = 0.5
    variant: dict = field(default_factory=dict)


@dataclass
class JobPlan:
    job_id: str
    config_id: str
    status: str
    seed: int
    style: Style
    hosts: list[str]
    ips: list[str]
    skews: list[float]
    boots: list[float]
    t0: float
    start_iter: int
    n_iters: int
    extra_noise: tuple[str, ...]
    fault: FaultPlan | None = None
    oddities: bool = False
    dialect: V.Dialect = field(default_factory=V.Dialect)


def _weighted(rng: random.Random, pairs: Iterable[tuple[str, float]]) -> str:
    pairs = list(pairs)
    x = rng.random() * sum(w for _, w in pairs)
    for v, w in pairs:
        x -= w
        if x <= 0:
            return v
    return pairs[-1][0]


def _pick_fault(seed: int, framework: str | None) -> str:
    faults = list_faults()
    if framework is not None:
        faults = [f for f in faults if framework in D.FAULTS[f].frameworks]
    return faults[seed % len(faults)]


def _make_style(rng: random.Random, framework: str, fault: str | None, rpn: int | None,
                big: bool) -> Style:
    spec = D.FAULTS.get(fault) if fault else None
    platforms = spec.platforms if spec else ("slurm", "k8s", "bare")
    if framework == "deepspeed":
        platforms = tuple(p for p in platforms if p != "k8s") or platforms
    weights = {"slurm": 0.6, "k8s": 0.25, "bare": 0.15}
    platform = _weighted(rng, [(p, weights[p]) for p in platforms])
    if framework == "deepspeed":
        launcher = "deepspeed"
    elif framework == "megatron" and platform == "slurm":
        launcher = _weighted(rng, [("torchrun", 0.6), ("srun", 0.3), ("mpirun", 0.1)])
    elif framework == "megatron" and platform == "bare":
        launcher = "mpirun"
    else:
        launcher = "torchrun"
    if launcher == "torchrun":
        prefix = _weighted(rng, [("default", 0.35), ("rank", 0.45), ("none", 0.2)])
        if framework == "torchtitan":
            prefix = "rank"
    elif launcher == "srun":
        prefix = _weighted(rng, [("label", 0.8), ("none", 0.2)])
    elif launcher == "mpirun":
        prefix = "mpi"
    else:
        prefix = "host"
    if rpn is None:
        rpn = 8 if framework == "mindspeed" else rng.choice(RANKS_PER_NODE)
    tp = rng.choice([t for t in (1, 2, 4, 8) if t <= rpn])
    pp = rng.choice((1, 1, 2))
    slow = fault == "slow_node"
    chatter = big or slow or rng.random() < 0.45
    fp16 = framework == "deepspeed" and (fault == "nan_loss" or rng.random() < 0.5)
    if framework in ("megatron", "mindspeed"):
        fp16 = rng.random() < 0.3
    scheme_by_platform = {
        "slurm": ["node", "gpu", "cn", "dgx"],
        "k8s": ["k8s"],
        "bare": ["gpu", "dgx"],
    }
    scheme = "ascend" if framework == "mindspeed" and platform != "k8s" else rng.choice(
        scheme_by_platform[platform])
    noise_all = [b[0] for b in D.BENIGN if framework in b[4]]
    noise = tuple(n for n in noise_all if rng.random() < 0.8)
    model = rng.choice([("7B", 4096, 32, 32, 11008), ("13B", 5120, 40, 40, 13824),
                        ("8B", 4096, 32, 32, 14336), ("70B", 8192, 80, 64, 28672),
                        ("1.3B", 2048, 24, 16, 5504)])
    size, hidden, layers, heads, ffn = model
    vocab_raw = rng.choice((32000, 50257, 128256, 151936))
    vocab = (vocab_raw // 128 + 1) * 128
    params = {"7B": 6738415616, "13B": 13015864320, "8B": 8030261248, "70B": 68976648192,
              "1.3B": 1315575808}[size]
    workdir = rng.choice({
        "megatron": ["/workspace/Megatron-LM", "/mnt/fs/code/Megatron-LM", "/opt/megatron"],
        "mindspeed": ["/workspace/MindSpeed-LLM", "/home/ma-user/work/MindSpeed-LLM"],
        "torchtitan": ["/workspace/torchtitan", "/mnt/fs/code/torchtitan"],
    }.get(framework, ["/mnt/fs/code/train", "/home/user/llm", "/opt/work/sft", "/workspace/DeepSpeedExamples"]))
    pyver = rng.choice(("3.10", "3.11"))
    site = rng.choice([f"/usr/local/lib/python{pyver}/dist-packages",
                       f"/opt/conda/lib/python{pyver}/site-packages"])
    script = {"megatron": "pretrain_gpt.py", "mindspeed": "pretrain_gpt.py",
              "deepspeed": rng.choice(["main.py", "train.py"]),
              "hf": rng.choice(["run_clm.py", "train.py", "src/train.py"]),
              "torchtitan": "torchtitan/train.py"}[framework]
    model_class = {"megatron": "GPTModel", "mindspeed": "GPTModel", "torchtitan": "Transformer",
                   "deepspeed": "LlamaForCausalLM", "hf": "LlamaForCausalLM"}[framework]
    ckpt_loader = {"megatron": "megatron/training/checkpointing.py",
                   "mindspeed": "megatron/training/checkpointing.py",
                   "deepspeed": "utils/model_utils.py", "hf": "train.py",
                   "torchtitan": "torchtitan/components/checkpoint.py"}[framework]
    proj = rng.choice(["llama", "pretrain", "gpt", "sft", "moe"])
    fields = {
        "model_size": size, "hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn,
        "vocab_raw": vocab_raw, "vocab": vocab, "vocab_pad": vocab - vocab_raw,
        "n_params": params // max(1, tp * pp), "n_params_commas": f"{params:,}",
        "seq": rng.choice((2048, 4096, 8192)), "lr": rng.choice(("0.0003", "0.00015", "3e-05")),
        "workdir": workdir, "site": site, "script": script, "model_class": model_class,
        "ckpt_loader": ckpt_loader,
        "ckpt_dir": rng.choice([f"/mnt/ckpt/{proj}-{size.lower()}", f"/lustre/ckpts/{proj}/{size}",
                                f"/data/checkpoints/{proj}_{size.lower()}"]),
        "data_path": rng.choice([f"/data/{proj}/corpus_text_document", f"/lustre/datasets/pile/{proj}_text_document",
                                 f"/mnt/data/tokenized/{proj}_text_document"]),
        "model_path": rng.choice([f"/models/Llama-2-{size.lower()}-hf", f"/mnt/models/{proj}-{size}"]),
        "out_dir": rng.choice([f"/mnt/output/{proj}", f"output/{proj}-{size.lower()}"]),
        "hf_cache": "/root/.cache/huggingface/datasets/json/default-8a1c5e/0.0.0/7483f22a",
        "tokenizer_path": f"./assets/tokenizer/Meta-Llama-3.1-{size}",
        "nccl": rng.choice(("2.18.5", "2.19.3", "2.20.5", "2.21.5")),
        "ds_ver": rng.choice(("0.14.4", "0.15.4", "0.16.2")),
        "zero": rng.choice((1, 2, 3)), "dtype": "float16" if fp16 else "bfloat16",
        "bf16": "False" if fp16 else "True", "fp16": "True" if fp16 else "False",
        "wall_clock": "True" if chatter else "False",
        "backend": "hccl" if framework == "mindspeed" else "nccl",
        "commid": f"{rng.getrandbits(64):016x}", "ident": str(rng.randint(10**15, 10**16 - 1)),
        "shards": rng.choice((2, 3, 4, 15, 30)),
    }
    return Style(
        framework=framework, platform=platform, launcher=launcher, prefix=prefix,
        k8s_ts=platform == "k8s" and rng.random() < 0.7, mpi_ts=launcher == "mpirun" and rng.random() < 0.5,
        kmsg=rng.choice(("uptime", "ctime", "syslog")), new_torch=rng.random() < 0.75,
        nccl_info=rng.random() < 0.55, chatter=chatter, rpn=rpn, tp=tp, pp=pp,
        timeout_s=rng.choice((600, 600, 1800)),
        iter_time=rng.uniform(0.8, 9.0), eval_interval=rng.choice((10, 20, 25, 50)),
        save_interval=rng.choice((20, 25, 50, 100)), mg_ts=rng.random() < 0.6, fp16=fp16,
        kill_on_bad_exit=platform == "slurm" and rng.random() < 0.35,
        layout="nested" if rng.random() < 0.2 else "flat",
        gz_frac=rng.choice((0.0, 0.0, 0.0, 0.3, 1.0)), host_scheme=scheme, noise=noise,
        fields=fields,
    )


def _iter_style(plan: JobPlan) -> str:
    """The job's progress-line wording; scripts with their own log format print their own."""
    d = plan.dialect
    if d.iter_style != "native":
        return d.iter_style
    if V.restyled(d) and plan.style.framework in ("torchtitan", "deepspeed"):
        return "step"
    return "native"


def _bar_epoch(plan: JobPlan) -> int:
    """Steps per epoch of the job's tqdm bar, 0 without one.  A resumed job's bar would
    start mid-epoch at a step its log never states, so only fresh jobs draw epoch bars
    (the truth's iteration stays the global step)."""
    if _iter_style(plan) == "native" or plan.start_iter:
        return 0
    return plan.dialect.bar_epoch


def _iter_line(plan: JobPlan) -> str:
    """What ``truth.json`` calls the job's progress line."""
    return "epoch_bar" if _bar_epoch(plan) else _iter_style(plan)


def _hosts(rng: random.Random, scheme: str, n: int, tag: str) -> list[str]:
    base = rng.randint(0, 400)
    step = rng.choice((1, 1, 1, 2))
    nums = [base + i * step for i in range(n)]
    if rng.random() < 0.4:  # a few holes, as in real allocations
        nums = sorted(rng.sample(range(base, base + n * 3), n))
    if scheme == "node":
        return [f"node-{k:03d}" for k in nums]
    if scheme == "gpu":
        return [f"gpu-a100-{k:04d}" for k in nums]
    if scheme == "cn":
        return [f"cn{k + 10}" for k in nums]
    if scheme == "dgx":
        return [f"dgx-h100-{k // 16:02d}{chr(97 + k % 16)}" for k in nums]
    if scheme == "ascend":
        return [f"ascend-s{k // 8:02d}n{k % 8:02d}" for k in nums]
    if scheme == "aws":
        return [f"ip-10-{1 + k // 250}-{k // 50 % 5}-{10 + k % 240}" for k in nums]
    if scheme == "nid":
        return [f"nid{k + 1000:06d}" for k in nums]
    if scheme == "compute":
        return [f"compute-{k // 32}-{k % 32}" for k in nums]
    if scheme == "hgx":
        return [f"hgx{k:03d}.cluster" for k in nums]
    return [f"{tag}-worker-{i}" for i in range(n)]


def _plan_job(rng: random.Random, style: Style, *, job_id: str, config_id: str, status: str,
              seed: int, n_nodes: int, iterations: int, k8s_tag: str,
              dialect: V.Dialect | None = None) -> JobPlan:
    dialect = dialect or V.Dialect()
    style = _dialect_style(style, dialect)
    scheme = style.host_scheme
    if dialect.host_scheme != "native" and style.platform != "k8s" and style.framework != "mindspeed":
        scheme = dialect.host_scheme
    hosts = _hosts(rng, scheme, n_nodes, k8s_tag)
    ips = []
    subnet = rng.randint(1, 250)
    for i in range(n_nodes):
        ips.append(f"10.{subnet}.{(i // 200) + rng.randint(0, 3)}.{(i % 200) + 10}")
    skews = [max(-6.0, min(6.0, rng.gauss(0, 1.8))) for _ in hosts]
    boots = [rng.uniform(3600, 86400 * 20) for _ in hosts]
    t0 = 1672531200 + rng.randint(0, 3 * 365 * 86400)
    resume = rng.random() < 0.4
    start_iter = rng.choice((1000, 2500, 5000, 12000)) if resume else 0
    noise_all = [b[0] for b in D.BENIGN if style.framework in b[4] and b[0] not in style.noise]
    extra = tuple(n for n in noise_all if rng.random() < 0.15)
    return JobPlan(job_id=job_id, config_id=config_id, status=status, seed=seed, style=style,
                   hosts=hosts, ips=ips, skews=skews, boots=boots, t0=t0, start_iter=start_iter,
                   n_iters=iterations, extra_noise=extra, dialect=dialect)


def _dialect_style(style: Style, d: V.Dialect) -> Style:
    """The job's own copy of the configuration style with the dialect's overrides."""
    st = replace(style)
    if d.rpn is not None:
        st.rpn = d.rpn
        st.tp = min(st.tp, d.rpn)
    if d.inner != "native":
        st.prefix = d.inner
    return st


def _pick_dialect(seed: int, tag: str, style: Style, n_nodes: int, rpn_fixed: bool) -> V.Dialect:
    d = V.pick_dialect(seed, tag, framework=style.framework, launcher=style.launcher,
                       platform=style.platform, n_world_max=n_nodes * 16)
    if rpn_fixed:
        d.rpn = None
    return d


def _plan_fault(rng: random.Random, plan: JobPlan, fault: str, late: bool = False) -> FaultPlan:
    """Where and how ``fault`` strikes; ``late`` puts it near the end (big-file mode)."""
    spec = D.FAULTS[fault]
    fw = plan.style.framework
    n = len(plan.hosts)
    stage = _weighted(rng, spec.stages)
    mode = spec.mode
    culprit_kind = spec.culprits
    if fault == "dataset_path_missing" and fw in ("megatron", "mindspeed"):
        mode, culprit_kind = "crash", "node0"
    if fault == "npu_oom" and stage == "model_loading":
        mode, culprit_kind = "everywhere", "all"
    blocks = D.FAULT_BLOCKS_BY_FRAMEWORK.get((fault, fw)) or D.FAULT_BLOCKS_BY_FRAMEWORK.get(
        (fault, stage)) or spec.blocks
    if culprit_kind == "all":
        culprits = list(range(n))
    elif culprit_kind == "node0":
        culprits = [0]
    elif mode == "node_failure":
        culprits = [rng.randrange(1, n)]
    else:
        culprits = [rng.randrange(n)]
    first = plan.start_iter + 1
    last = plan.start_iter + plan.n_iters
    st = plan.style
    at_iter = None
    iteration = None
    if stage == "training":
        lo = first + 3 if mode not in ("nan", "slow") else first + 8
        hi = last - 3
        if mode == "nan" and fw == "deepspeed":
            hi = last - 20  # the loss-scale collapse needs room before the end
        if late:
            lo = max(lo, hi - max(3, plan.n_iters // 50))
        at_iter = rng.randint(min(lo, hi), hi)
        iteration = at_iter
    elif stage == "evaluation":
        cands = [i for i in range(first, last) if i % st.eval_interval == 0]
        if late:
            cands = cands[-1:]
        at_iter = rng.choice(cands) if cands else None
        if at_iter is None:
            stage, at_iter = "training", rng.randint(first + 2, last - 2)
            iteration = at_iter
    elif stage == "checkpointing":
        cands = [i for i in range(first, last) if i % st.save_interval == 0]
        if late:
            cands = cands[-1:]
        at_iter = rng.choice(cands) if cands else None
        if at_iter is None:
            # a run too short for a periodic save still writes its final one
            stage = "finalization"
    variant = {}
    if mode == "slow":
        variant["factor"] = rng.uniform(3.0, 10.0)
        variant["slow_iters"] = rng.randint(4, 16)
        variant["end"] = "time_limit" if st.platform == "slurm" and rng.random() < 0.5 else "hang"
    if mode == "crash" and spec.id == "host_oom_kill":
        variant["kernel_line"] = rng.random() < 0.5
    return FaultPlan(spec=spec, mode=mode, stage=stage, iteration=iteration, culprits=culprits,
                     blocks=blocks, at_iter=at_iter, frac=rng.uniform(0.1, 0.9), variant=variant)


def plan_case(seed: int, *, framework: str | None = None, n_nodes: int | None = None,
              ranks_per_node: int | None = None, iterations: int | None = None,
              fault: str | None = None, n_baselines: int = 2,
              bytes_per_node: int | None = None, vary: bool = True,
              dialect: V.Dialect | None = None) -> tuple[JobPlan, list[JobPlan]]:
    """Plan a failed job and its successful baselines (pure; nothing is written).

    ``vary`` draws a per-job :class:`~l4.sim.dialect.Dialect`; without it every job of a
    framework speaks the framework's one default dialect (the simulator before dialects).
    ``dialect`` imposes one dialect on the failed job and every baseline (for tests).
    """
    rng = random.Random(zlib.crc32(f"l4-sim-{seed}".encode()))
    if fault is not None and fault not in D.FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(list_faults())}")
    if framework is not None and framework not in D.FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(D.FRAMEWORKS)}")
    if fault is None:
        fault = _pick_fault(seed, framework)
    if framework is None:
        # Ascend-only faults already bring MindSpeed cases; keep the NVIDIA stacks common
        weights = {"megatron": 1.3, "deepspeed": 1.0, "hf": 1.0, "torchtitan": 1.0, "mindspeed": 0.5}
        framework = _weighted(rng, [(f, weights[f]) for f in D.FAULTS[fault].frameworks])
    elif framework not in D.FAULTS[fault].frameworks:
        raise ValueError(f"fault {fault!r} does not occur with framework {framework!r} "
                         f"(it does with: {', '.join(D.FAULTS[fault].frameworks)})")
    if n_nodes is None:
        n_nodes = rng.choice(SIZES)
    if n_nodes < 2:
        raise ValueError("n_nodes must be at least 2 (a distributed job)")
    if ranks_per_node is not None and ranks_per_node < 1:
        raise ValueError("ranks_per_node must be positive")
    big = bytes_per_node is not None
    style = _make_style(rng, framework, fault, ranks_per_node, big)
    base_style = style
    if iterations is None:
        iterations = rng.randint(30, 300)
    iterations = max(iterations, 60 if fault in ("nan_loss", "slow_node") else 16)
    config_id = f"{framework}-{style.fields['model_size'].lower()}-{zlib.crc32(repr(seed).encode()) & 0xFFFFFF:06x}"
    jobnum = 1_000_000 + rng.randint(0, 8_000_000)
    rpn_fixed = ranks_per_node is not None or big
    imposed = dialect is not None
    if dialect is None:
        dialect = _pick_dialect(seed, "failed", style, n_nodes, rpn_fixed) if vary else V.Dialect()
    failed = _plan_job(rng, style, job_id=str(jobnum), config_id=config_id, status="failed",
                       seed=seed, n_nodes=n_nodes, iterations=iterations, k8s_tag=f"train-{jobnum % 9973}",
                       dialect=dialect)
    style = failed.style
    if big:
        failed.n_iters = _iters_for_bytes(failed, bytes_per_node)
        # keep eval/checkpoint blocks few, whatever the length
        for st_ in (style, base_style):
            st_.eval_interval = max(st_.eval_interval, failed.n_iters // 8)
            st_.save_interval = max(st_.save_interval, failed.n_iters // 4)
    failed.fault = _plan_fault(rng, failed, fault, late=big)
    baselines = []
    for j in range(n_baselines):
        nb = rng.choice([n_nodes, n_nodes, max(2, n_nodes // 2), max(2, (n_nodes * 3) // 4)])
        bstyle = replace(base_style)
        bnum = jobnum - rng.randint(100, 90_000)
        # most healthy runs of a configuration come from the same site and script; some
        # were run with another framework version, script or launcher wrapper
        own = vary and not imposed and random.Random(zlib.crc32(f"l4-dialect-share-{seed}-{j}".encode())).random() < 0.3
        bd = _pick_dialect(seed, f"baseline-{j}", base_style, nb, rpn_fixed) if own else dialect
        b = _plan_job(rng, bstyle, job_id=str(bnum), config_id=config_id, status="succeeded",
                      seed=seed, n_nodes=nb, iterations=rng.randint(30, 300) if not big else failed.n_iters,
                      k8s_tag=f"train-{bnum % 9973}", dialect=bd)
        baselines.append(b)
    return failed, baselines


# ======================================================================================
# Timeline
# ======================================================================================


@dataclass
class Timeline:
    startup: list[tuple[float, D.Step]]
    windows: dict[str, tuple[float, float]]
    iters: list[tuple[int, float, float]]
    evals: dict[int, tuple[float, float]]
    saves: dict[int, tuple[float, float]]
    final: tuple[float, float]


def _cond_ok(cond: str, plan: JobPlan) -> bool:
    """Whether a step applies; ``end`` only says *when* (at the end of its phase)."""
    st = plan.style
    parts = [c for c in cond.split("+") if c != "end"]
    if len(parts) > 1:
        return all(_cond_ok(c, plan) for c in parts)
    cond = parts[0] if parts else ""
    return {
        "": True,
        "nccl": st.nccl_info and st.framework != "mindspeed",
        "plog": st.nccl_info and st.framework == "mindspeed",
        "torchrun": st.launcher == "torchrun",
        "resume": plan.start_iter > 0,
        "fresh": plan.start_iter == 0,
    }[cond]


def _timeline(plan: JobPlan, rng: random.Random) -> Timeline:
    st = plan.style
    t = plan.t0 + rng.uniform(0.5, 3.0)
    startup = []
    windows: dict[str, list[float]] = {}
    for step in D.STARTUP[st.framework]:
        if not _cond_ok(step[2], plan):
            continue
        startup.append((t, step))
        w = windows.setdefault(step[0], [t, t])
        t += step[3] * rng.uniform(0.6, 1.6)
        w[1] = t
    f = plan.fault
    slow_from = f.at_iter if f is not None and f.mode == "slow" else None
    factor = f.variant.get("factor", 1.0) if f is not None else 1.0
    iters, evals, saves = [], {}, {}
    first = plan.start_iter + 1
    last = plan.start_iter + plan.n_iters
    base = st.iter_time
    for it in range(first, last + 1):
        d = base * (1 + rng.gauss(0, 0.03))
        if it == first:
            d *= rng.uniform(1.5, 4.0)  # warm-up (compilation, allocator)
        if slow_from is not None and it >= slow_from:
            d *= factor
        iters.append((it, t, t + d))
        t += d
        if it % st.eval_interval == 0 and it != last:
            dur = rng.uniform(5, 40)
            evals[it] = (t, t + dur)
            t += dur
        if it % st.save_interval == 0 and it != last:
            dur = rng.uniform(8, 90)
            saves[it] = (t, t + dur)
            t += dur
    final = (t, t + rng.uniform(20, 90))
    return Timeline(startup=startup, windows={k: (v[0], v[1]) for k, v in windows.items()},
                    iters=iters, evals=evals, saves=saves, final=final)


def _iters_for_bytes(plan: JobPlan, target: int) -> int:
    """Iterations that make the node files about ``target`` bytes each (measured on a probe)."""
    probe = replace(plan, n_iters=64, fault=None)
    r = _Renderer(probe)
    n = len(plan.hosts)
    nodes = sorted({0, n // 2, n - 1})
    total = 0
    for i in nodes:
        for rec in r.iter_stream(i):
            total += len(rec[2].encode("utf-8")) + 1
    per_iter = max(1.0, total / len(nodes) / 64)
    return max(64, int(target / per_iter))


# ======================================================================================
# Rendering
# ======================================================================================

_SEC_CACHE: dict[tuple[str, int], str] = {}
_MON = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _sec(fmt: str, t: float) -> str:
    key = (fmt, int(t))
    s = _SEC_CACHE.get(key)
    if s is None:
        if len(_SEC_CACHE) > 50_000:
            _SEC_CACHE.clear()
        s = time.strftime(fmt, time.gmtime(int(t)))
        _SEC_CACHE[key] = s
    return s


def _frac(t: float, digits: int) -> str:
    if digits == 3:
        return f"{int((t % 1) * 1000):03d}"
    if digits == 9:
        return f"{int((t % 1) * 1e9):09d}"
    return str(int((t % 1) * 10 ** digits)).zfill(digits)


def _glog(t: float) -> str:
    tm = time.gmtime(int(t))
    return f"{tm.tm_mon}{tm.tm_mday:02d} {_sec('%H:%M:%S', t)}.{_frac(t, 9)}"


TIME_FORMATS = {
    "py_ts": lambda t: f"{_sec('%Y-%m-%d %H:%M:%S', t)},{_frac(t, 3)}",
    "us_ts": lambda t: _sec("%m/%d/%Y %H:%M:%S", t),
    "br_ts": lambda t: _sec("%Y-%m-%d %H:%M:%S", t),
    "iso_ts": lambda t: f"{_sec('%Y-%m-%dT%H:%M:%S', t)}.{_frac(t, 9)}Z",
    "hccl_ts": lambda t: f"{_sec('%Y-%m-%d-%H:%M:%S', t)}.{_frac(t, 3)}.{_frac(t * 1000, 3)}",
    "asc_ts": lambda t: _sec("%Y-%m-%d-%H:%M:%S", t),
    "ctime_ts": lambda t: _sec("%a %b %d %H:%M:%S %Y", t),
    "slurm_ts": lambda t: _sec("%Y-%m-%dT%H:%M:%S", t),
    "loguru_ts": lambda t: f"{_sec('%Y-%m-%d %H:%M:%S', t)}.{_frac(t, 3)}",
    "elastic_ts": lambda t: _sec("%Y-%m-%d_%H:%M:%S", t),
    "syslog_ts": lambda t: _sec("%b %d %H:%M:%S", t),
}


class _Ctx(ChainMap):
    """Template fields: static maps plus time strings / random ids computed on demand."""

    def __init__(self, r: _Renderer, node: int, t: float, *maps: dict):
        super().__init__(*maps)
        self.r = r
        self.node = node
        self.t = t

    def __missing__(self, key: str):
        tp = self.t + self.r.plan.skews[self.node]
        fn = TIME_FORMATS.get(key)
        if fn is not None:
            return fn(tp)
        rng = self.r.misc
        if key in ("glog_e", "glog_w"):
            return _glog(tp) if self.r.style.new_torch else ""
        if key == "addr":
            return f"7f{rng.getrandbits(40):010x}"
        if key == "addr_short":
            return f"{rng.getrandbits(44):011x}"
        if key == "port":
            return str(rng.randint(32768, 60999))
        if key == "fd":
            return str(rng.randint(20, 180))
        if key.startswith("dhead_"):
            _h, level, lineno = key.split("_")
            return V.header(self.r.dialect, tp, level, self["pid"], int(lineno))
        raise KeyError(key)


def _parse_text(text: str) -> list[tuple[str, str]]:
    out = []
    for raw in text.strip("\n").split("\n"):
        out.append((raw[0], raw[2:]))
    return out


_PARSED: dict[str, list[tuple[str, str]]] = {}


def _parsed(text: str) -> list[tuple[str, str]]:
    p = _PARSED.get(text)
    if p is None:
        p = _PARSED[text] = _parse_text(text)
    return p


Rec = tuple  # (t, seq, text, tag, number of lines in text)


class _Renderer:
    """Builds the records of every node of one job, then writes them."""

    def __init__(self, plan: JobPlan):
        self.plan = plan
        self.style = plan.style
        self.dialect = plan.dialect
        st = self.style
        self.iter_style = _iter_style(plan)
        # a resumed job's bar would start mid-epoch at a step the log never states: only
        # fresh jobs draw epoch bars (the truth's iteration stays the global step)
        self.bar_epoch = _bar_epoch(plan)
        self._lines_cache: dict[str, list[tuple[str, str]]] = {}
        self.n = len(plan.hosts)
        self.rpn = st.rpn
        self.world = self.n * self.rpn
        self.rng = random.Random(zlib.crc32(f"render-{plan.job_id}-{plan.seed}".encode()))
        self.misc = random.Random(self.rng.getrandbits(32))
        self.tl = _timeline(plan, self.rng)
        self.recs: list[list[Rec]] = [[] for _ in range(self.n)]
        self.seq = count()
        self.cut = [math.inf] * self.n  # normal output stops here
        self.dead = [math.inf] * self.n  # nothing at all after this
        self.first_iter = plan.start_iter + 1
        self.last_iter = plan.start_iter + plan.n_iters
        self.loss0 = self.rng.uniform(7.0, 11.0)
        self._tqdm_cache: dict[int, str] = {}
        self.fp16_skips = self.rng.randint(3, 8) if st.fp16 and plan.start_iter == 0 else 0
        self._job_fields()
        self._node_fields()
        self._ds_schedule()
        self.odd: dict[str, int] = {}
        if plan.oddities:
            orng = random.Random(zlib.crc32(f"odd-{plan.job_id}".encode()))
            for name in ("crlf", "no_newline", "bad_utf8", "huge_line", "tqdm_cr", "glued"):
                self.odd[name] = orng.randrange(self.n)

    def _ds_schedule(self) -> None:
        """DeepSpeed fp16 loss-scale history: benign early overflows, or a fault's collapse."""
        st, f = self.style, self.plan.fault
        pow_, skipped = 16, 0
        ov: dict[int, tuple[int, int, bool]] = {}
        sk: dict[int, int] = {}
        self.ds_abort_it = None
        if st.framework == "deepspeed":
            for it, _a, _b in self.tl.iters:
                k = it - self.plan.start_iter
                if st.fp16 and k <= self.fp16_skips:
                    ov[it] = (2 ** pow_, 2 ** (pow_ - 1), False)
                    pow_, skipped = pow_ - 1, skipped + 1
                elif f is not None and f.mode == "nan" and it >= (f.at_iter or 0):
                    if pow_ < 1:
                        self.ds_abort_it = it
                        break
                    ov[it] = (2 ** pow_, 2 ** (pow_ - 1), True)
                    pow_, skipped = pow_ - 1, skipped + 1
                sk[it] = skipped
        self.ds_overflow, self.ds_skipped = ov, sk

    # ---- static fields -----------------------------------------------------------------
    def _job_fields(self) -> None:
        st, plan, rng = self.style, self.plan, self.rng
        f = dict(st.fields)
        hosts = plan.hosts
        f.update(
            world=self.world, nnodes=self.n, rpn=self.rpn, tp=st.tp, pp=st.pp,
            dp=max(1, self.world // (st.tp * st.pp)), jobid=plan.job_id, master=hosts[0],
            master_ip=plan.ips[0], start_iter=plan.start_iter, first_iter=self.first_iter,
            train_iters=self.last_iter, timeout_s=st.timeout_s, timeout_min=st.timeout_s // 60,
            eval_interval=st.eval_interval, save_interval=st.save_interval,
            micro_batches=rng.choice((4, 8, 16, 32)), gbs=rng.choice((256, 512, 1024, 2048)),
            warmup=rng.choice((100, 200, 2000)), init_secs=f"{rng.uniform(20, 400):.3f}",
            train_samples=rng.randint(10**7, 10**9), valid_samples=rng.randint(10**4, 10**6),
            test_samples=rng.randint(1000, 10**5), ds_samples=rng.randint(10**7, 10**9),
            ds_rows=rng.randint(10**5, 10**7), val_rows=rng.randint(1000, 50000),
            micro_total=rng.randint(10**4, 10**6), lbs=rng.choice((1, 2, 4, 8)),
            cvd=",".join(str(i) for i in range(self.rpn)), cache_id=f"{rng.getrandbits(64):016x}",
            worker_list=",".join(hosts), wait_secs=f"{rng.uniform(0.0005, 3):.4f}",
            train_rt=f"{rng.uniform(1000, 90000):.4f}", train_hms="1:02:03.45", epoch="0.42",
            mem_pct=f"{rng.uniform(5, 60):.2f}", cpu_used=f"{rng.uniform(40, 400):.2f}",
            cpu_pct=f"{rng.uniform(5, 60):.1f}", hccl_us=rng.randint(10000, 900000),
            world_info="{" + ", ".join(f"'{h}': [{', '.join(str(i) for i in range(self.rpn))}]"
                                       for h in hosts) + "}",
            rank_mapping="{" + ", ".join(
                f"'{h}': [{', '.join(str(k * self.rpn + i) for i in range(self.rpn))}]"
                for k, h in enumerate(hosts)) + "}",
        )
        self.jf = f

    def _node_fields(self) -> None:
        plan, rng = self.plan, self.rng
        self.nf: list[dict] = []
        self.rf: list[list[dict]] = []
        self.agent_pid = []
        for i, host in enumerate(plan.hosts):
            agent_pid = rng.randint(1000, 3_900_000)
            self.agent_pid.append(agent_pid)
            self.nf.append({"host": host, "ip": plan.ips[i], "node_index": i, "agent_pid": agent_pid})
            ranks = []
            pid = agent_pid + rng.randint(5, 400)
            for lr in range(self.rpn):
                rank = i * self.rpn + lr
                pid += rng.randint(1, 3)
                bus = f"{(0x18 + lr * 0x1b) & 0xff:x}000"
                nxt = (rank + 1) % self.world
                ranks.append({
                    "rank": rank, "lrank": lr, "pid": pid, "tid": pid + rng.randint(150, 900),
                    "tid2": pid + rng.randint(901, 1500), "busid": bus,
                    "pci": f"0000:{(0x18 + lr * 0x1b) & 0xff:02x}:00",
                    "pci_full": f"0000:{(0x18 + lr * 0x1b) & 0xff:02x}:00.0",
                    "comm": f"{rng.getrandbits(44):011x}", "next_rank": nxt,
                    "next_busid": f"{(0x18 + (nxt % self.rpn) * 0x1b) & 0xff:x}000",
                    "tree_a": max(-1, rank - 1), "tree_b": (rank + self.rpn) % self.world,
                    "hca": lr % 4, "tp_rank": rank % self.style.tp,
                    "pp_rank": (rank // self.style.tp) % self.style.pp,
                })
            self.rf.append(ranks)
        st = self.style
        self.rank_pfx = []
        outer = []
        for i, host in enumerate(plan.hosts):
            outer.append({"none": "", "label": f"{i}: ", "pdsh": f"{host}: ",
                          "kubectl": f"[pod/{host}/trainer] "}[self.dialect.outer])
        for i, host in enumerate(plan.hosts):
            row = []
            for lr in range(self.rpn):
                rank = i * self.rpn + lr
                row.append(outer[i] + {
                    "default": f"[default{lr}]:", "rank": f"[rank{rank}]:", "label": f"{rank}: ",
                    "host": f"{host}: ", "mpi": f"[1,{rank}]<stdout>:", "none": "",
                }[st.prefix])
            self.rank_pfx.append(row)
        self.host_pfx = [f"{h}: " if st.prefix == "host" else outer[i] for i, h in enumerate(plan.hosts)]

    def ctx(self, node: int, lrank: int | None, t: float, extra: dict | None = None) -> _Ctx:
        maps = [self.rf[node][lrank or 0], self.nf[node], self.jf]
        if extra:
            maps.insert(0, extra)
        return _Ctx(self, node, t, *maps)

    # ---- emission -----------------------------------------------------------------------
    def prefix(self, node: int, stream: str, lrank: int | None, t: float) -> str:
        st = self.style
        tp = t + self.plan.skews[node]
        if stream == "R":
            p = self.rank_pfx[node][lrank or 0]
            if st.mpi_ts:
                p = TIME_FORMATS["ctime_ts"](tp) + p
        elif stream == "A":
            p = self.host_pfx[node]
        elif stream == "K":
            if st.kmsg == "uptime":
                p = f"[{tp - self.plan.t0 + self.plan.boots[node]:12.6f}] "
            elif st.kmsg == "ctime":
                p = f"[{TIME_FORMATS['ctime_ts'](tp)}] "
            else:
                p = f"{TIME_FORMATS['syslog_ts'](tp)} {self.plan.hosts[node]} kernel: "
        else:
            p = ""
        if st.k8s_ts:
            p = TIME_FORMATS["iso_ts"](tp) + " " + p
        return p

    def emit(self, node: int, t: float, stream: str, lrank: int | None, text: str,
             tag: tuple[str, str] | None = None, normal: bool = True) -> None:
        if t >= self.dead[node] or (normal and t >= self.cut[node]):
            return
        self.recs[node].append((t, next(self.seq), self.prefix(node, stream, lrank, t) + text, tag, 1))

    def emit_text(self, node: int, lrank: int | None, t: float, lines: list[tuple[str, str]],
                  extra: dict | None = None, role: str | None = None, kind: str = "",
                  keys: Iterable[bool] | None = None, normal: bool = True) -> float:
        ctx = self.ctx(node, lrank, t, extra)
        keys = list(keys) if keys is not None else [True] * len(lines)
        for (stream, tmpl), key in zip(lines, keys, strict=True):
            ctx.t = t
            if tmpl == "@args":
                for name, val in D.MEGATRON_ARGS:
                    self.emit(node, t, stream, lrank,
                              f"  {name} {'.' * max(1, 48 - len(name))} {val.format_map(ctx)}",
                              None, normal)
                    t += 0.00001
                continue
            text = tmpl.format_map(ctx)
            tag = None
            if role:
                tag = (role, kind if key else f"{kind}:context")
            self.emit(node, t, stream, lrank, text, tag, normal)
            t += 0.0001
        return t

    def block(self, node: int, lrank: int | None, t: float, block_id: str, role: str,
              extra: dict | None = None) -> float:
        b = D.BLOCKS[block_id]
        lines = [(s, tmpl) for s, _k, tmpl in b.lines]
        return self.emit_text(node, lrank, t, lines, extra, role, b.kind,
                              [k for _s, k, _t in b.lines], normal=False)

    # ---- who ------------------------------------------------------------------------------
    def who(self, who: str) -> list[tuple[int, int | None]]:
        n, rpn = self.n, self.rpn
        st = self.style
        if who == "l0" and st.framework == "torchtitan" and st.chatter:
            who = "all"
        if who == "r0":
            return [(0, 0)]
        if who == "last":
            return [(n - 1, rpn - 1)]
        if who == "l0":
            return [(i, 0) for i in range(n)]
        if who == "l0x":
            return [(i, 0) for i in range(1, n)]
        if who == "all" or who == "node_all":
            return [(i, lr) for i in range(n) for lr in range(rpn)]
        if who == "dp0":
            mp = min(self.world, st.tp * st.pp)
            return [(r // rpn, r % rpn) for r in range(mp)]
        if who == "node":
            return [(i, None) for i in range(n)]
        if who == "node0":
            return [(0, None)]
        raise ValueError(who)

    def lines(self, text: str) -> list[tuple[str, str]]:
        """A healthy step's lines in the job's dialect (headers, paraphrases)."""
        out = self._lines_cache.get(text)
        if out is None:
            out = self._lines_cache[text] = V.restyle_lines(self.dialect, self.style.framework, _parsed(text))
        return out

    def banner(self, who: str) -> str:
        """Who prints what rank 0 prints: scripts without a rank guard print it everywhere."""
        b = self.dialect.banner_who
        if who == "r0" and b in ("l0", "all"):
            return b
        return who

    def steps(self, steps: Iterable[D.Step], t: float, extra: dict | None = None,
              end: float | None = None) -> float:
        """Emit a phase's steps from ``t``; steps marked ``end`` go just before ``end``
        (what is printed once a save/evaluation completed, so a fault inside the phase
        removes it)."""
        rng = self.rng
        steps = list(steps)
        n_end = sum(1 for s in steps if "end" in s[2].split("+"))
        t_end = (end - 0.3 - 0.7 * n_end) if end is not None else None
        for stage, who, cond, dt, text in steps:
            del stage
            if not _cond_ok(cond, self.plan):
                continue
            at_end = "end" in cond.split("+") and t_end is not None
            t_step = max(t, t_end) if at_end else t
            lines = self.lines(text)
            for node, lr in self.who(self.banner(who)):
                jit = 0.0 if lr is None else rng.uniform(0.0, 0.6)
                self.emit_text(node, lr, t_step + jit, lines, extra)
            if at_end:
                t_end += 0.7
            else:
                t += dt * rng.uniform(0.5, 1.5) + 0.01
        return t

    # ---- phases --------------------------------------------------------------------------
    def startup(self) -> None:
        rng = self.rng
        for t, step in self.tl.startup:
            stage, who, cond, dt, text = step
            del stage, cond, dt
            lines = self.lines(text)
            for node, lr in self.who(self.banner(who)):
                jit = 0.0 if lr is None else rng.uniform(0.0, 0.8)
                self.emit_text(node, lr, t + jit, lines, {"ms_a": f"{rng.uniform(100, 5000):.2f}",
                                                          "ms_b": f"{rng.uniform(5000, 9000):.2f}",
                                                          "ms_c": f"{rng.uniform(50, 900):.2f}",
                                                          "ms_d": f"{rng.uniform(900, 2000):.2f}",
                                                          "secs_a": rng.randint(1, 59),
                                                          "secs_b": rng.randint(0, 99),
                                                          "rate_a": f"{rng.uniform(500, 9000):.2f}",
                                                          "rate_b": f"{rng.uniform(0.5, 9):.2f}",
                                                          "mem_a": f"{rng.uniform(1, 40):.2f}",
                                                          "mem_b": f"{rng.uniform(1, 40):.2f}",
                                                          "mem_c": f"{rng.uniform(1, 40):.0f}"})

    def decoys(self) -> None:
        """A few one-off alarming but harmless lines on one node (never a culprit)."""
        rng = random.Random(zlib.crc32(f"decoy-{self.plan.job_id}".encode()))
        if rng.random() >= 0.6:
            return
        f = self.plan.fault
        culprits = set(f.culprits) if f is not None else set()
        nodes = [i for i in range(self.n) if i not in culprits]
        if not nodes:
            return
        t_lo = self.plan.t0 + 5
        t_hi = min(self.cut) if min(self.cut) < math.inf else self.tl.final[0]
        for did, _src, tmpl, stream in rng.sample(D.DECOYS, rng.randint(1, 2)):
            node = rng.choice(nodes)
            for _ in range(rng.randint(1, 3)):
                t = rng.uniform(t_lo, max(t_lo + 1, t_hi))
                self.emit_text(node, rng.randrange(self.rpn), t, [(stream, tmpl)])
            del did

    def noise(self) -> None:
        """Benign alarming lines at random places (config-level kinds + a few job-only ones)."""
        st, rng, tl = self.style, self.rng, self.tl
        kinds = set(st.noise) | set(self.plan.extra_noise)
        init0, init1 = tl.windows.get("initialization", (self.plan.t0, self.plan.t0 + 10))
        t_train0 = tl.iters[0][1]
        t_train1 = tl.iters[-1][2]
        for bid, _src, tmpl, stream, fws, where in D.BENIGN:
            if bid not in kinds or st.framework not in fws:
                continue
            lines = [(stream, tmpl)]
            if where in ("init", "train_start"):
                p_rank = rng.uniform(0.3, 1.0)
                for node in range(self.n):
                    for lr in range(self.rpn):
                        if rng.random() < p_rank:
                            t = rng.uniform(init0, init1) if where == "init" else t_train0 + rng.uniform(0, 3 * st.iter_time)
                            self.emit_text(node, lr, t, lines)
            else:
                lam = rng.uniform(0.2, 3.0)
                for node in range(self.n):
                    k = _poisson(rng, lam)
                    for _ in range(k):
                        self.emit_text(node, rng.randrange(self.rpn), rng.uniform(t_train0, t_train1), lines)

    def loop_phases(self) -> None:
        """Evaluation and checkpoint blocks between iterations (global, small)."""
        fw = self.style.framework
        stop = min(self.cut)
        for it, t_start, _t_end in self.tl.iters:
            if t_start >= stop:
                break
            if it in self.tl.evals:
                a, b = self.tl.evals[it]
                self.steps(D.EVAL[fw], a + 0.2, self._phase_extra(it), end=b)
            if it in self.tl.saves:
                a, b = self.tl.saves[it]
                self.steps(D.SAVE[fw], a + 0.2, self._phase_extra(it), end=b)

    def final(self) -> None:
        fw = self.style.framework
        a, b = self.tl.final
        self.steps(D.FINAL[fw], a + 0.5, self._phase_extra(self.last_iter), end=b)

    def _phase_extra(self, it: int) -> dict:
        rng = self.rng
        loss = self._loss(it) + rng.uniform(0.02, 0.15)
        return {"it": it, "val_loss_e": f"{loss:.6E}", "val_ppl_e": f"{math.exp(loss):.6E}",
                "val_loss_f": f"{loss:.4f}", "val_ppl_f": f"{math.exp(loss):.4f}",
                "ms_a": f"{rng.uniform(900, 4000):.2f}", "ms_b": f"{rng.uniform(4000, 30000):.2f}",
                "secs_a": rng.randint(1, 59), "secs_b": rng.randint(0, 99),
                "rate_a": f"{rng.uniform(10, 300):.3f}", "rate_b": f"{rng.uniform(0.5, 9):.3f}",
                "mem_a": f"{rng.uniform(20, 70):.2f}"}

    def _loss(self, it: int) -> float:
        """The job's loss curve: the same value on every node that prints it."""
        x = it / 400.0
        return 1.7 + (self.loss0 - 1.7) * math.exp(-x) + 0.05 * math.sin(it * 0.7) + 0.02 * _hnoise(it, 1)

    # ---- per-iteration lines (the hot path): one time-ordered generator per node --------
    def _slow(self, it: int) -> tuple[float, int | None]:
        f = self.plan.fault
        if f is not None and f.mode == "slow" and it >= (f.at_iter or 0):
            return f.variant["factor"], f.culprits[0]
        return 1.0, None

    def iter_stream(self, node: int) -> Iterator[Rec]:
        """Training-loop records of ``node`` in time order (nothing is kept in memory).

        An iteration's untagged lines of one kind travel as one multi-line record: the hot
        path formats little more than the numbers that change.
        """
        fn = {"megatron": self._iter_megatron, "mindspeed": self._iter_megatron,
              "deepspeed": self._iter_deepspeed, "hf": self._iter_hf,
              "torchtitan": self._iter_torchtitan}[self.style.framework]
        rng = random.Random(zlib.crc32(f"loop-{self.plan.job_id}-{self.plan.seed}-{node}".encode()))
        stop = min(self.cut[node], self.dead[node])
        fast = _Fast(self, node, rng)
        seq = 1 << 60
        native = self.iter_style == "native"
        for it, t0, t1 in self.tl.iters:
            if t0 >= stop:
                return
            items = fn(node, it, t0, t1, rng, fast)
            if not native:
                items = sorted(items + self._progress(node, it, t0, t1, fast), key=_item_key)
            for t, text, nl, tag in items:
                if t >= stop:
                    return
                seq += 1
                yield (t, seq, text, tag, nl)

    def _progress(self, node: int, it: int, t0: float, t1: float, fast: _Fast) -> list:
        """The job's own progress line for iteration ``it`` (dialects other than native)."""
        ranks = self._progress_ranks(node)
        if not ranks:
            return []
        tt = t1 + 0.015
        d = self.dialect
        if self.bar_epoch:  # tqdm writes its bar raw to stderr: no logging header
            bar = V.epoch_bar(it, self.bar_epoch, t1 - self.tl.iters[0][1], t1 - t0, self._loss(it))
            lines = [fast.pfx(lr, tt) + bar for lr in ranks]
            return [(tt, "\n".join(lines), len(lines), None)]
        body = V.progress_body(self.iter_style, it, self.last_iter, self._loss(it),
                               3e-4 * min(1.0, it / 200.0), t1 - t0)
        lines = [fast.pfx(lr, tt) + V.header(d, tt + fast.skew + k * 1e-4, "INFO", self.rf[node][lr]["pid"], 214)
                 + body for k, lr in enumerate(ranks)]
        return [(tt, "\n".join(lines), len(lines), None)]

    def _progress_ranks(self, node: int) -> list[int]:
        who = self.dialect.progress_who
        if who == "native":
            fw = self.style.framework
            who = {"megatron": "last", "mindspeed": "last", "deepspeed": "r0", "hf": "r0"}.get(
                fw, "all" if self.style.chatter else "l0")
        if who == "r0":
            return [0] if node == 0 else []
        if who == "last":
            return [self.rpn - 1] if node == self.n - 1 else []
        if who == "l0":
            return [0]
        return list(range(self.rpn))

    def _iter_megatron(self, node: int, it: int, t0: float, t1: float, rng: random.Random,
                       fast: _Fast) -> list:
        st = self.style
        rpn = self.rpn
        d_ms = (t1 - t0) * 1000
        factor, slow_node = self._slow(it)
        tt = t1 + 0.02
        out = []
        if node == self.n - 1 and self.iter_style == "native":
            ts = f" [{TIME_FORMATS['br_ts'](tt + fast.skew)}]" if st.mg_ts else ""
            lr = 3e-4 * min(1.0, it / 200.0)
            samples = it * int(self.jf["gbs"])
            gbs = self.jf["gbs"]
            k = it - self.plan.start_iter
            if k <= self.fp16_skips:
                body = (f"{ts} iteration {it:8d}/{self.last_iter:8d} | consumed samples: {samples:12d} | "
                        f"elapsed time per iteration (ms): {d_ms:.1f} | learning rate: {lr:.6E} | "
                        f"global batch size: {gbs:5d} | loss scale: {2.0 ** (32 - k):.1f} | "
                        f"number of skipped iterations: {1:3d} | number of nan iterations: {0:3d} |")
            else:
                tflops = 2.4e2 * 1000.0 / max(1.0, d_ms)
                scale = 2.0 ** (32 - self.fp16_skips) if st.fp16 else 1.0
                body = (f"{ts} iteration {it:8d}/{self.last_iter:8d} | consumed samples: {samples:12d} | "
                        f"elapsed time per iteration (ms): {d_ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
                        f"learning rate: {lr:.6E} | global batch size: {gbs:5d} | lm loss: {self._loss(it):.6E} | "
                        f"loss scale: {scale:.1f} | grad norm: {0.9 + 0.2 * _hnoise(it, 2):.3f} | "
                        f"number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |")
            out.append((tt, fast.pfx(rpn - 1, tt) + body, 1, None))
        if it == self.first_iter:
            for nd, lr_ in self.who("dp0"):
                if nd == node:
                    text = (f"[Rank {node * rpn + lr_}] (after {it} iterations) memory (MB) | allocated: "
                            f"{rng.uniform(20000, 40000):.4f} | max allocated: {rng.uniform(40000, 70000):.4f} | "
                            f"reserved: 71620.0 | max reserved: 71620.0")
                    out.append((tt + 0.05 + lr_ * 1e-4, fast.pfx(lr_, tt) + text, 1, None))
        if st.chatter:
            tb = tt + 0.03
            if factor == 1.0 and it != self.first_iter:
                out.append((tb, fast.pooled(it, "", tb), rpn, None))
                return out
            else:
                comp = d_ms / factor * 0.8
                bodies = []
                for _ in range(rpn):
                    j1, j2 = 0.97 + 0.06 * rng.random(), 0.97 + 0.06 * rng.random()
                    if node == slow_node:
                        fc, bc, ar = comp * 0.33 * factor * j1, comp * 0.62 * factor * j2, 2 + 28 * rng.random()
                    else:
                        fc, bc = comp * 0.33 * j1, comp * 0.62 * j2
                        ar = max(1.0, d_ms - fc - bc) * (0.9 + 0.1 * rng.random())
                    bodies.append(f"time (ms) | forward-compute: {fc:.2f} | backward-compute: {bc:.2f} | "
                                  f"backward-params-all-reduce: {ar:.2f} | optimizer: {10 + 30 * rng.random():.2f}")
            out.append((tb, fast.block(bodies, tb, it), rpn, None))
        return out

    def _iter_deepspeed(self, node: int, it: int, t0: float, t1: float, rng: random.Random,
                        fast: _Fast) -> list:
        st = self.style
        rpn = self.rpn
        factor, slow_node = self._slow(it)
        d_ms = (t1 - t0) * 1000
        tt = t1 + 0.01
        out = []
        if node == 0:
            py = TIME_FORMATS["py_ts"](tt + fast.skew)
            p0 = fast.pfx(0, tt)
            ov = self.ds_overflow.get(it)
            if ov is not None:
                tag = (_ROLE_IND, "ds_loss_scale_overflow:context") if ov[2] else None
                out.append((tt - 0.2, p0 + f"[{py}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                                           f"Skipping step. Attempted loss scale: {ov[0]}, reducing to {ov[1]}", 1, tag))
            lr = 3e-4 * min(1.0, it / 200.0)
            sps = int(self.jf["gbs"]) / max(0.05, d_ms / 1000)
            lg = TIME_FORMATS["loguru_ts"](tt + 0.0004 + fast.skew)
            text = (f"{p0}[{py}] [INFO] [logging.py:96:log_dist] [Rank 0] step={it}, "
                    f"skipped={self.ds_skipped.get(it, 0)}, lr=[{lr:.6g}], mom=[(0.9, 0.95)]\n"
                    f"{p0}[{py}] [INFO] [timer.py:215:stop] epoch=0/micro_step={it}/global_step={it}, "
                    f"RunningAvgSamplesPerSec={sps * (0.98 + 0.04 * rng.random()):.12g}, "
                    f"CurrSamplesPerSec={sps * (0.9 + 0.2 * rng.random()):.12g}, "
                    f"MemAllocated={10 + 20 * rng.random():.2f}GB, MaxMemAllocated={30 + 40 * rng.random():.2f}GB")
            if self.iter_style == "native":  # the script's own line; other dialects print theirs
                out.append((tt, f"{text}\n{p0}{lg} | INFO     | __main__:log_dist:53 - [Rank 0] Loss: "
                                f"{self._loss(it):.4f}", 3, None))
            else:
                out.append((tt, text, 2, None))
        if st.chatter:
            tb = tt + 0.03
            py = TIME_FORMATS["py_ts"](tb + fast.skew)
            if factor == 1.0 and it != self.first_iter:
                out.append((tb, fast.pooled(it, py, tb), rpn, None))
                return out
            else:
                comp = d_ms / factor * 0.85
                bodies = []
                for lr_ in range(rpn):
                    j1, j2 = 0.97 + 0.06 * rng.random(), 0.97 + 0.06 * rng.random()
                    if node == slow_node:
                        fwd, bwd, ar = comp * 0.33 * factor * j1, comp * 0.6 * factor * j2, 0.05 + 20 * rng.random()
                    else:
                        fwd, bwd = comp * 0.33 * j1, comp * 0.6 * j2
                        ar = max(0.05, d_ms - fwd - bwd) * (0.9 + 0.1 * rng.random())
                    bodies.append(f"[{py}] [INFO] [logging.py:96:log_dist] [Rank {node * rpn + lr_}] time (ms) | "
                                  f"fwd_microstep: {fwd:.2f} | bwd_microstep: {bwd:.2f} | bwd_inner_microstep: "
                                  f"{bwd * 0.98:.2f} | bwd_allreduce_microstep: {ar:.2f} | step_microstep: "
                                  f"{20 + 70 * rng.random():.2f}")
            out.append((tb, fast.block(bodies, tb, it), rpn, None))
        return out

    def _tqdm(self, it: int, elapsed: float, per: float) -> str:
        hit = self._tqdm_cache.get(it)
        if hit is not None:
            return hit
        if len(self._tqdm_cache) > 100_000:
            self._tqdm_cache.clear()
        total = self.last_iter
        pct = int(100 * it / total)
        filled = int(10 * it / total)
        bar = "█" * filled + " " * (10 - filled)
        remain = max(0.0, (total - it) * per)
        out = self._tqdm_cache[it] = f"{pct:3d}%|{bar}| {it}/{total} [{_hms(elapsed)}<{_hms(remain)}, {per:.2f}s/it]"
        return out

    def _iter_hf(self, node: int, it: int, t0: float, t1: float, rng: random.Random, fast: _Fast) -> list:
        if self.bar_epoch:  # the script's own epoch bar (``_progress``) instead of Trainer's
            return []
        per = t1 - t0
        tt = t1 + 0.01
        if node == 0:
            epoch = round(it / max(1, self.last_iter), 2)
            p0 = fast.pfx(0, tt)
            loss = (f"{p0}{{'loss': {self._loss(it):.4f}, 'grad_norm': {1.0 + 0.3 * _hnoise(it, 3):.6f}, "
                    f"'learning_rate': {3e-5 * (1 - it / (self.last_iter + 1)):.6e}, 'epoch': {epoch}}}")
            if self.iter_style != "native":  # a script's own loop: its progress line instead
                bar = self._tqdm(it, t1 - self.tl.iters[0][1], per)
                if not self.style.chatter:
                    return [(tt, p0 + bar, 1, None)]
                return [(tt + 0.001, fast.pooled(it, bar, tt), self.rpn, None)]
            if not self.style.chatter:
                return [(tt, f"{loss}\n{p0}{self._tqdm(it, t1 - self.tl.iters[0][1], per)}", 2, None)]
            return [(tt, loss, 1, None),
                    (tt + 0.001, fast.pooled(it, self._tqdm(it, t1 - self.tl.iters[0][1], per), tt), self.rpn, None)]
        if self.style.chatter:
            # accelerate scripts that forget ``disable=not is_local_main_process``: every rank
            tb = tt + 0.05 * rng.random()
            return [(tb, fast.pooled(it, self._tqdm(it, t1 - self.tl.iters[0][1], per), tb), self.rpn, None)]
        return []

    def _iter_torchtitan(self, node: int, it: int, t0: float, t1: float, rng: random.Random,
                         fast: _Fast) -> list:
        if self.iter_style != "native":
            return []
        ranks = self.rpn if self.style.chatter else 1
        tb = t1 + 0.02 + 0.01 * rng.random()
        ts = TIME_FORMATS["py_ts"](tb + fast.skew)
        mid = (f" - root - INFO - step: {it:2d}  loss: {self._loss(it):7.4f}  grad_norm: "
               f"{0.9 + 0.3 * _hnoise(it, 4):7.4f}  memory: {fast.mem}  ")
        if it == self.first_iter:
            bodies = [f"[titan] {ts}{mid}{fast.tt_metrics(rng)}" for _ in range(ranks)]
            out = [(tb, fast.block(bodies, tb, it), ranks, None)]
        else:
            out = [(tb, fast.pooled(it, ts + mid, tb, None if ranks == self.rpn else ranks), ranks, None)]
        if it % 50 == 0:
            gc = [f"[titan] {ts} - root - INFO - [GC] Peforming periodical GC collection. "
                  f"{0.01 + 0.08 * rng.random():.2f} seconds." for _ in range(ranks)]
            out.append((tb + 0.1, fast.block(gc, tb + 0.1, it), ranks, None))
        return out

    # ---- output ----------------------------------------------------------------------------
    def layout(self) -> list[str]:
        st = self.style
        rng = random.Random(zlib.crc32(f"layout-{self.plan.job_id}".encode()))
        rels = []
        for i, host in enumerate(self.plan.hosts):
            if st.layout == "nested":
                rels.append(f"logs/rack-{chr(97 + i // 8)}/{host}.out")
            elif rng.random() < st.gz_frac:
                rels.append(f"logs/{host}.log.gz")
            else:
                rels.append(f"logs/{host}.log")
        return rels

    def write(self, job_dir: Path, workers: int = 1) -> dict[str, list[dict]]:
        """Write every node file; return tagged lines {'indicator': [...], 'symptom': [...]}.

        With ``workers`` > 1 the node files are written by forked processes (the renderer
        is read-only by then, and every node's loop has its own random stream).
        """
        rels = self.layout()
        tagged: dict[str, list[dict]] = {_ROLE_IND: [], _ROLE_SYM: []}
        jobs = list(enumerate(rels))
        if workers > 1 and len(jobs) > 1:
            import multiprocessing as mp

            global _WRITING
            _WRITING = (self, job_dir)
            try:
                with mp.get_context("fork").Pool(workers) as pool:
                    results = pool.map(_write_node_job, jobs, chunksize=1)
            finally:
                _WRITING = None
        else:
            results = [self.write_node(i, rel, job_dir) for i, rel in jobs]
        for part in results:
            for role, items in part.items():
                tagged[role].extend(items)
        return tagged

    def _add_oddities(self, i: int) -> None:
        """Hand-made oddities real collectors produce (only with ``oddities=True``)."""
        odd, recs = self.odd, self.recs[i]
        t_mid = self.tl.iters[len(self.tl.iters) // 3][2] + 0.5
        if odd.get("bad_utf8") == i:
            recs.append((t_mid, next(self.seq), "warning: tokenizer produced byte sequence \udcff\udcfe in "
                         "sample 1832 (replaced)", None, 1))
        if odd.get("huge_line") == i:
            vals = ", ".join(f"{(k * 37 % 1000) / 1000 - 0.5:.4f}" for k in range(40000))
            recs.append((t_mid + 0.1, next(self.seq), f"{self.rank_pfx[i][0]}tensor([[{vals}]], device='cuda:0')", None, 1))
        if odd.get("tqdm_cr") == i:
            bars = "\r".join(f"Map: {k:3d}%|{'#' * (k // 10):<10}| {k * 90}/9000 [00:0{k // 20}<00:0{5 - k // 20}, 1800.00 examples/s]"
                             for k in range(0, 101, 20))
            a, b = self.tl.windows.get("data_loading") or self.tl.windows["initialization"]
            recs.append(((a + b) / 2, next(self.seq), bars, None, 1))
        if odd.get("glued") == i:
            recs.append((t_mid + 0.2, next(self.seq), f"{self.rank_pfx[i][0]}  7%|▋         | 120/1800 [04:16<59:46,  2.13s/it]"
                         f"{self.rank_pfx[i][-1]}[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified "
                         "in DDP constructor, but did not find any unused parameters in the forward pass.", None, 1))

    def write_node(self, i: int, rel: str, job_dir: Path) -> dict[str, list[dict]]:
        tagged: dict[str, list[dict]] = {_ROLE_IND: [], _ROLE_SYM: []}
        if self.odd:
            self._add_oddities(i)
        sep = "\r\n" if self.odd.get("crlf") == i else "\n"
        recs = self.recs[i]
        recs.sort(key=_rec_key)
        merged = heapq.merge(recs, self.iter_stream(i), key=_rec_key)
        path = job_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed below
        fh = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) if rel.endswith(".gz") else raw
        with raw, fh:
            chunk: list[str] = []
            ln = 0
            for rec in merged:
                tag = rec[3]
                if tag is not None:
                    tagged[tag[0]].append({"file": rel, "line": ln + 1, "kind": tag[1]})
                ln += rec[4]
                chunk.append(rec[2] if sep == "\n" or rec[4] == 1 else rec[2].replace("\n", sep))
                if len(chunk) >= 4096:
                    chunk.append("")
                    fh.write(sep.join(chunk).encode("utf-8", "surrogateescape"))
                    chunk = []
            if self.odd.get("no_newline") != i:
                chunk.append("")
            if chunk:
                fh.write(sep.join(chunk).encode("utf-8", "surrogateescape"))
        self.recs[i] = []
        return tagged


_WRITING: tuple[_Renderer, Path] | None = None


def _write_node_job(job: tuple[int, str]) -> dict[str, list[dict]]:
    assert _WRITING is not None
    r, job_dir = _WRITING
    return r.write_node(job[0], job[1], job_dir)


class _Fast:
    """Per-node helpers of the training-loop hot path: prefixes and pre-rendered blocks.

    A healthy iteration prints the same kind of line on every rank with numbers that
    barely move, so each node renders a small pool of whole per-rank blocks once.  An
    iteration then costs one ``str.join`` that inserts what really changes (timestamp,
    step, loss) -- large files are generated at disk speed.
    """

    POOL = 16

    def __init__(self, r: _Renderer, node: int, rng: random.Random):
        self.r = r
        self.node = node
        self.skew = r.plan.skews[node]
        st = r.style
        self.plain = not (st.k8s_ts or st.mpi_ts)
        self.prefixes = r.rank_pfx[node]
        self.mem = f"{float(r.jf['mem_pct']) * 0.79:5.2f}GiB({r.jf['mem_pct']}%)"
        self.rpn = r.rpn
        fw = st.framework
        d_ms = st.iter_time * 1000
        rows = []
        for _ in range(self.POOL):
            row = []
            for lr in range(r.rpn):
                j1, j2 = 0.97 + 0.06 * rng.random(), 0.97 + 0.06 * rng.random()
                if fw in ("megatron", "mindspeed"):
                    comp = d_ms * 0.8
                    fc, bc = comp * 0.33 * j1, comp * 0.62 * j2
                    ar = max(1.0, d_ms - fc - bc) * (0.9 + 0.1 * rng.random())
                    row.append(f"time (ms) | forward-compute: {fc:.2f} | backward-compute: {bc:.2f} | "
                               f"backward-params-all-reduce: {ar:.2f} | optimizer: {10 + 30 * rng.random():.2f}")
                elif fw == "deepspeed":
                    comp = d_ms * 0.85
                    fwd, bwd = comp * 0.33 * j1, comp * 0.6 * j2
                    ar = max(0.05, d_ms - fwd - bwd) * (0.9 + 0.1 * rng.random())
                    row.append(f"] [INFO] [logging.py:96:log_dist] [Rank {node * r.rpn + lr}] time (ms) | "
                               f"fwd_microstep: {fwd:.2f} | bwd_microstep: {bwd:.2f} | bwd_inner_microstep: "
                               f"{bwd * 0.98:.2f} | bwd_allreduce_microstep: {ar:.2f} | step_microstep: "
                               f"{20 + 70 * rng.random():.2f}")
                elif fw == "torchtitan":
                    row.append(self.tt_metrics(rng))
                else:
                    row.append("")
            rows.append(row)
        self.pool = rows
        # (segments, order) per pool row: ``var.join(segments)`` is the whole block
        self.segs: list[list[str]] = []
        p = self.prefixes
        lead = {"deepspeed": "[", "torchtitan": "[titan] "}.get(fw, "")
        for k, row in enumerate(rows):
            n = len(row)
            order = _ORDERS[n][(k * 5 + node) % len(_ORDERS[n])] if n in _ORDERS else list(range(n))
            if fw in ("megatron", "mindspeed"):
                self.segs.append(["\n".join(p[i] + row[i] for i in order)])
                continue
            segs = [p[order[0]] + lead]
            for a, i in enumerate(order):
                nxt = "\n" + p[order[a + 1]] + lead if a + 1 < n else ""
                segs.append(row[i] + nxt)
            self.segs.append(segs)

    def tt_metrics(self, rng: random.Random) -> str:
        r = self.r
        tps = int(r.jf["seq"] * r.jf["lbs"] / max(0.05, r.style.iter_time))
        tf = tps * 6 * 8e9 / 1e12 * (0.98 + 0.04 * rng.random())
        return f"tps: {int(tps * (0.98 + 0.04 * rng.random())):,}  tflops: {tf:.2f}  mfu: {tf / 9.89:.2f}%"

    def pool_line(self, it: int) -> list[str]:
        return self.pool[(it * 7) % self.POOL]

    def pooled(self, it: int, var: str, t: float, ranks: int | None = None) -> str:
        """The healthy per-rank block of iteration ``it`` with ``var`` inserted on each line."""
        k = (it * 7) % self.POOL
        if ranks is None:
            block = var.join(self.segs[k])
            if self.plain:
                return block
            head = self.head(t)  # one stamp for the whole burst, as a runtime reading a pipe
            return head + block.replace("\n", "\n" + head)
        row = self.pool[k][: ranks or self.rpn]
        fw = self.r.style.framework
        if fw in ("megatron", "mindspeed"):
            bodies = row
        elif fw == "deepspeed":
            bodies = [f"[{var}{b}" for b in row]
        elif fw == "torchtitan":
            bodies = [f"[titan] {var}{b}" for b in row]
        else:
            bodies = [var for _ in row]
        return self.block(bodies, t, it)

    def head(self, t: float) -> str:
        st = self.r.style
        tp = t + self.skew
        h = TIME_FORMATS["iso_ts"](tp) + " " if st.k8s_ts else ""
        if st.mpi_ts:
            h += TIME_FORMATS["ctime_ts"](tp)
        return h

    def pfx(self, lr: int, t: float) -> str:
        if self.plain:
            return self.prefixes[lr]
        return self.r.prefix(self.node, "R", lr, t)

    def block(self, bodies: list[str], t: float, it: int) -> str:
        """One record holding a line per rank, ranks in a per-iteration order."""
        n = len(bodies)
        order = _ORDERS[n][(it * 13 + self.node) % len(_ORDERS[n])] if n in _ORDERS else range(n)
        p = self.prefixes
        if self.plain:
            return "\n".join([p[i] + bodies[i] for i in order])
        st = self.r.style
        tp = t + self.skew
        if st.k8s_ts:
            sec = _sec("%Y-%m-%dT%H:%M:%S", tp)
            ns = int((tp % 1) * 1e9)
            heads = [f"{sec}.{min(999_999_999, ns + k * 300_000):09d}Z " for k in range(n)]
        else:
            heads = [""] * n
        if st.mpi_ts:
            ct = TIME_FORMATS["ctime_ts"](tp)
            heads = [h + ct for h in heads]
        return "\n".join([heads[k] + p[i] + bodies[i] for k, i in enumerate(order)])


def _orders(n: int, k: int = 24) -> list[list[int]]:
    rng = random.Random(n)
    out = []
    for _ in range(k):
        o = list(range(n))
        rng.shuffle(o)
        out.append(o)
    return out


_ORDERS = {n: _orders(n) for n in (1, 2, 4, 8, 16)}


def _rec_key(rec: Rec) -> tuple[float, int]:
    return rec[0], rec[1]


def _item_key(item: tuple) -> float:
    return item[0]


def _hnoise(it: int, salt: int) -> float:
    """Deterministic noise in [-1, 1) for iteration ``it``: equal on every node."""
    return (((it * 2654435761 + salt * 40503) & 0xFFFFFF) / float(1 << 23)) - 1.0


def _hms(secs: float) -> str:
    secs = int(secs)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


# ======================================================================================
# Faults and their propagation
# ======================================================================================

_SIG = {-6: ("6", "SIGABRT"), -7: ("7", "SIGBUS"), -9: ("9", "SIGKILL"), -11: ("11", "SIGSEGV"),
        -15: ("15", "SIGTERM")}
_OPTYPES = {"megatron": ("_REDUCE_SCATTER_BASE", "ALLREDUCE"), "mindspeed": ("ALLREDUCE",),
            "deepspeed": ("_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"), "hf": ("ALLREDUCE",),
            "torchtitan": ("_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE")}


class _FaultRenderer:
    """Adds the culprit's evidence, the victims' propagated errors and the teardown."""

    def __init__(self, r: _Renderer, f: FaultPlan):
        self.r = r
        self.f = f
        self.rng = random.Random(r.rng.getrandbits(32))
        self.st = r.style
        self.fw = r.style.framework
        self.failed_agents: list[float] = []

    # -- timing -------------------------------------------------------------------------------
    def fault_time(self) -> float:
        r, f = self.r, self.f
        tl = r.tl
        if f.stage in ("initialization", "data_loading", "model_loading"):
            a, b = tl.windows.get(f.stage) or tl.windows["initialization"]
            if f.mode == "store":
                return a + 0.2
            return a + (b - a) * (0.2 + 0.75 * f.frac)
        if f.stage == "training":
            for it, a, b in tl.iters:
                if it == f.at_iter:
                    return a + (b - a) * f.frac
        if f.stage == "evaluation":
            a, b = tl.evals[f.at_iter]
            return a + 1.5 + (b - a - 5.0) * f.frac  # after the start lines, before the end lines
        if f.stage == "checkpointing":
            a, b = tl.saves[f.at_iter]
            return a + 1.5 + (b - a - 5.0) * f.frac
        a, b = tl.final
        return a + 4.0 + (b - a - 8.0) * f.frac

    def comm_fields(self, t: float) -> dict:
        r, f, rng = self.r, self.f, self.rng
        spi = 4
        base = 20
        if f.at_iter is not None:
            done = base + (f.at_iter - r.first_iter) * spi + rng.randint(0, spi - 1)
        else:
            done = rng.randint(3, 18)
        in_train = f.stage in ("training", "evaluation")
        opt = rng.choice(_OPTYPES[self.fw]) if in_train else "ALLREDUCE"
        numel = rng.randint(10**6, 6 * 10**8) if in_train else 1
        out = numel // r.world if opt == "_REDUCE_SCATTER_BASE" else (numel * r.world if opt == "_ALLGATHER_BASE" else numel)
        return {"seq": done + 1, "seq_done": done, "seq_enq": done + 1 + rng.randint(0, 3),
                "optype": opt, "numel": numel, "numel_out": out,
                "timeout_ms": self.st.timeout_s * 1000}

    # -- entry point -----------------------------------------------------------------------------
    def set_cut(self) -> None:
        """When normal output stops: before anything is rendered (the loop depends on it)."""
        r, f = self.r, self.f
        self.t_fault = self.fault_time()
        self.t_abort = self.t_fault
        if f.mode == "nan" and self.fw == "deepspeed":
            it = r.ds_abort_it if r.ds_abort_it is not None else r.last_iter
            for i, a, b in r.tl.iters:
                if i == it:
                    self.t_abort = a + (b - a) * 0.7
        elif f.mode == "slow":
            end_it = min(r.last_iter, (f.at_iter or r.first_iter) + f.variant["slow_iters"])
            for i, _a, b in r.tl.iters:
                if i == end_it:
                    self.t_abort = b + self.rng.uniform(1, 30)
        for i in range(r.n):
            r.cut[i] = self.t_abort

    def run(self) -> None:
        r, f = self.r, self.f
        t = self.t_fault
        c = f.culprits[0]
        cl = f.variant.setdefault("lrank", self.rng.randrange(r.rpn))
        crank = c * r.rpn + cl
        peer = (c + 1) % r.n
        self.common = {"culprit_host": r.plan.hosts[c], "culprit_ip": r.plan.ips[c],
                       "peer_rank": peer * r.rpn + self.rng.randrange(r.rpn), "peer_ip": r.plan.ips[peer],
                       "culprit_rank": crank, "culprit_dev": cl, "nccl_bad": "2.17.1",
                       "tp_ckpt": max(1, r.style.tp // 2) if r.style.tp > 1 else 2,
                       "vocab_ckpt": int(r.jf["vocab"]) // 2, "vocab_now": r.jf["vocab"],
                       "param_name": "embedding.word_embeddings.weight" if self.fw in ("megatron", "mindspeed") else "model.embed_tokens.weight",
                       "alloc": f"{self.rng.uniform(0.2, 8):.2f}", "free": f"{self.rng.uniform(5, 900):.2f}",
                       "xid_ecc": 0, "xid_ecc_text": "", "link": self.rng.randint(0, 17),
                       "root_port": f"0000:{self.rng.choice((0, 0x3a, 0x5c, 0x97)):02x}:0{self.rng.randint(1, 3)}.0",
                       "shm_id": f"{self.rng.getrandbits(64):016x}", "it": f.at_iter or r.last_iter,
                       "joined": r.n - 1, "stream": self.rng.randint(2, 60), "task": self.rng.randint(2, 90),
                       "hca": self.rng.randint(0, 7), "gid": self.rng.randint(0, 255), "rgid": self.rng.randint(0, 255)}
        xid = self.rng.choice(((48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 0."),
                               (94, "Contained ECC error"), (95, "Uncontained ECC error")))
        self.common["xid_ecc"], self.common["xid_ecc_text"] = xid
        self.common.update(self.comm_fields(t))
        getattr(self, f"mode_{f.mode}")(self.t_abort if f.mode in ("nan", "slow") else t)

    # -- helpers --------------------------------------------------------------------------------
    def ex(self, **kw) -> dict:
        d = dict(self.common)
        d.update(kw)
        return d

    def culprit_blocks(self, t: float, node: int, lranks: list[int] | None = None) -> float:
        """Emit the fault's own blocks on ``node``; return the time the last line was written."""
        f, r = self.f, self.r
        who = f.spec.who
        t_end = t
        if lranks is None:
            lranks = [f.variant["lrank"]] if who in ("one", "node") else list(range(r.rpn))
        for bid in f.blocks:
            b = D.BLOCKS[bid]
            node_level = b.lines[0][0] in "KSP" or who == "node"
            if node_level:
                t_end = max(t_end, r.block(node, lranks[0], t_end, bid, _ROLE_IND, self.ex()))
                t_end += self.rng.uniform(0.0, 0.3)
                continue
            tt = t_end
            for lr in lranks:
                tt2 = r.block(node, lr, tt + self.rng.uniform(0, 0.05), bid, _ROLE_IND, self.ex())
                t_end = max(t_end, tt2)
        return t_end

    def rank_dead(self, node: int, lranks: list[int], t: float, exitcode: int, indicator: bool = False) -> float:
        """Processes ``lranks`` of ``node`` died at ``t``: the launcher reports it."""
        r, st, rng = self.r, self.st, self.rng
        if t >= r.dead[node]:
            return t
        t_agent = t + rng.uniform(0.1, 5.0)
        signum, signame = _SIG.get(exitcode, ("", ""))
        if st.launcher == "torchrun":
            for lr in range(r.rpn):
                if lr not in lranks:
                    r.block(node, lr, t_agent, "sigterm_siblings", _ROLE_SYM)
                    t_agent += 0.001
            tb = (f"Signal {signum} ({signame}) received by PID {r.rf[node][lranks[0]]['pid']}" if exitcode < 0
                  else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
            extra = {"exitcode": exitcode, "child_tb": tb, "script": r.jf["script"].split("/")[-1]}
            if indicator:
                b = D.BLOCKS["child_failed"]
                lines = [(s, tmpl) for s, _k, tmpl in b.lines]
                r.emit_text(node, lranks[0], t_agent + 2.0, lines, extra, _ROLE_IND, "sigkill_exit",
                            [k for _s, k, _t in b.lines], normal=False)
            else:
                r.block(node, lranks[0], t_agent + 2.0, "child_failed", _ROLE_SYM, extra)
            self.failed_agents.append(t_agent + 2.0)
            r.dead[node] = t_agent + 2.5
        elif st.launcher == "deepspeed":
            for lr in range(r.rpn):
                r.block(node, lr, t_agent + lr * 0.002, "ds_sigkill_handler", _ROLE_SYM)
            if indicator:
                b = D.BLOCKS["ds_exit_code"]
                r.emit_text(node, lranks[0], t_agent + 0.05, [(s, tmpl) for s, _k, tmpl in b.lines],
                            {"exitcode": exitcode}, _ROLE_IND, "sigkill_exit", normal=False)
            else:
                r.block(node, lranks[0], t_agent + 0.05, "ds_exit_code", _ROLE_SYM, {"exitcode": exitcode})
            r.block(0, None, t_agent + 0.3, "pdsh_exit", _ROLE_SYM,
                    {"victim_host": r.plan.hosts[node], "exit_status": 1 if exitcode > 0 else 128 - exitcode})
            self.failed_agents.append(t_agent)
            r.dead[node] = t_agent + 0.5
        elif st.launcher == "srun":
            lo, hi = node * r.rpn + min(lranks), node * r.rpn + max(lranks)
            if exitcode < 0:
                text = {"SIGKILL": "Killed", "SIGSEGV": "Segmentation fault (core dumped)",
                        "SIGABRT": "Aborted (core dumped)", "SIGBUS": "Bus error (core dumped)",
                        "SIGTERM": "Terminated"}[signame]
                b = D.BLOCKS["srun_task_signal"]
                for lr in lranks:
                    r.emit_text(0, None, t_agent, [(s, tmpl) for s, _k, tmpl in b.lines],
                                {"victim_host": r.plan.hosts[node], "rank": node * r.rpn + lr, "signal_text": text},
                                _ROLE_IND if indicator else _ROLE_SYM, "sigkill_exit" if indicator else b.kind,
                                normal=False)
            else:
                r.block(0, None, t_agent, "srun_task_exit", _ROLE_SYM,
                        {"victim_host": r.plan.hosts[node], "task_lo": lo, "task_hi": hi, "exit_status": exitcode})
            self.failed_agents.append(t_agent)
            r.dead[node] = t_agent + 0.1 if node != 0 else r.dead[node]
            if node == 0:
                r.cut[0] = min(r.cut[0], t_agent)
        else:  # mpirun: the first failure aborts everything
            if not self.failed_agents:
                r.block(0, None, t_agent, "mpirun_abort", _ROLE_SYM,
                        {"mpi_job": 30000 + rng.randint(0, 9999), "first_rank": node * r.rpn + lranks[0],
                         "exit_status": exitcode if exitcode > 0 else 128 - exitcode})
                self.failed_agents.append(t_agent)
                for i in range(r.n):
                    r.dead[i] = min(r.dead[i], t_agent + 0.5)
            r.dead[node] = min(r.dead[node], t_agent + 0.2)
        return t_agent

    def kill_node(self, node: int, t: float, reason_block: str = "slurm_step_cancel",
                  role: str = _ROLE_SYM) -> None:
        """The platform terminates what still runs on ``node`` (SIGTERM teardown)."""
        r, st = self.r, self.st
        if t >= r.dead[node]:
            return
        if st.platform == "slurm":
            r.block(node, None, t, reason_block, role)
        t += 0.01
        if st.launcher == "torchrun":
            r.block(node, None, t, "agent_sigterm", _ROLE_SYM)
            for lr in range(r.rpn):
                r.block(node, lr, t + 0.001 * (lr + 1), "sigterm_siblings", _ROLE_SYM)
            r.block(node, None, t + 0.05, "agent_signal_exc", _ROLE_SYM)
        elif st.launcher == "deepspeed":
            for lr in range(r.rpn):
                r.block(node, lr, t + 0.001 * (lr + 1), "ds_sigkill_handler", _ROLE_SYM)
        r.dead[node] = t + 0.1

    def teardown_all(self, t: float, reason_block: str = "slurm_step_cancel", role: str = _ROLE_SYM,
                     skip: Iterable[int] = ()) -> None:
        r = self.r
        skip = set(skip)
        if self.st.launcher == "srun" and reason_block == "slurm_step_cancel":
            r.block(0, None, t - 0.01, "srun_abort", _ROLE_SYM)
        for i in range(r.n):
            if i not in skip:
                self.kill_node(i, t + self.rng.uniform(0.0, 0.4), reason_block, role)

    def victims(self) -> list[int]:
        cs = set(self.f.culprits)
        return [i for i in range(self.r.n) if i not in cs]

    def fast_errors(self, t_death: float, init: bool) -> float:
        """Peers directly connected to the dead culprit notice within seconds."""
        r, rng = self.r, self.rng
        vics = self.victims()
        if not vics or self.fw == "mindspeed":
            return t_death
        k = min(len(vics), rng.randint(1, 3))
        neigh = rng.sample(vics, k)
        latest = t_death
        for v in neigh:
            nr = rng.randint(1, r.rpn)
            lrs = sorted(rng.sample(range(r.rpn), nr))
            for lr in lrs:
                te = t_death + rng.uniform(0.02, 3.0)
                if init:
                    te = r.block(v, lr, te, "nccl_connect_abort", _ROLE_SYM, self.ex())
                else:
                    bid = rng.choice(("socket_reset", "ib_flush"))
                    te = r.block(v, lr, te, bid, _ROLE_SYM, self.ex())
                    te = r.block(v, lr, te + 0.001, "remote_error", _ROLE_SYM, self.ex())
                latest = max(latest, te)
            self.rank_dead(v, lrs, latest + 0.01, 1)
        if 0 in self.f.culprits and not init:
            for v in vics:
                for lr in rng.sample(range(r.rpn), rng.randint(1, r.rpn)):
                    r.block(v, lr, t_death + rng.uniform(0.3, 6.0), "tcpstore_reset", _ROLE_SYM, self.ex())
        return latest

    def timeouts(self, t_coll: float, nodes: Iterable[int], init: bool = False) -> float:
        """Every still-running rank of ``nodes`` hits the collective timeout."""
        r, rng, st = self.r, self.rng, self.st
        latest = t_coll
        timeout = st.timeout_s
        for v in nodes:
            if t_coll + timeout >= r.dead[v]:
                continue
            t_dead = t_coll
            for lr in range(r.rpn):
                if self.fw == "mindspeed":
                    bid = "hccl_ei0006" if init else "hccl_ei0002"
                    te = t_coll + (120 if init else 1800) + rng.uniform(0, 3)
                    ex = self.ex()
                else:
                    bid = "watchdog_timeout" if st.new_torch else "watchdog_timeout_old"
                    ran = timeout * 1000 + rng.randint(5, 900)
                    te = t_coll + timeout + rng.uniform(0, 2.5)
                    ex = self.ex(ran_ms=ran)
                te = r.block(v, lr, te, bid, _ROLE_SYM, ex)
                t_dead = max(t_dead, te)
            latest = max(latest, t_dead)
            if st.launcher != "mpirun" or not self.failed_agents:
                self.rank_dead(v, list(range(r.rpn)), t_dead + 0.01, -6 if self.fw != "mindspeed" else 1)
        return latest

    def finish(self, t_first_failure: float, init: bool, hang_like: bool, silent: Iterable[int] = ()) -> None:
        """Victims' fate after the culprit failed at ``t_first_failure``."""
        st, rng = self.st, self.rng
        silent = set(silent)
        if st.kill_on_bad_exit and st.launcher in ("torchrun", "srun") and self.failed_agents:
            t_kill = min(self.failed_agents) + rng.uniform(0.5, 3.0)
            self.teardown_all(t_kill, skip=silent)
            return
        t_last = self.timeouts(t_first_failure - (0 if init else rng.uniform(0.05, 2.0)), self.victims(), init)
        if st.kill_on_bad_exit and st.launcher in ("torchrun", "srun") and self.failed_agents:
            self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3.0), skip=silent)
            return
        if hang_like:
            for c in self.f.culprits:
                if c not in silent:
                    self.kill_node(c, t_last + rng.uniform(20, 300))

    # -- modes ----------------------------------------------------------------------------------
    def mode_crash(self, t: float) -> None:
        f, r, rng = self.f, self.r, self.rng
        init = f.stage == "initialization"
        c = f.culprits[0]
        spec = f.spec
        t_end = t
        if spec.id == "host_oom_kill":
            if f.variant.get("kernel_line"):
                r.block(c, None, t, "kernel_oom", _ROLE_IND, self.ex(pid=r.rf[c][f.variant["lrank"]]["pid"]))
            if self.st.launcher == "srun":
                r.block(c, None, t + rng.uniform(0.2, 2), "slurm_oom_event", _ROLE_IND)
        else:
            t_end = self.culprit_blocks(t, c)
        for cc in f.culprits[1:]:
            self.culprit_blocks(t, cc)
        who = spec.who
        lranks = [f.variant["lrank"]] if who in ("one", "node") else list(range(r.rpn))
        exitcode = spec.exitcode
        if spec.id == "k8s_eviction":
            self.kill_node(c, t_end + rng.uniform(0.5, 5))
            self.failed_agents.append(t_end + 5)
            t_death = t_end + 1
        elif spec.id == "ib_link_down":
            # the link is gone: peers get completion errors naming the culprit, then everyone hangs
            for v in rng.sample(self.victims(), min(len(self.victims()), rng.randint(1, 4))):
                for lr in rng.sample(range(r.rpn), rng.randint(1, r.rpn)):
                    r.block(v, lr, t_end + rng.uniform(0.5, 20), "ib_retry_exceeded", _ROLE_SYM, self.ex())
            t_last = self.timeouts(t - rng.uniform(0.05, 1.0), range(r.n))
            if self.st.kill_on_bad_exit and self.failed_agents:
                self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3))
            del t_last
            return
        else:
            t_death = t_end + rng.uniform(0.01, 0.5)
            self.rank_dead(c, lranks, t_death, exitcode, indicator=exitcode == -9)
        self.fast_errors(t_death, init)
        self.finish(t_death, init, hang_like=False)

    def mode_silent(self, t: float) -> None:
        f, r = self.f, self.r
        c = f.culprits[0]
        self.culprit_blocks(t, c)
        r.dead[c] = t + 0.5
        self.finish(t, init=False, hang_like=True, silent=[c])

    def mode_hang(self, t: float) -> None:
        f = self.f
        c = f.culprits[0]
        if f.blocks:
            tt = t
            for bid in f.blocks:
                tt = self.r.block(c, None, tt, bid, _ROLE_IND, self.ex()) + self.rng.uniform(0.5, 30)
        self.finish(t, init=False, hang_like=True)

    def mode_everywhere(self, t: float) -> None:
        f, r, rng = self.f, self.r, self.rng
        latest = t
        for c in f.culprits:
            tc = t + rng.uniform(0, 4)
            te = self.culprit_blocks(tc, c, list(range(r.rpn)))
            latest = max(latest, te)
            self.rank_dead(c, list(range(r.rpn)), te + rng.uniform(0.01, 0.5), f.spec.exitcode)
        if self.st.kill_on_bad_exit and self.failed_agents:
            self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3))

    def mode_scheduler(self, t: float) -> None:
        f, r = self.f, self.r
        step_block = f.blocks[0]
        if f.spec.id == "slurm_preemption":
            r.block(0, None, t - 0.01, "slurm_preempt_job", _ROLE_IND)
        else:
            r.block(0, None, t - 0.01, "slurm_cancel_job", _ROLE_IND)
        self.teardown_all(t, reason_block=step_block, role=_ROLE_IND)

    def mode_node_failure(self, t: float) -> None:
        r, rng = self.r, self.rng
        c = self.f.culprits[0]
        r.dead[c] = t  # the node is gone: not a single line more
        for v in rng.sample(self.victims(), min(len(self.victims()), rng.randint(1, 5))):
            for lr in rng.sample(range(r.rpn), rng.randint(1, r.rpn)):
                r.block(v, lr, t + rng.uniform(5, 60), "ib_retry_exceeded", _ROLE_SYM, self.ex())
        t_detect = t + rng.uniform(60, min(300, self.st.timeout_s - 30))
        r.block(0, None, t_detect, "slurm_node_failure", _ROLE_IND, self.ex())
        self.teardown_all(t_detect + rng.uniform(0.5, 3), reason_block="slurm_step_cancel_nodefail",
                          skip=[c])

    def mode_store(self, t: float) -> None:
        r, rng = self.r, self.rng
        c = self.f.culprits[0]
        t_to = t + 1800 + rng.uniform(0, 1)
        for lr in range(r.rpn):
            r.block(c, lr, t_to + rng.uniform(0, 0.3), "tcpstore_connect_timeout", _ROLE_IND, self.ex())
        self.rank_dead(c, list(range(r.rpn)), t_to + 0.5, 1)
        if c != 0:
            r.block(0, 0, t + 1801 + rng.uniform(0, 1), "store_wait_clients", _ROLE_SYM, self.ex())
            self.rank_dead(0, [0], t + 1802, 1)
            for v in self.victims():
                if v == 0:
                    continue
                for lr in rng.sample(range(r.rpn), rng.randint(1, r.rpn)):
                    r.block(v, lr, t + 1802 + rng.uniform(0.1, 3), "tcpstore_reset", _ROLE_SYM, self.ex())
        if self.st.kill_on_bad_exit and self.failed_agents:
            self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3))
        else:
            for v in self.victims():
                self.rank_dead(v, list(range(r.rpn)), t + 1803 + rng.uniform(0, 5), 1)

    def mode_nan(self, t: float) -> None:
        f, r, rng = self.f, self.r, self.rng
        if self.fw == "deepspeed":
            # the loop printed the overflow cascade; the step where the scale hits 1 aborts
            tt = self.t_abort
            r.block(0, 0, tt, "ds_overflow_min", _ROLE_IND)
            for c in f.culprits:
                for lr in range(r.rpn):
                    r.block(c, lr, tt + 0.05 + rng.uniform(0, 0.5), "ds_loss_scale_min", _ROLE_IND, self.ex())
                self.rank_dead(c, list(range(r.rpn)), tt + 1.0 + rng.uniform(0, 0.5), 1)
            return
        for c in f.culprits:
            for lr in range(r.rpn):
                r.block(c, lr, t + rng.uniform(0, 0.8), "megatron_nan", _ROLE_IND, self.ex())
            self.rank_dead(c, list(range(r.rpn)), t + 1.0 + rng.uniform(0, 0.5), 1)
        if self.st.kill_on_bad_exit and self.failed_agents:
            self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3))

    def mode_slow(self, t: float) -> None:
        f, r, rng = self.f, self.r, self.rng
        c = f.culprits[0]
        t_end = self.t_abort
        if f.variant["end"] == "time_limit":
            r.block(0, None, t_end, "slurm_time_limit", _ROLE_SYM)
            self.teardown_all(t_end + 0.2)
        else:
            # the straggler finally stops completing its collectives
            self.timeouts(t_end, self.victims())
            if self.st.kill_on_bad_exit and self.failed_agents:
                self.teardown_all(min(self.failed_agents) + rng.uniform(0.5, 3))
            else:
                self.kill_node(c, t_end + self.st.timeout_s + rng.uniform(30, 300))


# ======================================================================================
# Public API
# ======================================================================================


def _render_job(plan: JobPlan, job_dir: Path, workers: int = 1) -> dict[str, list[dict]]:
    r = _Renderer(plan)
    fr = None
    if plan.fault is not None:
        fr = _FaultRenderer(r, plan.fault)
        fr.set_cut()
    r.startup()
    r.noise()
    r.decoys()
    r.loop_phases()
    if fr is None or plan.fault.stage == "finalization":
        r.final()
    if fr is not None:
        fr.run()
    job_dir.mkdir(parents=True, exist_ok=True)
    tagged = r.write(job_dir, workers)
    meta = {"job_id": plan.job_id, "config_id": plan.config_id, "status": plan.status,
            "framework": plan.style.framework}
    (job_dir / "job.json").write_text(json.dumps(meta, indent=1) + "\n")
    return tagged


def simulate_case(out: Path, seed: int, *, framework: str | None = None, n_nodes: int | None = None,
                  ranks_per_node: int | None = None, iterations: int | None = None,
                  fault: str | None = None, n_baselines: int = 2, bytes_per_node: int | None = None,
                  gzip_some: bool | None = None, oddities: bool = False, vary: bool = True,
                  dialect: V.Dialect | None = None) -> dict:
    """Write ``out/failed``, ``out/baseline-<j>`` and ``out/truth.json``; return the truth.

    ``gzip_some`` forces (True) or forbids (False) gzip-compressed node files; ``None`` lets
    the seed decide.  ``oddities`` adds what log collectors do to files now and then (CRLF
    line ends, invalid UTF-8, a 250 KB line, carriage-return progress bars, two messages
    glued on one line, no final newline) to the failed job.  ``vary`` (default) gives every
    job a dialect of its own (:mod:`l4.sim.dialect`); ``vary=False`` writes each framework's
    one default dialect.  Raises :class:`ValueError` for unknown faults/frameworks or a fault that
    cannot happen with the requested framework.
    """
    out = Path(out)
    failed, baselines = plan_case(seed, framework=framework, n_nodes=n_nodes,
                                  ranks_per_node=ranks_per_node, iterations=iterations, fault=fault,
                                  n_baselines=n_baselines, bytes_per_node=bytes_per_node, vary=vary,
                                  dialect=dialect)
    if gzip_some is not None:
        for p in [failed, *baselines]:
            p.style.gz_frac = (0.5 if gzip_some else 0.0)
            if gzip_some and p.style.layout == "nested":
                p.style.layout = "flat"
    failed.oddities = oddities
    workers = _auto_workers() if bytes_per_node else 1
    tagged = _render_job(failed, out / "failed", workers)
    for j, b in enumerate(baselines):
        _render_job(b, out / f"baseline-{j}", workers)
    f = failed.fault
    assert f is not None
    truth = {
        "job_id": failed.job_id,
        "config_id": failed.config_id,
        "framework": failed.style.framework,
        "seed": seed,
        "n_nodes": len(failed.hosts),
        "fault": {"id": f.spec.id, "category": f.spec.category, "root_cause": f.spec.root_cause,
                  "source": f.spec.source},
        "faulty_nodes": [failed.hosts[c] for c in sorted(f.culprits)],
        "stage": f.stage,
        "iteration": f.iteration,
        "indicators": tagged[_ROLE_IND],
        "symptoms": tagged[_ROLE_SYM],
        "baselines": [f"baseline-{j}" for j in range(len(baselines))],
        "style": {"launcher": failed.style.launcher, "prefix": failed.style.prefix,
                  "platform": failed.style.platform, "ranks_per_node": failed.style.rpn,
                  "host_scheme": _scheme_of(failed), "iter_line": _iter_line(failed),
                  "dialect": failed.dialect.record(),
                  "baselines_same_dialect": [b.dialect is failed.dialect for b in baselines],
                  "baseline_dialects": [b.dialect.record() for b in baselines]},
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def _scheme_of(plan: JobPlan) -> str:
    d = plan.dialect
    if d.host_scheme != "native" and plan.style.platform != "k8s" and plan.style.framework != "mindspeed":
        return d.host_scheme
    return plan.style.host_scheme


def _auto_workers() -> int:
    """Both cores for big files, unless we already run inside a worker process."""
    import multiprocessing as mp

    if mp.current_process().daemon:
        return 1
    return max(1, os.cpu_count() or 1)


def _suite_one(args: tuple[str, int, dict]) -> dict:
    out, seed, kw = args
    return simulate_case(Path(out) / f"case-{seed}", seed, **kw)


def simulate_suite(out: Path, seeds: list[int], *, workers: int | None = None, **kw) -> list[dict]:
    """One case per seed under ``out/case-<seed>/``; frameworks/scales/faults vary with the seed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(out), s, kw) for s in seeds]
    workers = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    if workers <= 1 or len(jobs) <= 1:
        return [_suite_one(j) for j in jobs]
    import multiprocessing as mp

    with mp.get_context("fork").Pool(workers) as pool:
        return pool.map(_suite_one, jobs, chunksize=1)
