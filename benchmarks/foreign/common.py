"""Shared helpers for the foreign benchmark generator: time formats, config, node logs."""
import datetime as _dt

STAGES = ("initialization", "data_loading", "model_loading", "training",
          "checkpointing", "evaluation", "finalization")

# ----------------------------------------------------------------------------- time formats


def _dt_of(t):
    return _dt.datetime.fromtimestamp(t, _dt.UTC)


_SEC = {}


def _sec(t):
    k = int(t // 1)
    v = _SEC.get(k)
    if v is None:
        if len(_SEC) > 200000:
            _SEC.clear()
        v = _SEC[k] = _dt_of(k).strftime("%Y-%m-%d %H:%M:%S")
    return v


def ts_py(t):        # 2024-05-01 12:00:00,123
    return _sec(t) + ",%03d" % (int((t % 1) * 1000))


def ts_sec(t):       # 2024-05-01 12:00:00
    return _sec(t)


def ts_glog(t, lvl="E"):   # E0501 12:00:00.123456789
    d = _dt_of(t)
    return "%s%s %s.%06d%03d" % (lvl, d.strftime("%m%d"), d.strftime("%H:%M:%S"), d.microsecond,
                                 int(t * 1e6) % 997 % 1000)


def ts_glog_us(t, lvl="W"):  # W0501 12:00:00.123000 (torch elastic >= 2.4)
    d = _dt_of(t)
    return "%s%s %s.%06d" % (lvl, d.strftime("%m%d"), d.strftime("%H:%M:%S"), d.microsecond)


def ts_k8s(t):
    d = _dt_of(t)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%06d%03dZ" % (d.microsecond, int(t * 1e7) % 1000)


def ts_ascend(t):    # 2024-05-01-12:00:00.123.456
    d = _dt_of(t)
    return d.strftime("%Y-%m-%d-%H:%M:%S") + ".%03d.%03d" % (d.microsecond // 1000, d.microsecond % 1000)


def ts_iso(t):
    return _dt_of(t).strftime("%Y-%m-%dT%H:%M:%S")


def ts_elastic(t):   # 2024-05-01_12:00:00
    return _dt_of(t).strftime("%Y-%m-%d_%H:%M:%S")


def hms(sec):
    sec = int(sec)
    h, r = divmod(sec, 3600)
    m, s = divmod(r, 60)
    return ("%d:%02d:%02d" % (h, m, s)) if h else ("%02d:%02d" % (m, s))


# ----------------------------------------------------------------------------- configuration

HOST_STYLES = [
    lambda i, o: "node-%03d" % (i + o),
    lambda i, o: "gpu-a100-%02d" % (i + o),
    lambda i, o: "h100-r%02d-n%02d" % ((i + o) // 8 + 1, (i + o) % 8 + 1),
    lambda i, o: "ip-10-%d-%d-%d" % (20 + (i + o) // 200, ((i + o) * 7) % 250 + 1, ((i + o) * 13) % 250 + 2),
    lambda i, o: "worker-%d" % (i + o),
    lambda i, o: "dgx%03d" % (i + o + 1),
    lambda i, o: "cn%04d" % (1000 + i + o),
]
NPU_HOST_STYLES = [
    lambda i, o: "ascend-%02d" % (i + o),
    lambda i, o: "atlas800-%03d" % (i + o + 1),
    lambda i, o: "npu-node-%d" % (i + o),
]
K8S_HOST = [
    lambda i, o: "llm-pretrain-%s-worker-%d" % (o_suffix(o), i),
]


def o_suffix(o):
    return "abcdefghjkmnpqrstuvwxyz"[o % 23] + "%x" % (o * 2654435761 % 4096)


LAUNCHERS = {
    "megatron": ["torchrun-rank", "torchrun-default", "srun", "torchrun-plain", "kubectl"],
    "deepspeed": ["pdsh", "torchrun-rank", "mpirun", "srun-torchrun"],
    "hf": ["torchrun-plain", "torchrun-rank", "srun-torchrun", "kubectl"],
    "torchtitan": ["torchrun-rank", "srun-torchrun"],
    "mindspeed": ["torchrun-plain", "kubectl", "torchrun-rank"],
}


class Cfg:
    pass


def make_cfg(rng, fw, seed, fault):
    c = Cfg()
    c.fw = fw
    c.launcher = rng.choice(LAUNCHERS[fw])
    if fault["mode"] == "preempt":
        c.launcher = rng.choice(["srun", "srun-torchrun"]) if fw in ("megatron",) else "srun-torchrun"
        if fw == "deepspeed":
            c.launcher = "srun-torchrun"
    c.k8s = c.launcher == "kubectl"
    r = rng.random()
    if r < 0.06:
        c.n_nodes = rng.choice([128, 160, 256])
    elif r < 0.25:
        c.n_nodes = rng.choice([32, 48, 64])
    else:
        c.n_nodes = rng.choice([4, 4, 6, 8, 8, 12, 16, 16, 24])
    c.rpn = rng.choice([8, 8, 8, 8, 4, 4, 2, 1]) if fw != "mindspeed" else rng.choice([8, 8, 16 // 2, 4])
    c.world = c.n_nodes * c.rpn
    c.host_style = rng.randrange(len(NPU_HOST_STYLES) if fw == "mindspeed" else len(HOST_STYLES))
    c.torch = rng.choice(["2.1", "2.3", "2.4", "2.5"])
    c.nccl_ver = {"2.1": "2.18.5", "2.3": "2.20.5", "2.4": "2.20.5", "2.5": "2.21.5"}[c.torch]
    c.py = rng.choice(["3.10", "3.10", "3.11"])
    c.site = rng.choice(["/usr/local/lib/python%s/dist-packages" % c.py,
                         "/opt/conda/lib/python%s/site-packages" % c.py,
                         "/home/%s/.venv/lib/python%s/site-packages" % (rng.choice(["svc-train", "mlops", "jdoe"]), c.py)])
    c.nccl_debug = fw != "mindspeed" and rng.random() < 0.7
    c.timeout_s = rng.choice([600, 600, 1800, 1800, 3600 // 2])
    c.tp = rng.choice([1, 2, 4, 8]) if fw in ("megatron", "mindspeed") else 1
    c.tp = min(c.tp, c.rpn)
    c.pp = rng.choice([1, 2, 4]) if fw in ("megatron", "mindspeed") and c.n_nodes >= 4 else 1
    c.dp = max(1, c.world // (c.tp * c.pp))
    c.model = rng.choice(["gpt-1.3b", "llama2-7b", "llama3-8b", "gpt3-13b", "llama2-70b", "mixtral-8x7b", "qwen2-14b"])
    c.heads = {"gpt-1.3b": 16, "llama2-7b": 32, "llama3-8b": 32, "gpt3-13b": 40, "llama2-70b": 64, "mixtral-8x7b": 32, "qwen2-14b": 40}[c.model]
    c.seq = rng.choice([2048, 4096, 8192])
    c.mbs = rng.choice([1, 1, 2, 4])
    c.gbs = max(c.dp * c.mbs, rng.choice([256, 512, 1024, 2048]))
    c.resume = rng.random() < 0.6
    c.log_interval = rng.choice([1, 1, 5, 10, 10, 20]) if fw != "hf" else rng.choice([10, 10, 20, 50])
    n_big = c.n_nodes >= 128
    n_lines = rng.randint(60, 160) if n_big else rng.randint(150, 900)
    c.start_iter = (rng.choice([1000, 2000, 4000, 12000, 30000]) if c.resume else 0)
    c.save_interval = c.log_interval * rng.choice([25, 50, 100, 200])
    c.save_interval = max(c.save_interval, 50)
    c.start_iter = (c.start_iter // c.save_interval) * c.save_interval
    span = n_lines * c.log_interval
    c.end_iter = c.start_iter + span
    c.train_iters = c.end_iter + (rng.choice([0, 0, c.save_interval * 10, 100000]) if fw != "hf" else 0)
    # save/eval counts bounded
    while (c.end_iter - c.start_iter) // c.save_interval > 12:
        c.save_interval *= 2
    c.eval_interval = c.save_interval * rng.choice([1, 1, 2]) if rng.random() < 0.8 or fault_needs_eval(fault) else 0
    c.step_time = rng.uniform(0.4, 9.0)
    c.hb = rng.random() < 0.8 or fault["mode"] == "slow"      # per-node user heartbeat lines
    c.hb_every = rng.choice([1, 2, 2, 5]) * c.log_interval
    c.hb_word = rng.randrange(4)
    c.word = rng.randrange(3)          # paraphrase family for progress / save / eval lines
    c.ckpt_dir = rng.choice(["/lustre/fsw/llm/ckpt/", "/mnt/shared/checkpoints/", "/nfs/proj/llm/runs/",
                             "/gpfs/scratch/ml/ckpts/", "s3mnt/ckpt/"]) + "%s-%s" % (c.model, o_suffix(seed + 3))
    c.data_dir = rng.choice(["/lustre/fsw/llm/data", "/mnt/datasets", "/nfs/proj/corpora", "/data/tokenized"])
    c.script = {"megatron": rng.choice(["pretrain_gpt.py", "pretrain_llama.py"]),
                "deepspeed": rng.choice(["train.py", "main.py", "run_pretrain.py"]),
                "hf": rng.choice(["run_clm.py", "train_sft.py", "finetune.py"]),
                "torchtitan": "torchtitan/train.py",
                "mindspeed": rng.choice(["pretrain_gpt.py", "posttrain_gpt.py"])}[fw]
    c.repo = {"megatron": rng.choice(["/workspace/Megatron-LM", "/opt/megatron-lm", "/home/user/src/Megatron-LM"]),
              "deepspeed": rng.choice(["/workspace/llm-train", "/home/user/proj"]),
              "hf": rng.choice(["/workspace/sft", "/app"]),
              "torchtitan": rng.choice(["/workspace/torchtitan", "/opt/torchtitan"]),
              "mindspeed": rng.choice(["/home/ma-user/MindSpeed-LLM", "/workspace/ModelLink"])}[fw]
    c.fp16 = fw in ("deepspeed", "hf") and rng.random() < 0.35
    c.zero = rng.choice([1, 2, 3]) if fw in ("deepspeed", "hf") else 0
    c.push_to_hub = fw == "hf" and (rng.random() < 0.4 or fault["id"] == "hub_upload_5xx")
    c.log_ranks = rng.choice(["0", "0", "all"]) if fw == "torchtitan" else "0"
    c.slurm_job = rng.randint(100000, 9999999)
    c.kill_on_bad_exit = rng.random() < 0.5
    c.master_port = rng.choice([29500, 29500, 6000, 23456, 12355])
    c.benign_rate = rng.uniform(0.003, 0.02)
    return c


def fault_needs_eval(f):
    return "evaluation" in f["stages"]


# ----------------------------------------------------------------------------- node log


class NodeLog:
    def __init__(self, host, idx, ip, skew):
        self.host, self.idx, self.ip, self.skew = host, idx, ip, skew
        self.lines = []     # (text, label) ; label None or ("ind"|"sym", kind)
        self.alive = True
        self.times = []


class Sim:
    """One run (failed or healthy) of a configuration."""

    def __init__(self, cfg, rng, hosts, t0):
        self.c, self.r = cfg, rng
        self.t = t0
        self.nodes = []
        for i, h in enumerate(hosts):
            skew = 0.0 if i == 0 else (rng.uniform(-40, 40) if rng.random() < 0.25 else rng.uniform(-1.5, 1.5))
            ip = "10.%d.%d.%d" % (rng.choice([0, 1, 64, 128]) if i == 0 else 0, (i * 37 + 11) % 250 + 1, (i * 91 + 7) % 250 + 2)
            self.nodes.append(NodeLog(h, i, ip, skew))
        if cfg.launcher in ("torchrun-rank", "torchrun-default", "torchrun-plain", "srun-torchrun", "kubectl"):
            self.agent = True
        else:
            self.agent = False
        self.pids = {}
        self.seq = rng.randint(40, 200)     # NCCL collective sequence number
        self.fw = None

    # ---- helpers
    @property
    def n(self):
        return len(self.nodes)

    def rpn(self):
        return self.c.rpn

    def g(self, node, lr):
        return node * self.c.rpn + lr

    def lt(self, node, t=None):
        """local wall clock of node"""
        return (self.t if t is None else t) + self.nodes[node].skew

    def pid(self, node, lr):
        k = (node, lr)
        if k not in self.pids:
            self.pids[k] = self.r.randint(2000, 4000000)
        return self.pids[k]

    def prefix(self, node, rank, stream="out", t=None):
        L = self.c.launcher
        p = ""
        if rank is not None:
            lr = rank % self.c.rpn
            if L == "torchrun-rank" or (L == "srun-torchrun" and self.c.fw == "torchtitan"):
                p = "[rank%d]:" % rank
            elif L == "torchrun-default":
                p = "[default%d]:" % lr
            elif L == "srun":
                p = "%d: " % rank
            elif L == "mpirun":
                p = "[1,%d]<std%s>:" % (rank, "err" if stream == "err" else "out")
        if L == "pdsh":
            p = self.nodes[node].host + ": " + p
        elif L == "srun-torchrun":
            p = "%d: " % node + p
        if self.c.k8s:
            p = ts_k8s(self.lt(node, t)) + " " + p
        return p

    def out(self, node, text, rank=None, label=None, t=None, stream="out", raw=False):
        """append one or more lines (text may contain \\n). label applies to first line; the
        rest get label+':context' if label is given."""
        nl = self.nodes[node]
        if raw or text.startswith(("srun:", "slurmstepd:", "pdsh@")):
            pre = ts_k8s(self.lt(node, t)) + " " if self.c.k8s else ""
        elif self.c.k8s:
            # kubectl --timestamps: monotone per stream
            tt = self.lt(node, t)
            tt = max(tt, getattr(nl, "last_k8s", 0) + 1e-6 * self.r.randint(1, 400))
            nl.last_k8s = tt
            pre = ts_k8s(tt) + " " + self.prefix(node, rank, stream, t)[len(ts_k8s(0)) + 1:]
        else:
            pre = self.prefix(node, rank, stream, t)
        for k, line in enumerate(text.split("\n")):
            lab = label
            if label is not None and k > 0:
                lab = (label[0], label[1] if label[1].endswith(":context") else label[1] + ":context")
            if not line.strip():
                lab = None
            nl.lines.append((pre + line, lab))
            nl.times.append(self.t if t is None else t)

    def adv(self, dt):
        self.t += dt

    def benign(self, node, rank=None):
        self.out(node, self.r.choice(self.fw.benign_pool(node)), rank=rank)

    def all_ranks(self):
        for i in range(self.n):
            for lr in range(self.c.rpn):
                yield i, lr


