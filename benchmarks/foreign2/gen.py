#!/usr/bin/env python3
"""foreign2: a second, independent clean-room generator of synthetic logs of failed
multi-node LLM training jobs (stdlib only).

    python3 benchmarks/foreign2/gen.py --out DIR --seeds A..B
    python3 benchmarks/foreign2/gen.py --check DIR
    python3 benchmarks/foreign2/gen.py --list

Each seed gives one case ``DIR/case-<seed>/`` with ``truth.json``, ``failed/`` and one
or two healthy ``baseline-<k>/`` runs of the same configuration.  Everything is
deterministic per seed (``random.Random(f"foreign2-{seed}")``).  See README.md.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from f2_base import IND, NodeLog, TorchFlavour  # noqa: E402
from f2_faults import CATALOGUE  # noqa: E402
from f2_styles import STYLES  # noqa: E402

STAGES = ("initialization", "model_loading", "data_loading", "training", "evaluation", "checkpointing", "finalization")
STYLE_WEIGHT = {"lightning": 3.0, "fabric": 1.5, "nemo": 2.2, "composer": 2.0, "colossalai": 1.6, "verl": 1.4,
                "jsonl": 1.8, "syslog": 1.6}
SRUN_STYLES = ("lightning", "fabric", "nemo")
RESERVED = 9000
WARN_IMPORT = [
    "%(lib)s/torch/_utils.py:831: UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
    "%(lib)s/transformers/utils/hub.py:128: FutureWarning: Using `TRANSFORMERS_CACHE` is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead.",
    "%(lib)s/torch/cuda/amp/grad_scaler.py:126: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.",
]


# =============================================================================== configuration
class Cfg:
    """One training configuration (shared by the failed run and its baselines)."""

    def loss_at(self, k):
        return self.loss_inf + (self.loss0 - self.loss_inf) * math.exp(-k / self.loss_tau)

    def best_val(self, k):
        return self.loss_at(k) + 0.05

    @property
    def world(self):
        return self.n_nodes * self.gpn


def _hex(rng, n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _alnum(rng, n):
    return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


HOST_STYLES = ["node", "gpu_rack", "hgx", "aws", "nid", "pcluster", "dgx", "cn", "k8s"]


def make_hosts(rng, style, n, host_style, cluster):
    """Host names + IPs of n nodes from one cluster (the same naming for baselines)."""
    hs = host_style
    base = rng.randint(1, 300)
    if hs == "node":
        names = ["node%03d" % (base + i) for i in range(n)]
    elif hs == "gpu_rack":
        names = ["gpu-%s-r%dn%02d" % (cluster["gpu_tag"], (base + i) // 16 + 1, (base + i) % 16 + 1) for i in range(n)]
    elif hs == "hgx":
        names = ["hgx-%s-%03d" % (cluster["gpu_tag"], base + i) for i in range(n)]
    elif hs == "aws":
        names = ["ip-10-%d-%d-%d" % (cluster["o2"], (base + 3 * i) // 250, (base + 3 * i) % 250 + 2) for i in range(n)]
    elif hs == "nid":
        names = ["nid%06d" % (cluster["nid0"] + base + i) for i in range(n)]
    elif hs == "pcluster":
        names = ["%s-st-p%sxlarge-%d" % (cluster["gpu_tag"], cluster["p5"], base + i) for i in range(n)]
    elif hs == "dgx":
        names = ["dgx%04d" % (base * 3 + i) for i in range(n)]
    elif hs == "cn":
        names = ["cn-d%03d" % (base + i) for i in range(n)]
    else:
        names = ["%s-%s-%d" % (cluster["jobname"], "master" if i == 0 else "worker", 0 if i == 0 else i - 1) for i in range(n)]
    if hs == "aws":
        ips = [nm[3:].replace("-", ".") for nm in names]
    elif hs == "k8s":
        ips = ["10.244.%d.%d" % (rng.randint(0, 60), rng.randint(2, 250)) for _ in range(n)]
    else:
        o2, o3 = cluster["o2"], cluster["o3"]
        ips = ["%s.%d.%d.%d" % (cluster["o1"], o2, o3 + (base + i) // 250, (base + i) % 250 + 2) for i in range(n)]
    return names, ips


def nodelist(names):
    import re
    m = [re.match(r"^(.*?)(\d+)$", x) for x in names]
    if all(m) and len({x.group(1) for x in m}) == 1:
        width = len(m[0].group(2))
        nums = [int(x.group(2)) for x in m]
        if nums == list(range(nums[0], nums[0] + len(nums))) and all(len(x.group(2)) == width for x in m):
            if len(nums) == 1:
                return names[0]
            return "%s[%0*d-%0*d]" % (m[0].group(1), width, nums[0], width, nums[-1])
    return ",".join(names)


def make_cfg(rng: random.Random, seed: int, kind) -> Cfg:
    c = Cfg()
    styles = [s for s in STYLES if kind.styles is None or s in kind.styles]
    w = [STYLE_WEIGHT[s] for s in styles]
    c.style = rng.choices(styles, w)[0]
    st = c.style
    # --- scale
    r = rng.random()
    if st == "verl":
        c.n_nodes = rng.choice([2, 2, 3, 4, 4, 6, 8, 16])
    elif r < 0.42:
        c.n_nodes = rng.randint(3, 8)
    elif r < 0.72:
        c.n_nodes = rng.randint(9, 16)
    elif r < 0.93:
        c.n_nodes = rng.randint(17, 32)
    else:
        c.n_nodes = rng.choice([64, 96, 128])
    if kind.id in ("plat_rendezvous_missing_node",) and c.n_nodes < 2:
        c.n_nodes = 2
    c.big = c.n_nodes >= 64
    c.gpn = 8 if st == "verl" else rng.choice(([8, 8, 8, 8, 4, 4, 2, 1] if st not in ("nemo",) else [8, 8, 4]) if not c.big else [8])
    # --- software
    tv = {"lightning": [(2, 3), (2, 4), (2, 5)], "fabric": [(2, 4), (2, 5), (2, 7)], "nemo": [(2, 4), (2, 5), (2, 7)],
          "composer": [(2, 3), (2, 4), (2, 5)], "colossalai": [(2, 1), (2, 3), (2, 4)], "verl": [(2, 5), (2, 7)],
          "jsonl": [(2, 4), (2, 5), (2, 7)], "syslog": [(2, 1), (2, 3), (2, 4), (2, 5)]}[st]
    c.torch = rng.choice(tv)
    c.nccl_ver = {(2, 1): "2.18.1", (2, 3): "2.20.5", (2, 4): "2.20.5", (2, 5): "2.21.5", (2, 7): "2.26.2"}[c.torch]
    c.cuda_ver = {(2, 1): "12.1", (2, 3): "12.1", (2, 4): "12.4", (2, 5): "12.4", (2, 7): "12.6"}[c.torch]
    c.cuda_driver = {"12.1": 12020, "12.4": 12040, "12.6": 12060}[c.cuda_ver] + rng.choice([0, 20, 40])
    py = rng.choice(["3.10", "3.10", "3.11", "3.12"]) if st != "nemo" else rng.choice(["3.10", "3.12"])
    c.py311 = py in ("3.11", "3.12")
    user = rng.choice(["ubuntu", "mlops", "jdoe", "svc-train", "a.chen", "rkumar"])
    envname = rng.choice(["llm", "pt", "train", "torch24", "nlp"])
    c.libdir = rng.choice(["/usr/local/lib/python%s/dist-packages" % py, "/opt/conda/lib/python%s/site-packages" % py,
                           "/home/%s/miniforge3/envs/%s/lib/python%s/site-packages" % (user, envname, py),
                           "/workspace/.venv/lib/python%s/site-packages" % py])
    if st == "nemo":
        c.libdir = "/usr/local/lib/python%s/dist-packages" % py
    c.pyexe = rng.choice(["/usr/bin/python3", "/opt/conda/bin/python", "/usr/bin/python%s" % py])
    c.pl_pkg = "lightning/pytorch" if rng.random() < 0.75 else "pytorch_lightning"
    # --- hardware / network
    gpu = rng.choice([("NVIDIA A100-SXM4-80GB", 79.15, "a100"), ("NVIDIA H100 80GB HBM3", 79.11, "h100"),
                      ("NVIDIA H200", 139.8, "h200"), ("NVIDIA A100-SXM4-40GB", 39.39, "a100")])
    c.gpu_name, c.gpu_mem, gtag = gpu
    c.net = "IB" if (rng.random() < 0.75 or kind.id == "hw_ib_link_down") else "Socket"
    c.n_hca = rng.choice([4, 8]) if c.net == "IB" else 1
    c.sock_if = rng.choice(["ib0", "bond0", "eth0", "enp90s0np0", "ens1f0"]) if c.net == "IB" else rng.choice(["eth0", "bond0", "ens5"])
    c.bad_if = rng.choice(["ib0", "eth1", "ens1f0np0", "bond1"])
    if c.bad_if == c.sock_if:
        c.bad_if = "eth9"
    allbus = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]
    c.busids = allbus[:c.gpn] if c.gpn == 8 else rng.sample(allbus, c.gpn)
    c.affinity = ["ffffffff,00000000,ffffffff", "00000000,ffffffff,00000000"]
    c.nchan = rng.choice([16, 24, 32])
    c.nccl_debug = "INFO" if (rng.random() < (0.7 if c.n_nodes <= 32 else 0.1)) else rng.choice(["WARN", None])
    c.timeout_s = {"lightning": 1800, "fabric": 1800, "nemo": rng.choice([600, 1800]), "composer": rng.choice([300, 600, 1800]),
                   "colossalai": 1800, "verl": rng.choice([600, 1200]), "jsonl": rng.choice([600, 900, 1800]),
                   "syslog": rng.choice([600, 1800])}[st]
    c.store_timeout = rng.choice([900, 1800])
    c.kill_on_bad_exit = rng.random() < 0.6
    c.kill_wait = rng.choice([32, 32, 62, 122])
    c.slurm_new = rng.random() < 0.5
    c.srun_label = rng.random() < 0.35
    c.master_port = rng.choice([29500, 29500, 12355, 23456, 6000])
    c.master_by_name = rng.random() < 0.5
    c.ops_per_step = rng.choice([3, 7, 12, 34])
    # --- model / data
    size = rng.choice([(1.1e9, 2048, 32000, "TinyLlama-1.1B"), (7.0e9, 4096, 32000, "Llama-2-7b"), (8.0e9, 4096, 128256, "Llama-3.1-8B"),
                       (13e9, 5120, 32000, "Llama-2-13b"), (3.1e9, 3072, 151936, "Qwen2.5-3B"), (70e9, 8192, 128256, "Llama-3.1-70B")])
    c.n_params, c.hidden, c.vocab, c.model_name = size
    c.hf_model = rng.choice(["meta-llama/" + c.model_name if "Llama" in c.model_name else "Qwen/" + c.model_name,
                             "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"])
    c.model_cls = rng.choice(["LlamaForCausalLM", "GPT", "Transformer", "Qwen2ForCausalLM"])
    c.n_modules = rng.randint(150, 900)
    c.tp = rng.choice([1, 2, 4, 8]) if st == "nemo" else 1
    c.tp = min(c.tp, c.gpn)
    c.pp = rng.choice([1, 1, 2, 4]) if st == "nemo" and c.n_nodes >= 4 else 1
    c.seq_len = rng.choice([2048, 4096, 8192])
    c.mbs = rng.choice([1, 2, 4])
    c.gbs = rng.choice([256, 512, 1024, 2048]) if st != "verl" else rng.choice([128, 256, 512])
    c.grad_accum = rng.choice([1, 2, 4, 8])
    c.precision = "bf16" if rng.random() < 0.85 else "16"
    c.mem_gb = round(c.gpu_mem * rng.uniform(0.55, 0.9), 2)
    c.host_mem = rng.choice([503.5, 1007.7, 2015.6, 1511.3])
    c.tflops = rng.uniform(150, 520)
    root = rng.choice(["/lustre/fsw/%s" % user, "/mnt/shared/%s" % user, "/fsx/%s" % user, "/gpfs/proj/%s" % user, "/data/%s" % user])
    c.run_name = rng.choice(["pt", "sft", "cpt", "mix"]) + "-" + c.model_name.lower().replace(".", "")[:12] + "-" + _alnum(rng, 6).lower()
    c.workdir = rng.choice(["/workspace/llm-train", root + "/code/pretrain", "/opt/train", "/home/%s/lm" % user])
    c.data_path = rng.choice([root + "/data/slimpajama/tokenized", root + "/datasets/fineweb-edu-dedup", "/data/corpus/redpajama_v2_en",
                              root + "/data/mix_v3/train"])
    c.local_cache = rng.choice(["/local_nvme/cache", "/scratch/local/shards", "/raid/cache/data"])
    c.n_shards = rng.choice([128, 512, 1024, 4096])
    c.ckpt_dir = root + "/checkpoints/" + c.run_name
    c.tb_dir = root + "/tb/" + c.run_name
    c.yaml = rng.choice(["yamls/pretrain/%s.yaml" % c.run_name, "configs/%s.yaml" % c.run_name, "conf/train.yaml"])
    c.nfs_server = rng.choice(["nfs01", "10.0.0.5", "fs-prod-2"])
    c.dl_workers = rng.choice([1, 2, 4, 8])
    c.cpus = rng.choice([16, 24, 32, 48])
    c.seed_val = rng.choice([42, 17, 1234, 0])
    c.v_num = rng.randint(0, 40)
    c.save_top_k = rng.choice([1, 3, 5])
    c.ckpt_dir_exists = rng.random() < 0.5
    c.gpu_tc_hint = rng.random() < 0.5
    c.warn_typed_storage = rng.random() < 0.4
    c.warn_reentrant = rng.random() < 0.5
    c.warn_barrier = rng.random() < 0.6
    c.warn_pgdev = rng.random() < 0.6
    c.nemo_mpl = rng.random() < 0.6
    c.hf_model_based = st in ("lightning", "colossalai", "composer", "verl") or rng.random() < 0.3
    c.extra_comm = rng.choice(["first_eval", "first_ckpt", "none"])
    c.colossal_ext = rng.sample(["cpu_adam_x86", "fused_optim_cuda", "layernorm_cuda", "scaled_masked_softmax_cuda"], rng.randint(1, 3))
    c.warn_import = rng.sample(WARN_IMPORT, rng.randint(1, 2))
    c.echo_done = rng.random() < 0.5
    c.composer_verbose = rng.random() < 0.5
    c.nemo_ft = rng.random() < 0.3
    c.nemo_preempt_cb = rng.random() < 0.5
    c.json_z = rng.random() < 0.5
    c.json_spaces = rng.random() < 0.5
    c.ray_shm_warn = rng.random() < 0.5
    c.ray_color = False
    c.colossal_cli = rng.random() < 0.5
    c.outlier_mult = rng.choice([2, 3, 5])
    c.nan_patience = rng.choice([2, 4])
    c.image = rng.choice(["nvcr.io#nvidia/nemo:24.07", "nvcr.io#nvidia/nemo:24.09", "nvcr.io#nvidia/pytorch:24.05-py3",
                          "ghcr.io#org/llm-train:2024.10.2"])
    c.pyxis = st == "nemo" or (st in SRUN_STYLES and rng.random() < 0.3)
    c.unit = rng.choice(["llm-train.service", "pretrain@%d.service" % rng.randint(1, 99), "torchrun-job.service"])
    c.syslog_ident = rng.choice(["torchrun", "python3", "train.sh"])
    c.script_path = {"colossalai": "train.py", "jsonl": "train_fsdp.py", "syslog": "train_ddp.py"}.get(st, "train.py")
    c.script_path_full = c.workdir + "/" + {"lightning": "train.py", "fabric": "pretrain.py", "nemo": "pretrain_gpt.py",
                                            "composer": "scripts/train/train.py", "colossalai": "train.py",
                                            "jsonl": "train_fsdp.py", "syslog": "train_ddp.py"}.get(st, "train.py")
    c.script_line, c.main_line = rng.randint(80, 200), rng.randint(40, 79)
    # --- schedule
    if c.big:
        c.total_steps = rng.randint(1200, 4000)
        target_logs = rng.randint(60, 160) if st != "composer" else rng.randint(12, 30)
    else:
        c.total_steps = rng.choice([rng.randint(1500, 6000), rng.randint(6000, 30000)])
        target_logs = rng.randint(200, 1400) if st not in ("composer",) else rng.randint(40, 140)
        if st in ("jsonl", "syslog") and c.n_nodes > 16:
            target_logs = rng.randint(120, 400)
    cand = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500]
    c.log_every = min(cand, key=lambda x: abs(c.total_steps / x - target_logs))
    c.eval_every = c.log_every * max(1, round(c.total_steps / c.log_every / rng.randint(6, 25)))
    c.ckpt_every = c.eval_every * rng.choice([1, 1, 2, 4])
    c.eval_batches = rng.choice([20, 50, 100, 200])
    c.steps_per_epoch = rng.choice([c.total_steps, max(c.log_every * 4, c.total_steps // rng.randint(2, 6))])
    c.step_time = rng.uniform(0.6, 12.0)
    c.eval_time = rng.uniform(15, 240)
    c.ckpt_time = rng.uniform(10, 180)
    c.warmup = rng.choice([100, 200, 500, 2000])
    c.warmup = min(c.warmup, c.total_steps // 10)
    c.peak_lr = rng.choice([3e-4, 1.5e-4, 6e-4, 1e-4, 2e-5])
    c.min_lr = c.peak_lr / 10
    c.loss0, c.loss_inf = rng.uniform(9.5, 11.2), rng.uniform(1.7, 2.8)
    c.loss_tau = c.total_steps / rng.uniform(5, 12)
    c.resume = kind.needs_resume or rng.random() < 0.25
    c.resume_step = (c.ckpt_every * rng.randint(1, max(1, (c.total_steps // c.ckpt_every) // 3))) if c.resume else 0
    if c.resume_step >= c.total_steps // 2:
        c.resume_step = c.ckpt_every if c.ckpt_every < c.total_steps // 2 else 0
        c.resume = c.resume_step > 0 or kind.needs_resume
    c.resume_path = {"lightning": "%s/epoch=0-step=%d.ckpt" % (c.ckpt_dir, c.resume_step), "nemo": "%s/megatron_gpt--step=%d-last" % (c.ckpt_dir, c.resume_step - 1),
                     "composer": "%s/ep0-ba%d-rank0.pt" % (c.ckpt_dir, c.resume_step), "colossalai": "%s/epoch-0_step-%d" % (c.ckpt_dir, c.resume_step),
                     "fabric": "%s/step-%08d/lit_model.pth" % (c.ckpt_dir, c.resume_step), "verl": "%s/global_step_%d" % (c.ckpt_dir, c.resume_step),
                     "jsonl": "%s/step_%d" % (c.ckpt_dir, c.resume_step), "syslog": "%s/it_%07d.pt" % (c.ckpt_dir, c.resume_step)}[st]
    # --- ids
    c.config_id = "f2cfg-%s-%s" % (st, _hex(rng, 8))
    c.batch_echo = rng.choice([
        ["Job {JOBID} running on {NODELIST}", "MASTER_ADDR={MASTER}", "Start: {T}"],
        ["SLURM_JOB_ID={JOBID}", "SLURM_JOB_NODELIST={NODELIST}", "SLURM_NNODES={NNODES}", "MASTER_ADDR={MASTER} MASTER_PORT=%d" % c.master_port],
        ["=== {T} ===", "nodes: {NODELIST}"],
        [],
    ])
    c.cluster = {"gpu_tag": gtag, "o1": rng.choice(["10", "172", "192"]), "o2": rng.randint(0, 200), "o3": rng.randint(0, 200),
                 "nid0": rng.randint(1000, 6000), "p5": rng.choice(["4d24", "5.48"]), "jobname": c.run_name[:20].rstrip("-")}
    if c.cluster["o1"] == "172":
        c.cluster["o2"] = rng.randint(16, 31)
    if c.cluster["o1"] == "192":
        c.cluster["o2"] = 168
    c.host_style = "k8s" if st in ("composer", "jsonl") and rng.random() < 0.7 else rng.choice(HOST_STYLES[:-1])
    return c


# =============================================================================== job
class Job:
    def __init__(self, cfg: Cfg, rng: random.Random, n_nodes: int | None = None, t0: float | None = None):
        self.cfg = cfg
        self.rng = rng
        if n_nodes is not None and n_nodes != cfg.n_nodes:
            cfg.n_nodes = n_nodes
        self.hosts, self.ips = make_hosts(rng, cfg.style, cfg.n_nodes, cfg.host_style, cfg.cluster)
        self.skews = [rng.uniform(-30, 30) for _ in range(cfg.n_nodes)]
        self.t0 = t0 if t0 is not None else rng.uniform(1.70e9, 1.765e9)
        self.tf = TorchFlavour(cfg.torch, cfg.libdir)
        self.job_id = rng.randint(100000, 9999999)
        self.nodelist = nodelist(self.hosts)
        self.comm_id = "0x%s" % _hex(rng, 16)
        self.comm_id2 = "0x%s" % _hex(rng, 16)
        self.nodes = [NodeLog(self, i) for i in range(cfg.n_nodes)]
        cfg.node_ids = [_hex(rng, 56) for _ in range(cfg.n_nodes)]
        cfg.actor_id, cfg.actor_id2, cfg.worker_id = _hex(rng, 32), _hex(rng, 32), _hex(rng, 56)
        cfg.ray_sub = _alnum(rng, 16)
        cfg.ray_ns = "%s-%s-%s-%s-%s" % (_hex(rng, 8), _hex(rng, 4), _hex(rng, 4), _hex(rng, 4), _hex(rng, 12))
        cfg.wg_prefix = _alnum(rng, 6)
        cfg.master = "%s:%d" % (self.hosts[0] if cfg.master_by_name else self.ips[0], cfg.master_port)
        self.style = STYLES[cfg.style](self)
        self.faulty: list[str] = []
        self.F = None
        self.straggler = None
        self.slow_start_t = None
        self.bad_exit_nodes = set()

    def start_deferred(self):
        for n in self.nodes:
            n.deferred = True

    def flush(self):
        for n in self.nodes:
            n.flush()


def step_metrics(job, k, dt_k, last_val):
    st = job.style
    m = {"loss": job.cfg.loss_at(k) + job.rng.gauss(0, 0.03) + 0.02 * math.sin(k / 7.0), "lr": st.lr(k), "step_time": dt_k, "val_loss": last_val}
    return m


def choose_fault_step(job, kind):
    c, rng = job.cfg, job.rng
    lo = max(c.resume_step + max(20, c.log_every * 3), int(c.total_steps * 0.25))
    hi = int(c.total_steps * 0.93)
    if hi <= lo:
        hi = lo + 1
    if kind.phase == "eval":
        cands = [k for k in range(c.eval_every, c.total_steps, c.eval_every) if lo <= k <= hi] or \
                [k for k in range(c.eval_every, c.total_steps + 1, c.eval_every) if k > c.resume_step]
        return rng.choice(cands)
    if kind.phase == "ckpt":
        cands = [k for k in range(c.ckpt_every, c.total_steps, c.ckpt_every) if lo <= k <= hi] or \
                [k for k in range(c.ckpt_every, c.total_steps + 1, c.ckpt_every) if k > c.resume_step]
        return rng.choice(cands)
    while True:
        F = rng.randint(lo, hi)
        if F % c.eval_every and F % c.log_every:
            return F
        if rng.random() < 0.3:
            return F


def run_job(job: Job, kind=None):
    st, c, rng = job.style, job.cfg, job.rng
    t = job.t0
    if kind is not None and kind.stage == "initialization":
        kind.fn(job, t)
        job.flush()
        return
    t = st.init_launch(t)
    t = st.init_dist(t)
    if kind is not None and kind.stage == "model_loading":
        job.start_deferred()
        kind.fn(job, t)
        job.flush()
        return
    t = st.model_loading(t)
    if kind is not None and kind.stage == "data_loading":
        job.start_deferred()
        kind.fn(job, t)
        job.flush()
        return
    t = st.data_loading(t)
    t = st.train_start(t)
    st.emit_extra(t + c.step_time * 0.5, "first_step")
    F = phase = None
    seen_eval = seen_ckpt = False
    if kind is not None and kind.stage in ("training", "evaluation", "checkpointing"):
        F = job.F = choose_fault_step(job, kind)
        phase = kind.phase
        if kind.id == "hw_straggler_node":
            job.straggler = rng.randint(0, c.n_nodes - 1) if rng.random() < 0.2 else rng.randint(1, c.n_nodes - 1) if c.n_nodes > 1 else 0
            job.slow_from = max(c.resume_step + 1, F - rng.randint(40, 400))
            job.slow_gain = rng.uniform(1.5, 5.0)
    last_val = None
    for k in range(c.resume_step + 1, c.total_steps + 1):
        dt_k = c.step_time * (1 + rng.gauss(0, 0.025))
        if k == c.resume_step + 1:
            dt_k *= rng.uniform(2, 6)
        comp = None
        if job.straggler is not None and k >= job.slow_from:
            frac = (k - job.slow_from) / max(1, F - job.slow_from)
            slow = c.step_time * (1 + job.slow_gain * frac * frac)
            if job.slow_start_t is None:
                job.slow_start_t = t
            comp = {n.idx: c.step_time * 0.8 for n in job.nodes}
            comp[job.straggler] = slow * 0.95
            dt_k = slow
        if F is not None and phase == "train" and k == F:
            job.start_deferred()
            kind.fn(job, t + rng.uniform(0.1, 0.9) * dt_k)
            job.flush()
            return
        t += dt_k
        m = step_metrics(job, k, dt_k, last_val)
        if comp:
            m["compute"] = comp
        st.on_step(k, t, m)
        if k % c.eval_every == 0 and k != c.total_steps:
            st.on_eval_begin(k, t + 0.3)
            if not seen_eval:
                seen_eval = True
                st.emit_extra(t + 0.5, "first_eval")
            if F == k and phase == "eval":
                job.start_deferred()
                kind.fn(job, t + rng.uniform(0.2, 0.8) * c.eval_time)
                job.flush()
                return
            t += c.eval_time
            last_val = c.loss_at(k) + 0.05 + rng.gauss(0, 0.01)
            st.on_eval_end(k, t, dict(m, val_loss=last_val))
        if k % c.ckpt_every == 0 and k != c.total_steps:
            st.on_ckpt_begin(k, t + 0.2)
            if not seen_ckpt:
                seen_ckpt = True
                st.emit_extra(t + 0.4, "first_ckpt")
            if F == k and phase == "ckpt":
                job.start_deferred()
                kind.fn(job, t + rng.uniform(0.2, 0.8) * c.ckpt_time)
                job.flush()
                return
            t += c.ckpt_time
            st.on_ckpt_end(k, t)
    if kind is not None and kind.stage == "finalization":
        job.start_deferred()
        kind.fn(job, t + 1)
        job.flush()
        return
    st.finish(t + 1)


# =============================================================================== case
def write_run(dirp: Path, job: Job, status: str):
    (dirp / "logs").mkdir(parents=True, exist_ok=True)
    for n in job.nodes:
        with open(dirp / "logs" / ("%s.log" % n.host), "w", encoding="utf-8", newline="") as f:
            f.write(n.text())
    meta = {"job_id": str(job.job_id) if job.cfg.style not in ("composer", "jsonl") or job.cfg.host_style != "k8s" else job.cfg.cluster["jobname"] + "-" + str(job.job_id),
            "config_id": job.cfg.config_id, "status": status, "framework": STYLES[job.cfg.style].framework}
    (dirp / "job.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def fault_order():
    ids = sorted(CATALOGUE)
    random.Random("foreign2-order").shuffle(ids)
    return ids


def build_case(seed: int, out: Path) -> dict:
    ids = fault_order()
    kind = CATALOGUE[ids[seed % len(ids)]]
    rng = random.Random(f"foreign2-{seed}")
    cfg = make_cfg(rng, seed, kind)
    base_cfg = copy.deepcopy(cfg)
    job = Job(cfg, random.Random(f"foreign2-{seed}-failed"))
    run_job(job, kind)
    case = out / ("case-%d" % seed)
    if case.exists():
        shutil.rmtree(case)
    meta = write_run(case / "failed", job, "failed")
    # baselines: same configuration, 1-2 healthy runs (same or fewer nodes)
    nb = rng.choice([1, 2])
    bnames = []
    for b in range(1, nb + 1):
        bc = copy.deepcopy(base_cfg)
        nn = bc.n_nodes if rng.random() < 0.7 or bc.n_nodes <= 3 else rng.randint(max(2, bc.n_nodes // 2), bc.n_nodes)
        bj = Job(bc, random.Random(f"foreign2-{seed}-baseline-{b}"), n_nodes=nn)
        run_job(bj, None)
        write_run(case / ("baseline-%d" % b), bj, "succeeded")
        bnames.append("baseline-%d" % b)
    truth = make_truth(seed, job, kind, meta, bnames)
    (case / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def make_truth(seed, job, kind, meta, bnames):
    faulty = list(dict.fromkeys(job.faulty))
    inds, syms = [], []
    for n in job.nodes:
        lines = n.finalize_lines()
        for i, (role, k) in sorted(n.tags.items()):
            if i >= len(lines):
                continue
            text = lines[i].removesuffix("\r")
            ent = {"node": n.host, "file": "logs/%s.log" % n.host, "line": i + 1, "text": text, "kind": k}
            if role == IND and n.host in faulty:
                inds.append(ent)
            elif role == IND:
                ent["kind"] = "relay:" + k if not k.startswith("relay:") else k
                syms.append(ent)
            else:
                syms.append(ent)
    stage = kind.stage
    iteration = job.style.display(job.F) if (job.F is not None and stage in ("training", "evaluation", "checkpointing")) else None
    return {"job_id": meta["job_id"], "config_id": meta["config_id"], "framework": meta["framework"], "seed": seed,
            "n_nodes": job.cfg.n_nodes,
            "fault": {"id": kind.id, "category": kind.category, "root_cause": kind.root_cause, "source": kind.source},
            "faulty_nodes": faulty, "stage": stage, "iteration": iteration,
            "indicators": inds, "symptoms": syms, "baselines": bnames,
            "launcher": job.style.launcher, "style": job.cfg.style}


# =============================================================================== check / list / cli
def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return [line.removesuffix("\r") for line in fh.read().split("\n")]


def check(root: Path) -> int:
    bad = 0
    cases = sorted(p for p in root.glob("case-*") if p.is_dir())
    for case in cases:
        tr = json.loads((case / "truth.json").read_text())
        for key in ("job_id", "config_id", "framework", "seed", "n_nodes", "fault", "faulty_nodes", "stage", "iteration",
                    "indicators", "symptoms", "baselines"):
            if key not in tr:
                print("%s: truth lacks %s" % (case.name, key))
                bad += 1
        if tr["stage"] not in STAGES:
            print("%s: bad stage %s" % (case.name, tr["stage"]))
            bad += 1
        logs = case / "failed" / "logs"
        hosts = {p.stem for p in logs.glob("*.log")}
        if len(hosts) != tr["n_nodes"]:
            print("%s: %d logs for n_nodes=%d" % (case.name, len(hosts), tr["n_nodes"]))
            bad += 1
        for h in tr["faulty_nodes"]:
            if h not in hosts:
                print("%s: faulty node %s has no log" % (case.name, h))
                bad += 1
        cache = {}
        for ent in tr["indicators"] + tr["symptoms"]:
            if ent["node"] not in cache:
                cache[ent["node"]] = read_lines(logs / ("%s.log" % ent["node"]))
            lines = cache[ent["node"]]
            i = ent["line"] - 1
            if i >= len(lines) or lines[i] != ent["text"]:
                print("%s: %s line %d does not hold %r" % (case.name, ent["node"], ent["line"], ent["text"][:80]))
                bad += 1
        for b in tr["baselines"]:
            jb = json.loads((case / b / "job.json").read_text())
            if jb["status"] != "succeeded" or jb["config_id"] != tr["config_id"]:
                print("%s: baseline %s mismatch" % (case.name, b))
                bad += 1
        jf = json.loads((case / "failed" / "job.json").read_text())
        if jf["status"] != "failed":
            bad += 1
    print("checked %d cases, %d problems" % (len(cases), bad))
    return 1 if bad else 0


def parse_seeds(s: str) -> list[int]:
    out = []
    for part in s.split(","):
        if ".." in part:
            a, b = part.split("..")
            out += list(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seeds", default="0..39")
    ap.add_argument("--check", type=Path)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--allow-reserved", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.list:
        ids = fault_order()
        print("%d fault kinds (seed s uses kind #(s mod %d) of this order)" % (len(ids), len(ids)))
        for i, k in enumerate(ids):
            kd = CATALOGUE[k]
            print("%2d  %-36s %-10s %-15s styles=%s" % (i, k, kd.category, kd.stage, ",".join(kd.styles) if kd.styles else "all"))
        return 0
    if a.check:
        return check(a.check)
    if not a.out:
        ap.error("--out DIR (or --check DIR / --list)")
    seeds = parse_seeds(a.seeds)
    if any(s >= RESERVED for s in seeds) and not a.allow_reserved:
        ap.error("seeds >= %d are reserved" % RESERVED)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    for s in seeds:
        tr = build_case(s, a.out)
        print("case-%d  %-34s %-10s %-11s nodes=%-3d faulty=%s iter=%s" % (s, tr["fault"]["id"], tr["framework"], tr["stage"], tr["n_nodes"],
                                                                          ",".join(tr["faulty_nodes"][:3]) + ("..." if len(tr["faulty_nodes"]) > 3 else ""), tr["iteration"]))
    print("%d cases in %.1fs" % (len(seeds), time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
