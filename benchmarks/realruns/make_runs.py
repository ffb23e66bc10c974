"""Real torchrun jobs with one injected fault each, plus healthy baselines, with ground truth.

Usage::

    python benchmarks/realruns/make_runs.py --set dev --out /work/realruns/dev          # all cases
    python benchmarks/realruns/make_runs.py --set dev --out DIR --case case-7           # one case
    python benchmarks/realruns/make_runs.py --list --set heldout                        # the plan

Why: l4's other figures come from its own simulator.  These jobs are real: one ``torchrun``
launcher per "node" (``--nnodes N --node-rank i``, gloo over 127.0.0.1, 2-4 ranks per
node), running :mod:`train.py` through all seven stages.  Each launcher's combined stdout
and stderr is written, byte for byte as printed, to ``JOB/logs/<host>.log``; this harness
writes nothing into the logs.  Faults are real mechanisms on one node: a file or module
removed from that node's working directory, ``/dev/full`` behind its checkpoint path, a
bad ``GLOO_SOCKET_IFNAME``, or ``L4RR_FAULT`` in that launcher's environment, which makes
the training script kill / stop / starve / poison itself at a given iteration.

A case is ``case-<seed>/{failed,baseline-0,baseline-1}/`` plus ``truth.json`` in the
format of :func:`l4.sim.simulate.simulate_case`.  Seeds 0.. are the development set, 9000..
the held-out set (other host names, other configurations).  Three consecutive seeds share
one configuration, whose two healthy runs (one of them with fewer nodes) are generated
once and copied into each of its cases.

Truth comes from the injection (node, stage, iteration in progress: the script is told
the iteration) and from the logs: :mod:`truth` finds the lines the culprit printed about
the fault (indicators) and what victims and launchers printed because of it (symptoms).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from runtime import KINDS as RUNTIMES  # noqa: E402
from runtime import RuntimeLog  # noqa: E402
from truth import extract_truth  # noqa: E402

SETS = {"dev": 0, "heldout": 9000}
PER_CONFIG = 3  # failed cases per configuration
WORK_ROOT = Path("/tmp/l4rr")  # nodes' "local disks"; paths show up in the logs as /tmp/l4rr/<job>/<host>

# fault kind -> (stage, needs an iteration, injected through L4RR_FAULT)
FAULTS: dict[str, tuple[str, bool, bool]] = {
    "sigkill": ("training", True, True),
    "sigsegv": ("training", True, True),
    "oom": ("training", True, True),
    "hang": ("training", True, True),
    "sigstop": ("training", True, True),
    "node_down": ("training", True, True),
    "dl_worker_kill": ("training", True, True),
    "nan": ("training", True, True),
    "straggler": ("training", True, True),
    "missing_module": ("initialization", False, False),
    "bad_ifname": ("initialization", False, False),
    "missing_shard": ("data_loading", False, False),
    "truncated_ckpt": ("model_loading", False, False),
    "ckpt_enospc": ("checkpointing", False, False),
    "missing_eval_file": ("evaluation", False, False),
    "final_save_fail": ("finalization", False, False),
    # added with seeds NEW_KINDS_FROM and up (earlier seeds keep the faults they were run with)
    "bad_sample": ("training", True, True),
    "weights_mismatch": ("model_loading", False, False),
    "port_in_use": ("initialization", False, False),
    "wrong_master": ("initialization", False, False),
}
# held-out cases see the kinds in another order, so the same seed offset is another fault
ORDER = {
    "dev": list(FAULTS)[:16],  # the kinds before NEW_KINDS, in the order they were written
    "heldout": ["missing_shard", "sigsegv", "final_save_fail", "hang", "ckpt_enospc", "oom",
                "truncated_ckpt", "node_down", "missing_eval_file", "nan", "missing_module",
                "sigkill", "straggler", "dl_worker_kill", "bad_ifname", "sigstop"],
}
NEW_KINDS = ["bad_sample", "weights_mismatch", "port_in_use", "wrong_master"]
#: from these seeds on, the plan cycles through the newer kinds too
NEW_KINDS_FROM = {"dev": 850, "heldout": 9320}
ORDER_NEW = {
    "dev": ["bad_sample", *ORDER["dev"][:5], "port_in_use", *ORDER["dev"][5:10], "weights_mismatch",
            *ORDER["dev"][10:], "wrong_master"],
    "heldout": ["weights_mismatch", *ORDER["heldout"][:6], "wrong_master", *ORDER["heldout"][6:11],
                "bad_sample", *ORDER["heldout"][11:], "port_in_use"],
}

HOST_SCHEMES = {
    "dev": [lambda r, i: f"gpu-a{17 + i}", lambda r, i: f"node{3 + i:03d}", lambda r, i: f"cn{210 + i}",
            lambda r, i: f"worker-{i}", lambda r, i: f"dgx{r}-{i:02d}", lambda r, i: f"trn-{r}-{i}",
            lambda r, i: f"ip-10-0-{r}-{20 + i}", lambda r, i: f"hpc{r}n{i}"],
    "heldout": [lambda r, i: f"sx{r}{i:02d}", lambda r, i: f"gn{500 + 3 * i}", lambda r, i: f"compute-{r}-{i}",
                lambda r, i: f"a100-node{i + 1}", lambda r, i: f"r{r}c{i}", lambda r, i: f"train-{r}-w{i}",
                lambda r, i: f"h100x{i:02d}", lambda r, i: f"nid{1000 + 7 * i:05d}"],
}


@dataclass
class Config:
    """Everything a site keeps fixed between runs of one job configuration."""

    config_id: str
    n_nodes: int
    rpn: int
    hosts: list[str]
    log_format: str
    iter_format: str
    who: str
    launcher_view: str  # "plain" | "tee" | "tee_logdir" | "filter0"
    rdzv: str  # "static" | "c10d"
    iters: int
    ckpt_every: int
    eval_every: int
    timeout: int
    workers: int
    faulthandler: bool
    record: bool
    step_sleep: float
    ifname: str = ""  # GLOO_SOCKET_IFNAME a site sets ("" = gloo resolves the host name)
    framework: str = "generic"
    words: str = "default"  # how the script words its phases (train.PHASE_WORDS)
    extra: dict = field(default_factory=dict)


#: configurations from this index on print progress bars (``train.BARS``) instead of lines;
#: earlier ones keep the draws they were generated with
PROGRESS_FROM = 16
#: configurations from this index on mix: a bar or a line format (DeepSpeed's throughput
#: line among them), and the script's own phase wording varies (train.PHASE_WORDS)
MIXED_FROM = 28


#: ``--override KEY=VALUE``: fields forced on every configuration (development only: to
#: re-run the plan's faults in one format combination); the configuration id gets an "o"
#: so the overridden runs keep baselines of their own
OVERRIDES: dict[str, str] = {}
#: how the launchers' output is stored (``runtime``): as printed, or as a container
#: runtime stores it (``--runtime``)
RUNTIME = {"kind": "none"}


def make_config(set_name: str, index: int) -> Config:
    cfg = _plan_config(set_name, index)
    if OVERRIDES:
        for key, value in OVERRIDES.items():
            kind = type(getattr(cfg, key))
            setattr(cfg, key, value.lower() in ("1", "true", "yes") if kind is bool else kind(value))
        cfg.config_id = f"rr-{set_name}-{index:02d}o-{cfg.n_nodes}x{cfg.rpn}"
    return cfg


def _plan_config(set_name: str, index: int) -> Config:
    cfg = _make_config(set_name, index)
    if PROGRESS_FROM <= index < MIXED_FROM:
        rng = random.Random(f"{set_name}-bar-{index}")
        cfg.iter_format = rng.choice(["tqdm", "tqdm_epoch"])
    elif index >= MIXED_FROM:
        rng = random.Random(f"{set_name}-mix-{index}")
        if rng.random() < 0.4:
            cfg.iter_format = rng.choice(["tqdm", "tqdm_epoch"])
        elif rng.random() < 0.3:
            cfg.iter_format = "ds_throughput"
        cfg.words = rng.choice(["default", "hf", "deepspeed", "quiet"])
    return cfg


def _make_config(set_name: str, index: int) -> Config:
    rng = random.Random(f"{set_name}-config-{index}")
    scheme = HOST_SCHEMES[set_name][index % len(HOST_SCHEMES[set_name])]
    n_nodes = rng.choice([3, 3, 4])
    rpn = rng.choice([2, 2, 3, 4]) if n_nodes == 3 else rng.choice([2, 2, 3])
    r = rng.randrange(1, 9)
    # a few spare host names: baselines run on other nodes of the same cluster
    hosts = [scheme(r, i) for i in range(n_nodes + 2)]
    iters = rng.choice([50, 60, 80])
    ckpt = rng.choice([15, 20])
    ev = rng.choice([20, 25, 30])
    if ev % ckpt == 0:
        ev += 5
    return Config(
        config_id=f"rr-{set_name}-{index:02d}-{n_nodes}x{rpn}",
        n_nodes=n_nodes, rpn=rpn, hosts=hosts,
        log_format=rng.choice(["plain", "asctime_level", "asctime", "bracket", "level_only"]),
        iter_format=rng.choice(["iter_slash", "step_pipe", "epoch_batch", "megatron", "kv"]),
        who=rng.choice(["local0", "local0", "all"]),
        launcher_view=rng.choice(["plain", "tee", "tee_logdir", "filter0"]),
        rdzv=rng.choice(["static", "static", "c10d"]),
        iters=iters, ckpt_every=ckpt, eval_every=ev,
        timeout=rng.choice([20, 25, 30]),
        workers=rng.choice([1, 1, 2]),
        faulthandler=rng.random() < 0.5,
        record=rng.random() < 0.5,
        step_sleep=rng.choice([0.03, 0.05, 0.08]),
        ifname=rng.choice(["", "lo"]),
    )


@dataclass
class Injection:
    kind: str
    node: int  # index into the job's hosts
    local_rank: int
    at_iter: int | None  # iteration in progress when it strikes (training faults)


def plan_case(set_name: str, seed: int) -> tuple[Config, Injection]:
    base = SETS[set_name]
    index = (seed - base) // PER_CONFIG
    cfg = make_config(set_name, index)
    if seed >= NEW_KINDS_FROM[set_name]:
        order = ORDER_NEW[set_name]
        kind = order[(seed - NEW_KINDS_FROM[set_name]) % len(order)]
    else:
        order = ORDER[set_name]
        kind = order[(seed - base) % len(order)]
    rng = random.Random(f"{set_name}-case-{seed}")
    node = rng.randrange(cfg.n_nodes)
    lr = rng.randrange(cfg.rpn)
    if kind == "port_in_use" and cfg.rdzv != "static":
        kind = "wrong_master"  # with c10d every agent may host the store: no one culprit
    if kind == "port_in_use":
        node = 0  # a stale process holds the master port on the node that hosts the store
    elif kind == "wrong_master":
        node = 1 + rng.randrange(cfg.n_nodes - 1)  # node 0 hosts the store whatever it is told
    stage, has_iter, _ = FAULTS[kind]
    at = None
    if has_iter:
        lo, hi = 5, cfg.iters - 5
        if kind == "straggler":
            hi = min(hi, 25)
        at = rng.randint(lo, hi)
        # a fault right after a save/eval would be ambiguous to a reader only by a line; keep it
    return cfg, Injection(kind=kind, node=node, local_rank=lr, at_iter=at)


# ---------------------------------------------------------------------------------------
# one job
# ---------------------------------------------------------------------------------------


# per-node host names need UTS and mount namespaces (root and util-linux ``unshare``);
# without them static jobs still run, but torchrun reports this machine's name as host
_CAN_UNSHARE = os.geteuid() == 0 and shutil.which("unshare") is not None


def _typo(host: str) -> str:
    """``host`` with two characters swapped (or one appended): a name no DNS resolves."""
    for j in range(len(host) - 1, 0, -1):
        if host[j] != host[j - 1]:
            return host[: j - 1] + host[j] + host[j - 1] + host[j + 1:]
    return host + "x"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare_node(node_dir: Path, cfg: Config, world: int, ranks: range, seed: int) -> None:
    """The node's local disk: code copy, its ranks' data shards, validation set, weights."""
    import torch

    code = node_dir / "code"
    code.mkdir(parents=True, exist_ok=True)
    for name in ("train.py", "rrhelpers.py"):
        shutil.copy(HERE / name, code / name)
    data = node_dir / "data"
    data.mkdir(exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(32, generator=g)
    for r in ranks:
        x = torch.randn(256, 32, generator=g)
        torch.save({"x": x, "y": x @ w + 0.1 * torch.randn(256, generator=g)}, data / f"shard-{r:05d}.pt")
    xv = torch.randn(128, 32, generator=g)
    torch.save({"x": xv, "y": xv @ w}, data / "val.pt")
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    torch.save({"model": model.state_dict(), "step": 0}, node_dir / "init.pt")
    (node_dir / "ckpt").mkdir(exist_ok=True)
    (node_dir / "export").mkdir(exist_ok=True)


def _apply_file_fault(node_dir: Path, cfg: Config, inj: Injection, ranks: range) -> None:
    k = inj.kind
    if k == "missing_module":
        (node_dir / "code" / "rrhelpers.py").unlink()
    elif k == "missing_shard":
        if cfg.rdzv == "c10d":
            # ranks are assigned at rendezvous: the node's whole shard set is missing
            for r in ranks:
                (node_dir / "data" / f"shard-{r:05d}.pt").unlink()
        else:
            (node_dir / "data" / f"shard-{ranks[inj.local_rank]:05d}.pt").unlink()
    elif k == "truncated_ckpt":
        p = node_dir / "init.pt"
        blob = p.read_bytes()
        p.write_bytes(blob[: len(blob) // 2])
    elif k == "ckpt_enospc":
        first = cfg.ckpt_every
        os.symlink("/dev/full", node_dir / "ckpt" / f"step_{first:06d}.pt")
    elif k == "missing_eval_file":
        (node_dir / "data" / "val.pt").unlink()
    elif k == "final_save_fail":
        shutil.rmtree(node_dir / "export")
    elif k == "weights_mismatch":
        # a stale copy of the weights, saved from a narrower model, on this node's disk
        import torch

        torch.manual_seed(seed_of(node_dir))
        other = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 1))
        torch.save({"model": other.state_dict(), "step": 0}, node_dir / "init.pt")


def seed_of(node_dir: Path) -> int:
    """A stable seed from a node's directory name (for files a fault writes)."""
    return sum(node_dir.name.encode())


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    pp = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(pp, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def run_job(job_dir: Path, cfg: Config, hosts: list[str], *, job_id: str, seed: int,
            inj: Injection | None, time_limit: float) -> dict:
    """Run one job (one launcher per host) and return what happened (exit codes, seconds)."""
    if job_dir.exists():
        shutil.rmtree(job_dir)
    logs = job_dir / "logs"
    logs.mkdir(parents=True)
    work = WORK_ROOT / job_id
    if work.exists():
        shutil.rmtree(work)
    n = len(hosts)
    world = n * cfg.rpn
    port = _free_port()
    holder = None
    if inj is not None and inj.kind == "port_in_use":
        # a stale process (a previous job's store) still listens on the master port
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen(64)
    procs, files, wrapped = [], [], []
    for i, host in enumerate(hosts):
        node_dir = work / host
        ranks = range(i * cfg.rpn, (i + 1) * cfg.rpn)
        if cfg.rdzv == "c10d":
            ranks = range(world)  # ranks are assigned at rendezvous: every node holds every shard
        _prepare_node(node_dir, cfg, world, ranks, seed)
        env = {k: v for k, v in os.environ.items() if not k.startswith("L4RR_")}
        env.update(OMP_NUM_THREADS="1", L4RR_HOST=host, PYTHONUNBUFFERED="1", HOSTNAME=host)
        env.pop("PYTHONPATH", None)
        if cfg.ifname:
            env["GLOO_SOCKET_IFNAME"] = cfg.ifname
        if inj is not None and i == inj.node:
            if FAULTS[inj.kind][2]:
                env.update(L4RR_FAULT=inj.kind, L4RR_FAULT_AT=str(inj.at_iter),
                           L4RR_FAULT_LOCAL_RANK=str(inj.local_rank))
            elif inj.kind == "bad_ifname":
                env["GLOO_SOCKET_IFNAME"] = "ib0"
            else:
                _apply_file_fault(node_dir, cfg, inj, ranks)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(n),
               "--nproc-per-node", str(cfg.rpn), "--max-restarts", "0", "--monitor-interval", "1"]
        # a node told the wrong master: a host name one typo away from the real ones
        master = "127.0.0.1"
        if inj is not None and i == inj.node and inj.kind == "wrong_master":
            master = _typo(hosts[0])
        if cfg.rdzv == "static":
            cmd += ["--node-rank", str(i), "--master-addr", master, "--master-port", str(port)]
        else:
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{master}:{port}",
                    "--rdzv-id", job_id, "--rdzv-conf", "join_timeout=60"]
        if cfg.launcher_view in ("tee", "tee_logdir"):
            cmd += ["--tee", "3"]
        if cfg.launcher_view == "tee_logdir":
            cmd += ["--log-dir", str(node_dir / "torchelastic")]
        if cfg.launcher_view == "filter0":
            cmd += ["--tee", "3", "--local-ranks-filter", "0"]
        cmd += [str(node_dir / "code" / "train.py"), "--node-dir", str(node_dir),
                "--iters", str(cfg.iters), "--ckpt-every", str(cfg.ckpt_every),
                "--eval-every", str(cfg.eval_every), "--timeout", str(cfg.timeout),
                "--workers", str(cfg.workers), "--log-format", cfg.log_format,
                "--iter-format", cfg.iter_format, "--who", cfg.who,
                "--step-sleep", str(cfg.step_sleep)]
        if cfg.words != "default":
            cmd += ["--phase-words", cfg.words]
        if cfg.faulthandler:
            cmd.append("--faulthandler")
        if cfg.record:
            cmd.append("--record")
        # --runtime split: stdout and stderr in two files, as Slurm's --output/--error
        fh = open(logs / f"{host}.{'out' if RUNTIME['kind'] == 'split' else 'log'}", "wb")
        files.append(fh)
        # each node gets its own host name (a UTS namespace), so torchrun's error summary and
        # gloo see "gpu-a17", not this machine's name; the shell prints nothing
        # (and a private /etc/hosts in a mount namespace, so that its name resolves to
        # 127.0.0.1 as a cluster's DNS would resolve it; the machine's own file is untouched)
        hosts_file = node_dir / "etc-hosts"
        hosts_file.write_text(f"127.0.0.1 {host}\n127.0.0.1 localhost\n"
                              + "".join(f"127.0.0.1 {h}\n" for h in hosts if h != host))
        env["L4RR_HOSTS_FILE"] = str(hosts_file)
        if _CAN_UNSHARE:
            cmd = ["unshare", "--uts", "--mount", "sh", "-c",
                   'mount --bind "$L4RR_HOSTS_FILE" /etc/hosts && hostname "$L4RR_HOST" && exec "$@"', "sh", *cmd]
        elif cfg.rdzv == "c10d":
            raise RuntimeError("c10d jobs need per-node host names: run as root with util-linux unshare")
        if RUNTIME["kind"] in ("none", "split"):
            err = subprocess.STDOUT
            if RUNTIME["kind"] == "split":
                err = open(logs / f"{host}.err", "wb")
                files.append(err)
            procs.append(subprocess.Popen(cmd, stdout=fh, stderr=err, env=env,
                                          cwd=str(node_dir), start_new_session=True))
        else:
            # two pipes, as a container runtime reads a container's streams
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                 cwd=str(node_dir), start_new_session=True)
            log = RuntimeLog(fh, RUNTIME["kind"])
            log.attach(p.stdout, "stdout")
            log.attach(p.stderr, "stderr")
            procs.append(p)
            wrapped.append(log)
    t0 = time.monotonic()
    terminated = False
    while any(p.poll() is None for p in procs):
        el = time.monotonic() - t0
        if el > time_limit and not terminated:
            # what a scheduler's time limit does: SIGTERM to the launchers, then SIGKILL
            terminated = True
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        if el > time_limit + 20:
            for p in procs:
                if p.poll() is None:
                    for d in _descendants(p.pid) + [p.pid]:
                        try:
                            os.kill(d, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            break
        time.sleep(0.2)
    # a stopped or orphaned worker must not outlive its job
    for p in procs:
        for d in _descendants(p.pid):
            try:
                os.kill(d, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for log in wrapped:
        log.join()
    for fh in files:
        fh.close()
    if holder is not None:
        holder.close()
    seconds = time.monotonic() - t0
    codes = {h: p.returncode for h, p in zip(hosts, procs, strict=True)}
    status = "succeeded" if all(c == 0 for c in codes.values()) else "failed"
    (job_dir / "job.json").write_text(json.dumps(
        {"job_id": job_id, "config_id": cfg.config_id, "status": status, "framework": cfg.framework},
        indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return {"status": status, "exit_codes": codes, "seconds": round(seconds, 1), "terminated": terminated}


# ---------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------


def _baselines(out: Path, set_name: str, index: int, cfg: Config) -> list[Path]:
    """The configuration's two healthy runs (made once, reused by its cases)."""
    root = out / "_baselines" / (cfg.config_id + ("" if RUNTIME["kind"] == "none" else f"-{RUNTIME['kind']}"))
    dirs = []
    for j in range(2):
        d = root / f"baseline-{j}"
        dirs.append(d)
        if (d / "job.json").exists() and json.loads((d / "job.json").read_text())["status"] == "succeeded":
            continue
        # baseline-1 runs on fewer nodes, on other hosts of the same cluster
        hosts = cfg.hosts[: cfg.n_nodes] if j == 0 else cfg.hosts[2: 2 + max(2, cfg.n_nodes - 1)]
        for _attempt in range(2):
            res = run_job(d, cfg, hosts, job_id=f"{cfg.config_id}-ok{j}", seed=1000 + 10 * index + j,
                          inj=None, time_limit=120)
            print(f"  baseline {cfg.config_id}/baseline-{j}: {res}", flush=True)
            if res["status"] == "succeeded":
                break
        else:
            raise RuntimeError(f"healthy run {d} failed twice: {res}")
    return dirs


def make_case(out: Path, set_name: str, seed: int) -> dict:
    cfg, inj = plan_case(set_name, seed)
    index = (seed - SETS[set_name]) // PER_CONFIG
    bases = _baselines(out, set_name, index, cfg)
    case = out / f"case-{seed}"
    case.mkdir(parents=True, exist_ok=True)
    hosts = cfg.hosts[: cfg.n_nodes]
    # a straggler runs until the time limit; a node that cannot reach the master (or the
    # peers of a store host that never started) wait until the scheduler gives up
    limit = {"straggler": 45.0, "port_in_use": 60.0, "wrong_master": 75.0}.get(inj.kind, 150.0)
    job_id = f"{cfg.config_id}-f{seed}"
    res = run_job(case / "failed", cfg, hosts, job_id=job_id, seed=seed, inj=inj, time_limit=limit)
    for j, b in enumerate(bases):
        dst = case / f"baseline-{j}"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(b, dst)
    stage, has_iter, _ = FAULTS[inj.kind]
    truth = extract_truth(case / "failed", kind=inj.kind, culprit=hosts[inj.node],
                          hosts=hosts, at_iter=inj.at_iter, local_rank=inj.local_rank)
    truth.update({
        "job_id": job_id, "config_id": cfg.config_id, "framework": cfg.framework, "seed": seed,
        "n_nodes": len(hosts),
        "fault": {"id": inj.kind, "category": _category(inj.kind), "root_cause": _ROOT[inj.kind],
                  "source": "real torchrun run (benchmarks/realruns)"},
        "faulty_nodes": [hosts[inj.node]],
        "stage": stage,
        "iteration": inj.at_iter if has_iter else None,
        "baselines": ["baseline-0", "baseline-1"],
        "style": {"launcher": "torchrun", "prefix": cfg.launcher_view, "rdzv": cfg.rdzv,
                  "ranks_per_node": cfg.rpn, "log_format": cfg.log_format,
                  "iter_format": cfg.iter_format, "who": cfg.who, "words": cfg.words,
                  "runtime": RUNTIME["kind"]},
        "injection": asdict(inj),
        "run": res,
    })
    order = ["job_id", "config_id", "framework", "seed", "n_nodes", "fault", "faulty_nodes", "stage",
             "iteration", "indicators", "symptoms", "baselines", "style", "injection", "run"]
    truth = {k: truth[k] for k in order}
    (case / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def _category(kind: str) -> str:
    if kind in ("node_down", "sigsegv", "straggler"):
        return "hardware"
    if kind in ("missing_module", "missing_shard", "missing_eval_file", "nan", "truncated_ckpt",
                "bad_sample", "weights_mismatch", "wrong_master", "port_in_use"):
        return "user"
    if kind in ("ckpt_enospc", "final_save_fail", "bad_ifname", "oom", "dl_worker_kill"):
        return "platform"
    return "framework"


_ROOT = {
    "sigkill": "a training rank was killed (SIGKILL)",
    "sigsegv": "a training rank crashed with a segmentation fault",
    "oom": "host memory allocation refused (out of memory)",
    "hang": "a rank hung inside the training step; peers hit the collective timeout",
    "sigstop": "a rank was stopped (SIGSTOP); peers hit the collective timeout",
    "node_down": "the whole node went down (power loss): launcher and workers gone at once",
    "dl_worker_kill": "a DataLoader worker process was killed",
    "nan": "one rank's data produced a NaN loss",
    "straggler": "a slow node stretched every step until the job hit its time limit",
    "missing_module": "a Python module is missing on one node",
    "bad_ifname": "GLOO_SOCKET_IFNAME names a network interface the node does not have",
    "missing_shard": "a dataset shard is missing on one node",
    "truncated_ckpt": "a truncated checkpoint/weights file at load",
    "ckpt_enospc": "checkpoint write failed: no space left on device",
    "missing_eval_file": "the evaluation data file is missing on one node",
    "final_save_fail": "the final model save failed: export directory missing",
    "bad_sample": "a bad sample (an id outside its lookup table) in one rank's data",
    "weights_mismatch": "a stale weights file of another model shape on one node",
    "port_in_use": "a stale process still holds the master port on the store's node",
    "wrong_master": "one node was launched with a wrong master address (a host name typo)",
}


ITER_RX = {
    "iter_slash": re.compile(r"iter (\d+)/\d+ loss="),
    "step_pipe": re.compile(r"step: (\d+) \| loss"),
    "epoch_batch": re.compile(r"\[Batch (\d+)\] loss"),
    "megatron": re.compile(r"iteration\s+(\d+)/\s*\d+ \|"),
    "kv": re.compile(r"global_step=(\d+) train_loss"),
    "ds_throughput": re.compile(r"micro_step=\d+/global_step=(\d+),"),
    "tqdm": re.compile(r"\| *(\d+)/\d+ \["),
    "tqdm_epoch": re.compile(r"Epoch (\d+): [^\r\n]*?\| *(\d+)/(\d+) \["),
}


def _bar_steps(rx: re.Pattern[str], text: str) -> list[int]:
    """Steps a progress bar shows: its count, or epoch x batches per epoch + count."""
    out = []
    for m in rx.finditer(text):
        g = m.groups()
        out.append(int(g[0]) if len(g) == 1 else int(g[0]) * int(g[2]) + int(g[1]))
    return out


def check_case(case: Path) -> list[str]:
    """What is wrong with a generated case (empty when it is sound).

    A case is sound when the job failed, the fault left the lines it must leave (an
    indicator for every fault that prints one), and a training fault struck where it was
    told: the culprit's last iteration line is the one before (a straggler's is later; a
    node that loses power may also lose its last line or two)."""
    truth = json.loads((case / "truth.json").read_text())
    problems = []
    if truth["run"]["status"] != "failed":
        problems.append("job did not fail")
    kind = truth["fault"]["id"]
    if kind not in ("hang", "sigstop", "node_down", "straggler") and not truth["indicators"]:
        problems.append("no indicator line found")
    at = truth["injection"]["at_iter"]
    if at is not None and truth["style"]["who"] != "global0":
        rx = ITER_RX[truth["style"]["iter_format"]]
        text = "".join(p.read_text(errors="replace") for p in sorted((case / "failed" / "logs").glob(
            f"{truth['faulty_nodes'][0]}.*")))
        its = _bar_steps(rx, text)
        last = max(its, default=0)
        if kind == "straggler":
            if last < at:
                problems.append(f"straggler: last iteration {last} < {at}")
        elif kind == "node_down" and last < at - 1 and at - 1 - last <= 2:
            pass  # a power loss also loses what the launcher had not yet copied from --tee files
        elif last != at - 1:
            problems.append(f"last iteration on the culprit is {last}, expected {at - 1}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="dev")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cases", type=int, default=24, help="number of cases (default 24)")
    ap.add_argument("--case", action="append", default=[],
                    help="(re)generate only this case (case-<seed> or a seed); repeatable")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--check", action="store_true", help="check the generated cases under --out and exit")
    ap.add_argument("--retruth", action="store_true",
                    help="re-derive indicators and symptoms of existing cases from their logs (no runs)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="force a configuration field (launcher_view, rdzv, log_format, iter_format, "
                         "words, rpn, ...) on every case; development runs only")
    ap.add_argument("--runtime", choices=RUNTIMES, default="none",
                    help="store each launcher's output as a container runtime does (CRI or "
                         "Docker json-file: every line wrapped with its write time), or "
                         "'split': stdout and stderr in <host>.out and <host>.err")
    args = ap.parse_args(argv)
    RUNTIME["kind"] = args.runtime
    base = SETS[args.set]
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or key not in Config.__dataclass_fields__ or key in ("hosts", "extra", "config_id"):
            ap.error(f"--override: expected FIELD=VALUE with a scalar Config field, got {item!r}")
        OVERRIDES[key] = value
    if OVERRIDES and args.set != "dev":
        ap.error("--override is for development runs only")
    try:
        seeds = [int(c.removeprefix("case-")) for c in args.case] or list(range(base, base + args.cases))
    except ValueError:
        ap.error(f"--case: expected case-<seed> or a seed, got {args.case!r}")
    if args.list:
        for s in seeds:
            cfg, inj = plan_case(args.set, s)
            print(f"case-{s}: {inj.kind} node={cfg.hosts[inj.node]} lr={inj.local_rank} it={inj.at_iter} "
                  f"| {cfg.config_id} {cfg.launcher_view} {cfg.rdzv} {cfg.log_format}/{cfg.iter_format}/{cfg.words} "
                  f"who={cfg.who}")
        return 0
    if args.out is None:
        ap.error("--out is required")
    if args.retruth:
        for s in seeds:
            tp = args.out / f"case-{s}" / "truth.json"
            if tp.exists():
                t = json.loads(tp.read_text())
                inj = t["injection"]
                hosts = sorted({p.stem for p in (tp.parent / "failed" / "logs").iterdir()})
                t.update(extract_truth(tp.parent / "failed", kind=inj["kind"], culprit=t["faulty_nodes"][0],
                                       hosts=hosts, at_iter=inj["at_iter"], local_rank=inj["local_rank"]))
                tp.write_text(json.dumps(t, indent=1) + "\n")
                print(f"case-{s}: indicators={len(t['indicators'])} symptoms={len(t['symptoms'])}")
        return 0
    if args.check:
        bad = 0
        for s in seeds:
            case = args.out / f"case-{s}"
            if not (case / "truth.json").exists():
                print(f"case-{s}: missing")
                bad += 1
                continue
            problems = check_case(case)
            bad += bool(problems)
            print(f"case-{s}: " + ("; ".join(problems) if problems else "ok"))
        return 1 if bad else 0
    for s in seeds:
        if not base <= s < base + 1000:
            ap.error(f"seed {s} is not in the {args.set} set")
    args.out.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        t0 = time.monotonic()
        truth = make_case(args.out, args.set, s)
        print(f"case-{s}: {truth['fault']['id']} on {truth['faulty_nodes'][0]} stage={truth['stage']} "
              f"it={truth['iteration']} indicators={len(truth['indicators'])} symptoms={len(truth['symptoms'])} "
              f"run={truth['run']} ({time.monotonic() - t0:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
