"""Launcher / framework renderings.  Each style knows its line prefixes,
timestamp formats, progress printer, launcher teardown and success epilogue."""
from __future__ import annotations

from engine import fmt_hms, hexaddr, sym, tqdm_bar

# ------------------------------------------------------------------ shared text
BENIGN_PY = [
    "{site}/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
    "  warnings.warn(",
    "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
    "{site}/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
    "Token indices sequence length is longer than the specified maximum sequence length for this model (5231 > 4096). Running this sequence through the model will result in indexing errors",
]
BENIGN_C10 = "[W Utils.hpp:164] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)"


def tver(job):
    return tuple(int(x) for x in job.cfg["torch"].split(".")[:2])


def c10(job, node, lr, t, lvl, src, msg):
    """c10 (glog-like) line as printed by torch C++ (ProcessGroupNCCL etc)."""
    if tver(job) >= (2, 3):
        d = job.wall(node, t)
        frac = f"{int((t % 1) * 1e9):09d}" if tver(job) >= (2, 4) else f"{int((t % 1) * 1e6):06d}"
        return f"[rank{node.grank(lr)}]:[{lvl}{d.month}{d.day:02d} {d:%H:%M:%S}.{frac} {src}] {msg}"
    return f"[{lvl} {src.split(':')[0]}:{src.split(':')[1]}] {msg}"


def elastic_log(job, node, t, lvl, mod, lineno, msg):
    """torch.distributed.elastic agent logging line, version dependent."""
    v = tver(job)
    if v >= (2, 4):
        d = job.wall(node, t)
        path = mod.replace(".", "/") + ".py"
        return f"{lvl[0]}{d:%m%d %H:%M:%S}.{int((t % 1) * 1e6):06d} {node.agent_pid} {path}:{lineno}] {msg}"
    if v >= (2, 1):
        d = job.wall(node, t)
        return f"[{d:%Y-%m-%d %H:%M:%S},{int((t % 1) * 1000):03d}] {mod}: [{lvl}] {msg}"
    return f"{lvl}:{mod}:{msg}"


_WARN_SRC = [("NET/IB : Got completion", "transport/net_ib.cc:1629"), ("Got async event", "transport/net_ib.cc:98"),
             ("socketProgressOpt", "misc/socket.cc:49"), ("socketStartConnect", "misc/socket.cc:484"),
             ("Cuda failure", "enqueue.cc:1556"), ("Message truncated", "bootstrap.cc:94")]


def nccl_info(job, node, lr, msg, tid=None, lvl="INFO"):
    """NCCL debug line; WARN lines carry NCCL's file:line as in the real logger."""
    pid = node.pids[lr]
    msg = msg.replace("NCCL WARN ", "") if lvl == "WARN" else msg
    if lvl == "WARN":
        src = next((v for k, v in _WARN_SRC if k in msg), "init.cc:1340")
        return f"{node.name}:{pid}:{tid or pid + 97} [{lr}] {src} NCCL WARN {msg}"
    return f"{node.name}:{pid}:{tid or pid} [{lr}] NCCL {lvl} {msg}"


# ------------------------------------------------------------------ base class
def node_stats_msg(job, node, m):
    """per-node timing line printed by each node's local rank 0 (user script)."""
    r = job.rng
    comp = m["base_dt"] * r.uniform(0.62, 0.7)
    if m.get("slow_node") == node.idx:
        comp = m["dt"] * r.uniform(0.9, 0.97)
    wait = max(m["dt"] - comp - m["base_dt"] * 0.05, 0.001)
    mem = job.cfg["gpu_mem"] * 0.78 + (node.idx % 3) * 0.11
    return f"node {node.name} fwd_bwd={comp:.3f}s comm_wait={wait:.3f}s data_wait={r.uniform(0.001, 0.02):.3f}s max_mem={mem:.2f}GiB"


class Style:
    name = "base"
    launcher = "torchrun"
    bar_on_node0 = False
    relays_to_node0 = False
    agent_prefix = ""  # prefix applied to launcher/agent lines

    def __init__(self, cfg):
        self.cfg = cfg

    # default: no prefix, each node writes its own file
    def route(self, job, node, lr, text, stream, t):
        return node.idx, text

    def agent(self, job, node, t, text, tag=None):
        job.line(node.idx, t, self.agent_prefix_for(job, node) + text, tag)

    def agent_prefix_for(self, job, node):
        return ""

    # ------------------------------------------------------------------ logging
    def site(self):
        return self.cfg["site"]

    def log(self, job, node, lr, t, level, src, msg):
        """Python logging line (no process prefix)."""
        d = job.local(node, t)
        return f"{d:%Y-%m-%d %H:%M:%S},{int((t % 1) * 1000):03d} - {level} - {src} - {msg}"

    # ------------------------------------------------------------------ phases
    def startup(self, job, node, t):
        return t

    def nccl_init(self, job, node, t):
        cfg = self.cfg
        if cfg["nccl_debug"]:
            for lr in range(node.rpn):
                tt = t + lr * 0.01
                items = []
                if node.idx == 0 and lr == 0:
                    items.append(nccl_info(job, node, lr, f"NCCL version {cfg['nccl']}").replace(" NCCL NCCL", " NCCL"))
                items += [
                    nccl_info(job, node, lr, f"Bootstrap : Using {cfg['iface']}:{node.ip}<0>"),
                    nccl_info(job, node, lr, "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation"),
                    nccl_info(job, node, lr, f"cudaDriverVersion {cfg['cuda_drv']}"),
                ]
                if cfg["ib"]:
                    items.append(nccl_info(job, node, lr, f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB {cfg['iface']}:{node.ip}<0>"))
                else:
                    items.append(nccl_info(job, node, lr, f"NET/Socket : Using [0]{cfg['iface']}:{node.ip}<0>"))
                items.append(nccl_info(job, node, lr, f"comm {hexaddr(job.rng)} rank {node.grank(lr)} nranks {job.world} cudaDev {lr} nvmlDev {lr} busId {['1b','3b','5d','7e','9a','bc','cd','e1'][lr % 8]}000 commId 0x{job.cfg['commid']} - Init COMPLETE", tid=node.pids[lr] + 91))
                job.proc_lines(node, lr, tt, items)
        if tver(job) >= (2, 2) and cfg["benign_c10"]:
            for lr in range(node.rpn):
                job.proc(node, lr, t + 0.2 + lr * 0.003, f"[rank{node.grank(lr)}]:" + BENIGN_C10)
        return t + 1.5

    def model_loading(self, job, t):
        return t

    def data_loading(self, job, t):
        return t

    def train_begin(self, job, t, start, total):
        return t

    def step(self, job, step, t, m):
        pass

    def log_interval(self, job, step, t, m):
        pass

    def eval_begin(self, job, step, t):
        return t

    def eval_end(self, job, step, t, m):
        return t

    def save_begin(self, job, step, t):
        return t

    def save_end(self, job, step, t):
        return t

    def train_end(self, job, t, m):
        return t

    def success_epilogue(self, job, node, t):
        return t

    def bar_close(self, job, t):
        pass

    # ------------------------------------------------------------------ failure
    def teardown(self, job, node, t, failures, others_term=True, root=None):
        """failures: list of (lr, exitcode). Writes launcher lines for `node`."""
        return torchelastic_teardown(self, job, node, t, failures, others_term, root)

    def job_failed_epilogue(self, job, t, failed_nodes):
        pass


def sig_name(code):
    return {-6: "SIGABRT", -9: "SIGKILL", -15: "SIGTERM", -11: "SIGSEGV", -7: "SIGBUS"}.get(code)


def torchelastic_teardown(style, job, node, t, failures, others_term, root, wrapper_frames=None):
    site = style.site()
    failed_lrs = {lr for lr, _ in failures}
    def A(tt, text, tag=None):
        return style.agent(job, node, tt, text, tag)
    if others_term:
        for lr in range(node.rpn):
            if lr not in failed_lrs:
                A(t, elastic_log(job, node, t, "WARNING", "torch.distributed.elastic.multiprocessing.api", 897,
                                 f"Sending process {node.pids[lr]} closing signal SIGTERM"), sym("agent_sigterm"))
                t += 0.001
    t += 0.8
    first = failures[0]
    A(t, elastic_log(job, node, t, "ERROR", "torch.distributed.elastic.multiprocessing.api", 869,
                     f"failed (exitcode: {first[1]}) local_rank: {first[0]} (pid: {node.pids[first[0]]}) of binary: {job.cfg['python']}"),
      sym("agent_failed"))
    t += 0.01
    frames = wrapper_frames or [
        (job.cfg["torchrun_bin"], 8, "<module>", "sys.exit(main())"),
    ]
    frames = frames + [
        (f"{site}/torch/distributed/elastic/multiprocessing/errors/__init__.py", 355, "wrapper", "return f(*args, **kwargs)"),
        (f"{site}/torch/distributed/run.py", 919, "main", "run(args)"),
        (f"{site}/torch/distributed/run.py", 910, "run", "elastic_launch("),
        (f"{site}/torch/distributed/launcher/api.py", 138, "__call__", "return launch_agent(self._config, self._entrypoint, list(args))"),
        (f"{site}/torch/distributed/launcher/api.py", 269, "launch_agent", "raise ChildFailedError("),
    ]
    lines = [("Traceback (most recent call last):", "launcher:context")]
    for f, ln, fn, code in frames:
        lines.append((f'  File "{f}", line {ln}, in {fn}', "launcher:context"))
        lines.append((f"    {code}", "launcher:context"))
    lines.append(("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "child_failed"))
    lines.append(("=" * 60, "launcher:context"))
    lines.append((f"{job.cfg['script']} FAILED", "launcher:context"))
    lines.append(("-" * 60, "launcher:context"))
    lines.append(("Failures:", "launcher:context"))
    ts = job.wall(node, t).strftime("%Y-%m-%d_%H:%M:%S")

    def block(i, lr, code):
        tb = f"Signal {-code} ({sig_name(code)}) received by PID {node.pids[lr]}" if code < 0 else \
            "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        return [(f"[{i}]:", "launcher:context"),
                (f"  time      : {ts}", "launcher:context"),
                (f"  host      : {node.name}", "launcher:context"),
                (f"  rank      : {node.grank(lr)} (local_rank: {lr})", "launcher:context"),
                (f"  exitcode  : {code} (pid: {node.pids[lr]})", "child_failed"),
                ("  error_file: <N/A>", "launcher:context"),
                (f"  traceback : {tb}", "launcher:context")]
    if len(failures) == 1:
        lines.append(("  <NO_OTHER_FAILURES>", "launcher:context"))
    else:
        for i, (lr, code) in enumerate(failures[1:], 1):
            lines += block(i, lr, code)
    lines.append(("-" * 60, "launcher:context"))
    lines.append(("Root Cause (first observed failure):", "launcher:context"))
    lines += block(0, first[0], first[1])
    lines.append(("=" * 60, "launcher:context"))
    for i, (text, kind) in enumerate(lines):
        A(t + i * 0.0002, text, sym(kind))
    return t + 0.5


# ====================================================================== HF mixin
class HFMixin:
    """HF Trainer/LLaMA-Factory/ms-swift renderings (used by accelerate & SageMaker)."""

    def hflog(self, job, node, t, level, src, msg):
        d = job.local(node, t)
        return f"[{level}|{src}] {d:%Y-%m-%d %H:%M:%S},{int((t % 1) * 1000):03d} >> {msg}"

    def lflog(self, job, node, t, level, src, msg):
        d = job.local(node, t)
        return f"[{level}|{d:%Y-%m-%d %H:%M:%S}] {src} >> {msg}"

    def swlog(self, level, msg):
        return f"[{level}:swift] {msg}"

    def hf_startup(self, job, node, t):
        cfg = self.cfg
        def P(lr, tt, text, stream="stderr"):
            return job.proc(node, lr, tt, text, None, stream)
        for lr in range(node.rpn):
            tt = t + 0.3 + lr * 0.02
            g = node.grank(lr)
            if cfg["flavour"] == "lf":
                P(lr, tt, self.lflog(job, node, tt, "INFO", "llamafactory.hparams.parser:406",
                                     f"Process rank: {g}, world size: {job.world}, device: cuda:{lr}, distributed training: True, compute dtype: torch.bfloat16"))
            else:
                P(lr, tt, self.swlog("INFO", f"rank: {g}, local_rank: {lr}, world_size: {job.world}, local_world_size: {node.rpn}"))
        t += 1.0
        P(0, t, self.hflog(job, node, t, "INFO", "configuration_utils.py:731", f"loading configuration file {cfg['model_path']}/config.json"))
        P(0, t + 0.1, self.hflog(job, node, t + 0.1, "INFO", "tokenization_utils_base.py:2287", "loading file tokenizer.json"))
        if cfg["flavour"] == "swift":
            P(0, t + 0.2, self.swlog("INFO", f"Loading the model using model_dir: {cfg['model_path']}"))
            P(0, t + 0.3, self.swlog("INFO", f"Global seed set to {cfg['train_seed']}"))
        return t + 1.5

    def hf_model_loading(self, job, t):
        cfg = self.cfg
        for node in job.nodes:
            tt = t + job.rng.random() * 0.5
            job.proc(node, 0, tt, self.hflog(job, node, tt, "INFO", "modeling_utils.py:3553",
                                              f"loading weights file {cfg['model_path']}/model.safetensors.index.json"))
            tt += 0.2
            for lr in range(node.rpn):
                n = cfg["shards"]
                chunks = []
                el = 0.0
                for k in range(n + 1):
                    chunks.append("\r" + tqdm_bar(k, n, el, 1.3 if k else 0, prefix="Loading checkpoint shards: ").replace("  0.00s/it", "?it/s") if k else f"\rLoading checkpoint shards:   0%|          | 0/{n} [00:00<?, ?it/s]")
                    el += 1.3
                job.proc(node, lr, tt + lr * 0.05 + n * 1.3, "".join(chunks)[1:])
            tt += cfg["shards"] * 1.3 + 1
            if job.cfg["benign_py"]:
                job.proc(node, 0, tt, BENIGN_PY[2])
        t += cfg["shards"] * 1.3 + 3
        if cfg["resume_from"]:
            node = job.nodes[0]
            job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "trainer.py:2095",
                                             f"Loading model from {cfg['out_dir']}/checkpoint-{cfg['resume_from']}."), stream="stdout")
            t += 8 + job.rng.random() * 10
        return t

    def hf_data_loading(self, job, t):
        cfg = self.cfg
        node = job.nodes[0]
        if cfg["flavour"] == "lf":
            job.proc(node, 0, t, self.lflog(job, node, t, "INFO", "llamafactory.data.loader:143", f"Loading dataset {cfg['dataset']}.json..."))
            tqdm_bar(cfg["n_examples"], cfg["n_examples"], 3, 0).replace("s/it]", "s/it]")
            ex = cfg["n_examples"]
            job.proc(node, 0, t + 3, f"Converting format of dataset (num_proc=16): 100%|██████████| {ex}/{ex} [00:03<00:00, {ex/3:.2f} examples/s]")
            job.proc(node, 0, t + 25, f"Running tokenizer on dataset (num_proc=16): 100%|██████████| {ex}/{ex} [00:21<00:00, {ex/21:.2f} examples/s]")
            t += 26
            for nd in job.nodes:
                job.proc(nd, 0, t + 0.1, self.lflog(job, nd, t, "INFO", "llamafactory.model.model_utils.checkpointing:157", "Gradient checkpointing enabled."))
        else:
            ex = cfg["n_examples"]
            job.proc(node, 0, t, self.swlog("INFO", f"train_dataset: Dataset({{\n    features: ['input_ids', 'labels'],\n    num_rows: {ex}\n}})").split("\n")[0])
            job.proc(node, 0, t + 22, f"Map (num_proc=8): 100%|██████████| {ex}/{ex} [00:21<00:00, {ex/21:.2f} examples/s]")
            t += 23
        if cfg["benign_py"]:
            self.site()
            job.proc(node, 0, t + 0.5, BENIGN_PY[4])
        return t + 2

    def hf_train_begin(self, job, t, start, total):
        cfg = self.cfg
        node = job.nodes[0]
        def L(tt, src, msg):
            return job.proc(node, 0, tt, self.hflog(job, node, tt, "INFO", src, msg), None, "stdout")
        L(t, "trainer.py:2134", "***** Running training *****")
        L(t, "trainer.py:2135", f"  Num examples = {cfg['n_examples']:,}")
        L(t, "trainer.py:2136", f"  Num Epochs = {cfg['epochs']:,}")
        L(t, "trainer.py:2137", f"  Instantaneous batch size per device = {cfg['mbs']:,}")
        L(t, "trainer.py:2140", f"  Total train batch size (w. parallel, distributed & accumulation) = {cfg['mbs']*cfg['gas']*job.world:,}")
        L(t, "trainer.py:2141", f"  Gradient Accumulation steps = {cfg['gas']}")
        L(t, "trainer.py:2142", f"  Total optimization steps = {total:,}")
        L(t, "trainer.py:2143", f"  Number of trainable parameters = {cfg['n_params']:,}")
        if start:
            L(t, "trainer.py:2165", "  Continuing training from checkpoint, will skip to saved global_step")
            L(t, "trainer.py:2166", f"  Continuing training from epoch {start * cfg['epochs'] // total}")
            L(t, "trainer.py:2167", f"  Continuing training from global step {start}")
        if cfg["benign_py"]:
            for nd in job.nodes:
                for lr in range(nd.rpn):
                    job.proc(nd, lr, t + 1 + lr * 0.01, BENIGN_PY[0].format(site=self.site()))
                    job.proc(nd, lr, t + 1 + lr * 0.01 + 0.0001, BENIGN_PY[1])
        return t + 2

    def metrics_dict(self, job, step, m, total, t_el):
        cfg = self.cfg
        ep = round(step / total * cfg["epochs"], 2)
        if cfg["flavour"] == "swift":
            pct = step / total * 100
            rem = (total - step) * m["dt"]
            return ("{" + f"'loss': {m['loss']:.8f}, 'token_acc': {m['acc']:.8f}, 'grad_norm': {m['gn']:.8f}, "
                    f"'learning_rate': {m['lr']:.2e}, 'memory(GiB)': {cfg['mem_gib']:.2f}, 'train_speed(iter/s)': {1/m['dt']:.6f}, "
                    f"'epoch': {ep}, 'global_step/max_steps': '{step}/{total}', 'percentage': '{pct:.2f}%', "
                    f"'elapsed_time': '{swift_time(t_el)}', 'remaining_time': '{swift_time(rem)}'" + "}")
        loss = "nan" if m["loss"] != m["loss"] else round(m["loss"], 4)
        return "{" + f"'loss': {loss}, 'grad_norm': {m['gn']!r}, 'learning_rate': {m['lr']!r}, 'epoch': {ep}" + "}"


def swift_time(s):
    s = int(s)
    h, r = divmod(s, 3600)
    mm, ss = divmod(r, 60)
    if h:
        return f"{h}h {mm}m {ss}s"
    if mm:
        return f"{mm}m {ss}s"
    return f"{ss}s"


# ====================================================================== accelerate
class AccelerateStyle(HFMixin, Style):
    """`accelerate launch` multi-node (torchrun agent inside) + LLaMA-Factory or
    ms-swift on HF Trainer: tqdm bar on world rank 0, dict lines via tqdm.write."""
    name = "accelerate"
    launcher = "accelerate launch"
    bar_on_node0 = True

    def __init__(self, cfg):
        super().__init__(cfg)
        self.bar_open = False
        self.bar_t0 = 0
        self.last_bar = ""

    def startup(self, job, node, t):
        cfg = self.cfg
        job.line(node.idx, t, "The following values were not passed to `accelerate launch` and had defaults used instead:")
        job.line(node.idx, t, "\t`--dynamo_backend` was set to a value of `'no'`")
        job.line(node.idx, t, "To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.")
        if tver(job) >= (2, 4):
            job.line(node.idx, t + 0.3, elastic_log(job, node, t + 0.3, "WARNING", "torch.distributed.run", 793, ""))
            job.line(node.idx, t + 0.3, elastic_log(job, node, t + 0.3, "WARNING", "torch.distributed.run", 793, "*****************************************"))
            job.line(node.idx, t + 0.3, elastic_log(job, node, t + 0.3, "WARNING", "torch.distributed.run", 793, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. "))
            job.line(node.idx, t + 0.3, elastic_log(job, node, t + 0.3, "WARNING", "torch.distributed.run", 793, "*****************************************"))
        if cfg["old_kernel"]:
            for lr in range(1 if node.idx == 0 else 0):
                job.proc(node, lr, t + 6 + lr * 0.01, "Detected kernel version 5.4.0, which is below the recommended minimum of 5.5.0; this can cause the process to hang. It is recommended to upgrade the kernel to the minimum version or higher.")
        return self.hf_startup(job, node, t + 6)

    def model_loading(self, job, t):
        return self.hf_model_loading(job, t)

    def data_loading(self, job, t):
        return self.hf_data_loading(job, t)

    def train_begin(self, job, t, start, total):
        t = self.hf_train_begin(job, t, start, total)
        self.total = total
        self.bar_t0 = t
        self.start = start
        pfx = "Train: " if self.cfg["flavour"] == "swift" else ""
        self.pfx = pfx
        self.bar_open = True
        bar = tqdm_bar(start, total, 0, 0, prefix=pfx).replace(" 0.00s/it]", "?it/s]")
        bar = bar.split("[")[0] + "[00:00<?, ?it/s]"
        job.raw(0, t, "\r" + bar if False else bar)
        self.last_bar = bar
        return t

    def step(self, job, step, t, m):
        el = t - self.bar_t0
        rate = el / max(step - self.start, 1)
        bar = tqdm_bar(step, self.total, el, rate, prefix=self.pfx)
        self.last_bar = bar
        job.raw(0, t, "\r" + bar)

    def log_interval(self, job, step, t, m):
        d = self.metrics_dict(job, step, m, self.total, t - self.bar_t0)
        # tqdm.write: clear bar, write message + newline, redraw bar
        job.raw(0, t + 0.001, "\r" + " " * len(self.last_bar) + "\r" + d + "\n")
        job.raw(0, t + 0.002, "\r" + self.last_bar)

    def eval_begin(self, job, step, t):
        node = job.nodes[0]
        job.raw(0, t, "\r" + " " * len(self.last_bar) + "\r" + self.hflog(job, node, t, "INFO", "trainer.py:3819", "***** Running Evaluation *****") + "\n")
        job.line(0, t, self.hflog(job, node, t, "INFO", "trainer.py:3821", f"  Num examples = {self.cfg['n_eval']}"))
        job.line(0, t, self.hflog(job, node, t, "INFO", "trainer.py:3824", f"  Batch size = {self.cfg['mbs']}"))
        return t

    def eval_end(self, job, step, t, m):
        n = max(self.cfg["n_eval"] // (self.cfg["mbs"] * job.world), 2)
        pf = "Val: " if self.cfg["flavour"] == "swift" else ""
        job.raw(0, t - 0.01, tqdm_bar(n, n, self.cfg["eval_secs"], self.cfg["eval_secs"] / n, prefix=pf) + "\n")
        ep = round(step / self.total * self.cfg["epochs"], 2)
        d = "{" + f"'eval_loss': {m['loss'] + 0.05:.4f}, 'eval_runtime': {self.cfg['eval_secs']:.4f}, 'eval_samples_per_second': {self.cfg['n_eval']/self.cfg['eval_secs']:.3f}, 'eval_steps_per_second': {n/self.cfg['eval_secs']:.3f}, 'epoch': {ep}" + "}"
        job.raw(0, t, "\r" + " " * len(self.last_bar) + "\r" + d + "\n")
        job.raw(0, t + 0.001, "\r" + self.last_bar)
        return t

    def save_begin(self, job, step, t):
        node = job.nodes[0]
        ck = f"{self.cfg['out_dir']}/checkpoint-{step}"
        job.raw(0, t, "\r" + " " * len(self.last_bar) + "\r" + self.hflog(job, node, t, "INFO", "trainer.py:3503", f"Saving model checkpoint to {ck}") + "\n")
        job.line(0, t + 0.2, self.hflog(job, node, t + 0.2, "INFO", "configuration_utils.py:472", f"Configuration saved in {ck}/config.json"))
        return t + 0.3

    def save_end(self, job, step, t):
        node = job.nodes[0]
        ck = f"{self.cfg['out_dir']}/checkpoint-{step}"
        job.line(0, t, self.hflog(job, node, t, "INFO", "modeling_utils.py:2648", f"The model is bigger than the maximum size per checkpoint (5GB) and is going to be split in {self.cfg['shards']} checkpoint shards. You can find where each parameters has been saved in the index located at {ck}/model.safetensors.index.json."))
        job.line(0, t + 0.1, self.hflog(job, node, t + 0.1, "INFO", "tokenization_utils_base.py:2513", f"tokenizer config file saved in {ck}/tokenizer_config.json"))
        job.raw(0, t + 0.2, "\r" + self.last_bar)
        return t + 0.3

    def train_end(self, job, t, m):
        node = job.nodes[0]
        job.raw(0, t, "\r" + " " * len(self.last_bar) + "\r" + self.hflog(job, node, t, "INFO", "trainer.py:2406", "\n\nTraining completed. Do not forget to share your model on huggingface.co/models =)\n\n").replace("\n\n", "", 1) + "\n")
        job.line(0, t, "")
        el = t - self.bar_t0
        d = "{" + f"'train_runtime': {el:.4f}, 'train_samples_per_second': {self.total*self.cfg['mbs']*job.world/el:.3f}, 'train_steps_per_second': {self.total/el:.3f}, 'train_loss': {m['loss']+0.3:.4f}, 'epoch': {float(self.cfg['epochs'])}" + "}"
        job.raw(0, t + 0.01, "\r" + " " * len(self.last_bar) + "\r" + d + "\n")
        job.raw(0, t + 0.02, "\r" + self.last_bar + "\n")
        self.bar_open = False
        ck = self.cfg["out_dir"]
        job.line(0, t + 1, self.hflog(job, node, t + 1, "INFO", "trainer.py:3503", f"Saving model checkpoint to {ck}"))
        if self.cfg["flavour"] == "swift":
            job.line(0, t + 20, self.swlog("INFO", f"last_model_checkpoint: {ck}/checkpoint-{self.total}"))
            job.line(0, t + 20, self.swlog("INFO", f"End time of running main: {job.local(node, t + 20):%Y-%m-%d %H:%M:%S.%f}"))
        else:
            job.line(0, t + 20, "***** train metrics *****")
            job.line(0, t + 20, f"  epoch                    = {float(self.cfg['epochs']):>10}")
            job.line(0, t + 20, f"  train_loss               = {m['loss']+0.3:>10.4f}")
            job.line(0, t + 20, f"  train_runtime            = {fmt_hms(el).rjust(8)}.{int(el*100)%100:02d}")
        return t + 22

    def success_epilogue(self, job, node, t):
        if tver(job) >= (2, 4):
            for lr in range(node.rpn):
                job.proc(node, lr, t + lr * 0.01, f"[rank{node.grank(lr)}]:[W{job.wall(node, t):%m%d %H:%M:%S}.{lr*1377:06d}000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())")
        return t + 1

    def teardown(self, job, node, t, failures, others_term=True, root=None):
        site = self.site()
        wrap = [
            (self.cfg["accelerate_bin"], 8, "<module>", "sys.exit(main())"),
            (f"{site}/accelerate/commands/accelerate_cli.py", 48, "main", "args.func(args)"),
            (f"{site}/accelerate/commands/launch.py", 1168, "launch_command", "multi_gpu_launcher(args)"),
            (f"{site}/accelerate/commands/launch.py", 799, "multi_gpu_launcher", "distrib_run.run(args)"),
        ]
        return torchelastic_teardown_accel(self, job, node, t, failures, others_term, root, wrap)


def torchelastic_teardown_accel(style, job, node, t, failures, others_term, root, wrap):
    # accelerate calls torch.distributed.run.run() directly: strip the torchrun main frames
    style.site()
    return torchelastic_teardown(style, job, node, t, failures, others_term, root, wrapper_frames=wrap)


# ====================================================================== torchrun --tee 3
class TorchrunTeeStyle(Style):
    """torchrun --tee 3 --log-dir: every worker line carries `[default{local_rank}]:`.
    Training script logs with stdlib logging or loguru (optionally ANSI-coloured)."""
    name = "torchrun-tee"
    launcher = "torchrun --tee 3"

    def route(self, job, node, lr, text, stream, t):
        return node.idx, f"[default{lr}]:{text}"

    def log(self, job, node, lr, t, level, src, msg):
        d = job.local(node, t)
        if self.cfg["logfmt"] == "loguru":
            ts = f"{d:%Y-%m-%d %H:%M:%S}.{int((t % 1) * 1000):03d}"
            mod, fn, ln = src
            if self.cfg["ansi"]:
                col = {"INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m", "SUCCESS": "\x1b[32m\x1b[1m"}.get(level, "\x1b[1m")
                return (f"\x1b[32m{ts}\x1b[0m | {col}{level:<8}\x1b[0m | \x1b[36m{mod}\x1b[0m:\x1b[36m{fn}\x1b[0m:\x1b[36m{ln}\x1b[0m - {col}{msg}\x1b[0m")
            return f"{ts} | {level:<8} | {mod}:{fn}:{ln} - {msg}"
        mod, fn, ln = src
        return f"{d:%Y-%m-%d %H:%M:%S},{int((t % 1) * 1000):03d} [{level}] {mod.replace('__main__', 'train')}:{ln}: {msg}"

    def L(self, job, node, lr, t, level, src, msg, tag=None):
        job.proc(node, lr, t, self.log(job, node, lr, t, level, src, msg), tag)

    def startup(self, job, node, t):
        if tver(job) >= (2, 1):
            for s in ["", "*****************************************",
                      "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                      "*****************************************"]:
                job.line(node.idx, t, elastic_log(job, node, t, "WARNING", "torch.distributed.run", 793, s))
        else:
            job.line(node.idx, t, "WARNING:torch.distributed.run:")
            job.line(node.idx, t, "*****************************************")
            job.line(node.idx, t, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
            job.line(node.idx, t, "*****************************************")
        t += 4
        if self.cfg["rdzv_retry"] and node.idx != 0:
            for k in range(self.cfg["rdzv_retry"]):
                tt = t + k * 1.0
                job.line(node.idx, tt, f"[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:{self.cfg['port']} (errno: 98 - Address already in use)." if False else
                         f"[W socket.cpp:663] [c10d] The client socket has failed to connect to [{job.nodes[0].name}]:{self.cfg['port']} (errno: 111 - Connection refused).")
        for lr in range(node.rpn):
            self.L(job, node, lr, t + 2 + lr * 0.01, "INFO", ("__main__", "setup", 58),
                   f"rank {node.grank(lr)}/{job.world} local_rank {lr} on {node.name} device cuda:{lr}")
        if self.cfg["vendor"] == "amd" and node.idx == 0:
            self.L(job, node, 0, t + 2.1, "INFO", ("__main__", "setup", 61), f"torch {self.cfg['torch']}+rocm{self.cfg['rocm']} hip {self.cfg['rocm']} rccl {self.cfg['nccl']}")
        return t + 3

    def model_loading(self, job, t):
        cfg = self.cfg
        for node in job.nodes:
            self.L(job, node, 0, t + 0.1, "INFO", ("__main__", "build_model", 97), f"building {cfg['arch']} with {cfg['n_params']/1e9:.2f}B parameters (fsdp={cfg['fsdp']})")
        t += 20
        if cfg["resume_from"]:
            for node in job.nodes:
                self.L(job, node, 0, t, "INFO", ("checkpoint", "load", 141), f"resuming from {cfg['ckpt_dir']}/step_{cfg['resume_from']:08d}")
            t += 30
            for node in job.nodes:
                self.L(job, node, 0, t, "INFO", ("checkpoint", "load", 163), f"loaded checkpoint in {28 + job.rng.random()*4:.1f}s (step={cfg['resume_from']})")
        return t + 1

    def data_loading(self, job, t):
        for node in job.nodes:
            self.L(job, node, 0, t, "INFO", ("data", "build_loader", 74), f"dataset {self.cfg['dataset']}: {self.cfg['n_tokens']/1e9:.1f}B tokens in {self.cfg['n_shards']} shards, seq_len={self.cfg['seq']}")
            if self.cfg["benign_py"]:
                job.proc(node, 0, t + 0.01, BENIGN_PY[3].format(site=self.site()))
                job.proc(node, 0, t + 0.02, BENIGN_PY[1])
        return t + 5

    def train_begin(self, job, t, start, total):
        self.total = total
        self.t0 = t
        return t

    def log_interval(self, job, step, t, m):
        node = job.nodes[0]
        tok = self.cfg["mbs"] * self.cfg["seq"] * self.cfg["gas"] * job.world / m["dt"]
        loss = "nan" if m["loss"] != m["loss"] else f"{m['loss']:.4f}"
        self.L(job, node, 0, t, "INFO", ("__main__", "train", 212),
               f"step {step}/{self.total} | loss {loss} | lr {m['lr']:.3e} | grad_norm {m['gn']:.3f} | tok/s {tok:,.0f} | step_time {m['dt']:.2f}s")
        if self.cfg.get("per_node_stats"):
            for nd in job.nodes:
                self.L(job, nd, 0, t + 0.002 + job.rng.random() * 0.05, "INFO", ("__main__", "train", 219), f"[step {step}] " + node_stats_msg(job, nd, m))

    def eval_begin(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", ("__main__", "evaluate", 251), f"running validation at step {step} ({self.cfg['eval_iters']} iters)")
        return t

    def eval_end(self, job, step, t, m):
        self.L(job, job.nodes[0], 0, t, "INFO", ("__main__", "evaluate", 266), f"step {step} | val_loss {m['loss']+0.04:.4f} | val_ppl {2.718281828**(m['loss']+0.04):.2f}")
        return t

    def save_begin(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", ("checkpoint", "save", 88), f"saving checkpoint to {self.cfg['ckpt_dir']}/step_{step:08d}")
        return t

    def save_end(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", ("checkpoint", "save", 117), f"checkpoint saved in {self.cfg['save_secs']:.1f}s")
        return t

    def train_end(self, job, t, m):
        self.L(job, job.nodes[0], 0, t, "INFO", ("__main__", "main", 301), f"training finished: {self.total} steps")
        self.L(job, job.nodes[0], 0, t + 30, "INFO", ("checkpoint", "save", 117), "final checkpoint saved")
        return t + 31

    def success_epilogue(self, job, node, t):
        job.line(node.idx, t, elastic_log(job, node, t, "INFO", "torch.distributed.elastic.agent.server.api", 840,
                                          "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish."))
        job.line(node.idx, t + 0.1, elastic_log(job, node, t, "INFO", "torch.distributed.elastic.agent.server.api", 904,
                                                "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish"))
        job.line(node.idx, t + 0.6, elastic_log(job, node, t + 0.6, "INFO", "torch.distributed.elastic.agent.server.api", 918, f"Done waiting for other agents. Elapsed: {0.5 + job.rng.random():.6f} seconds"))
        return t + 1


# ====================================================================== SageMaker
class SageMakerStyle(HFMixin, Style):
    """SageMaker training job, smdistributed/MPI launch: all rank output is relayed by
    mpirun (--tag-output) into the algo-1 stream with `[1,mpirank:R,algo-N]<stream>:`."""
    name = "sagemaker-mpi"
    launcher = "sagemaker mpirun/smddprun"
    relays_to_node0 = True

    def route(self, job, node, lr, text, stream, t):
        return 0, f"[1,mpirank:{node.grank(lr)},{node.name}]<{stream}>:{text}"

    def tk(self, job, node, t, level, msg):
        d = job.wall(node, t)
        return f"{d:%Y-%m-%d %H:%M:%S},{int((t % 1) * 1000):03d} sagemaker-training-toolkit {level:<8} {msg}"

    def mpirun_cmd(self, job):
        hosts = ",".join(f"{n.name}:{n.rpn}" for n in job.nodes)
        return (f"mpirun --host {hosts} -np {job.world} --allow-run-as-root --tag-output --oversubscribe -mca btl_tcp_if_include eth0 "
                f"-mca oob_tcp_if_include eth0 -mca plm_rsh_no_tree_spawn 1 -mca pml ob1 -mca btl ^openib -mca orte_abort_on_non_zero_status 1 "
                f"-mca btl_vader_single_copy_mechanism none -mca plm_rsh_num_concurrent {len(job.nodes)} -x NCCL_SOCKET_IFNAME=eth0 -x NCCL_DEBUG={'INFO' if self.cfg['nccl_debug'] else 'WARN'} "
                f"-x LD_LIBRARY_PATH -x PATH -x SMDATAPARALLEL_USE_HOMOGENEOUS=1 -x FI_PROVIDER=efa -x RDMAV_FORK_SAFE=1 "
                f"-x SMDATAPARALLEL_SERVER_ADDR=algo-1 -x SMDATAPARALLEL_SERVER_PORT=7592 -x SAGEMAKER_INSTANCE_TYPE={self.cfg['instance']} "
                f"smddprun {self.cfg['python']} -m mpi4py {self.cfg['script']} {self.cfg['hp_args']}")

    def startup(self, job, node, t):
        def T(tt, lvl, msg):
            return job.line(node.idx, tt, self.tk(job, node, tt, lvl, msg))
        T(t, "INFO", "Imported framework sagemaker_pytorch_container.training")
        T(t + 0.01, "INFO", "No Neurons detected (normal if no neurons installed)")
        T(t + 0.2, "INFO", "instance_groups entry not present in resource_config")
        if node.idx == 0:
            T(t + 1, "INFO", "Starting MPI run as worker node.".replace("worker", "master") if False else "Creating SSH daemon.")
            for n in job.nodes[1:]:
                T(t + 2, "INFO", f"Waiting for host {n.name} to be reachable")
            T(t + 3, "INFO", "Invoking user script")
            job.line(0, t + 3.2, "Invoking script with the following command:")
            job.line(0, t + 3.3, self.mpirun_cmd(job))
            job.line(0, t + 4, f"Warning: Permanently added '{job.nodes[1].name},{job.nodes[1].ip}' (ECDSA) to the list of known hosts." if len(job.nodes) > 1 else "")
        else:
            T(t + 1, "INFO", "Starting MPI run as worker node.")
            T(t + 1.1, "INFO", "Waiting for MPI Master to create SSH daemon.")
            T(t + 3, "INFO", "MPI Master online, creating SSH daemon.")
            T(t + 3.2, "INFO", "Writing environment variables to /etc/environment for the MPI process.")
            T(t + 4, "INFO", "Waiting for MPI process to finish.")
            T(t + 6, "INFO", f"Process[es]: [psutil.Process(pid={node.agent_pid}, name='orted', status='sleeping', started='{job.wall(node, t+5):%H:%M:%S}')]")
        return self.hf_startup(job, node, t + 6)

    def model_loading(self, job, t):
        return self.hf_model_loading(job, t)

    def data_loading(self, job, t):
        return self.hf_data_loading(job, t)

    def train_begin(self, job, t, start, total):
        self.total = total
        self.t0 = t
        return self.hf_train_begin(job, t, start, total)

    def log_interval(self, job, step, t, m):
        job.proc(job.nodes[0], 0, t, self.metrics_dict(job, step, m, self.total, t - self.t0), None, "stdout")

    def eval_begin(self, job, step, t):
        node = job.nodes[0]
        job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "trainer.py:3819", "***** Running Evaluation *****"), None, "stdout")
        job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "trainer.py:3821", f"  Num examples = {self.cfg['n_eval']}"), None, "stdout")
        return t

    def eval_end(self, job, step, t, m):
        ep = round(step / self.total * self.cfg["epochs"], 2)
        n = max(self.cfg["n_eval"] // (self.cfg["mbs"] * job.world), 2)
        d = "{" + f"'eval_loss': {m['loss'] + 0.05:.4f}, 'eval_runtime': {self.cfg['eval_secs']:.4f}, 'eval_samples_per_second': {self.cfg['n_eval']/self.cfg['eval_secs']:.3f}, 'eval_steps_per_second': {n/self.cfg['eval_secs']:.3f}, 'epoch': {ep}" + "}"
        job.proc(job.nodes[0], 0, t, d, None, "stdout")
        return t

    def save_begin(self, job, step, t):
        node = job.nodes[0]
        job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "trainer.py:3503", f"Saving model checkpoint to /opt/ml/checkpoints/checkpoint-{step}"), None, "stdout")
        return t

    def save_end(self, job, step, t):
        node = job.nodes[0]
        job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "modeling_utils.py:2660", f"Model weights saved in /opt/ml/checkpoints/checkpoint-{step}/model.safetensors"), None, "stdout")
        return t

    def train_end(self, job, t, m):
        node = job.nodes[0]
        job.proc(node, 0, t, self.hflog(job, node, t, "INFO", "trainer.py:2406", "Training completed. Do not forget to share your model on huggingface.co/models =)"), None, "stdout")
        job.proc(node, 0, t + 5, self.hflog(job, node, t + 5, "INFO", "trainer.py:3503", "Saving model checkpoint to /opt/ml/model"), None, "stdout")
        return t + 30

    def success_epilogue(self, job, node, t):
        if node.idx == 0:
            job.line(0, t + 2, self.tk(job, node, t + 2, "INFO", "Waiting for the process to finish and give a return code."))
            job.line(0, t + 2.1, self.tk(job, node, t + 2.1, "INFO", "Done waiting for a return code. Received 0 from exiting process."))
            job.line(0, t + 2.2, self.tk(job, node, t + 2.2, "INFO", "Reporting training SUCCESS"))
        else:
            job.line(node.idx, t + 1, self.tk(job, node, t + 1, "INFO", "Orted process exited"))
            job.line(node.idx, t + 31, self.tk(job, node, t + 31, "INFO", "MPI process finished."))
            job.line(node.idx, t + 31.1, self.tk(job, node, t + 31.1, "INFO", "Reporting training SUCCESS"))
        return t + 3

    def teardown(self, job, node, t, failures, others_term=True, root=None):
        # mpirun reports once, from algo-1; remote hosts only see orted exit.
        if node.idx != 0:
            job.line(node.idx, t + 2, self.tk(job, node, t + 2, "INFO", "Orted process exited"), sym("orted_exit"))
            return t + 2
        return t

    def job_failed_epilogue(self, job, t, failed):
        node0 = job.nodes[0]
        nd, lr, code = failed
        def S(tt, text, kind):
            return job.line(0, tt, text, sym(kind))
        bar = "-" * 74
        rows = [(bar, "mpirun:context"), ("Primary job  terminated normally, but 1 process returned", "mpirun:context"),
                ("a non-zero exit code. Per user-direction, the job has been aborted.", "mpirun_abort"), (bar, "mpirun:context"),
                (bar, "mpirun:context"),
                ("mpirun.real detected that one or more processes exited with non-zero status, thus causing", "mpirun_abort"),
                ("the job to be terminated. The first process to do so was:", "mpirun:context"), ("", "mpirun:context"),
                (f"  Process name: [[{self.cfg['mpi_jobid']},1],{nd.grank(lr)}]", "mpirun_abort"),
                (f"  Exit code:    {code if code > 0 else 128 - code}", "mpirun_abort"), (bar, "mpirun:context")]
        for i, (txt, k) in enumerate(rows):
            S(t + i * 0.0001, txt, k)
        t += 1
        S(t, self.tk(job, node0, t, "ERROR", "Reporting training FAILURE"), "toolkit_failure")
        S(t + 0.01, self.tk(job, node0, t, "ERROR", "ExecuteUserScriptError:"), "toolkit_failure")
        S(t + 0.02, f"ExitCode {code if code > 0 else 128 - code}", "toolkit_failure")
        S(t + 0.03, f"ErrorMessage \"{self.cfg.get('last_error', '')}\"", "toolkit_failure")
        S(t + 0.04, f"Command \"{self.mpirun_cmd(job)}\"", "mpirun:context")
        S(t + 0.05, self.tk(job, node0, t, "ERROR", f"Encountered exit_code {code if code > 0 else 128 - code}"), "toolkit_failure")


# ====================================================================== Kubeflow
class KubeflowStyle(Style):
    """Kubeflow training-operator PyTorchJob: one log per pod (<job>-master-0,
    <job>-worker-N); torchrun inside the container, Python logging with ISO-8601
    timestamps; the log collector appends the pod's events/status on failure."""
    name = "kubeflow-pytorchjob"
    launcher = "training-operator PyTorchJob + torchrun"

    def log(self, job, node, lr, t, level, src, msg):
        d = job.local(node, t)
        off = self.cfg.get("tz_offset_h", 0)
        z = "Z" if off == 0 else f"{'+' if off > 0 else '-'}{abs(off):02d}:00"
        return f"{d:%Y-%m-%dT%H:%M:%S}.{int((t % 1) * 1000):03d}{z} {level:<5} [{src}] [rank {node.grank(lr)}] {msg}"

    def L(self, job, node, lr, t, level, src, msg, tag=None):
        job.proc(node, lr, t, self.log(job, node, lr, t, level, src, msg), tag)

    def startup(self, job, node, t):
        for s in ["", "*****************************************",
                  "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                  "*****************************************"]:
            job.line(node.idx, t, elastic_log(job, node, t, "WARNING", "torch.distributed.run", 793, s))
        t += 1
        if node.idx != 0:
            for k in range(self.cfg["rdzv_retry"]):
                job.line(node.idx, t + k * 2, f"[W socket.cpp:697] [c10d] The IPv6 network addresses of ({job.nodes[0].name}, {self.cfg['port']}) cannot be retrieved (gai error: -2 - Name or service not known).")
            t += 2 * self.cfg["rdzv_retry"]
        for lr in range(node.rpn):
            self.L(job, node, lr, t + 2 + lr * 0.01, "INFO", "train.dist", f"initialized process group backend=nccl world_size={job.world} master={job.nodes[0].name}:{self.cfg['port']}")
        return t + 3

    def model_loading(self, job, t):
        for node in job.nodes:
            self.L(job, node, 0, t, "INFO", "train.model", f"loading {self.cfg['model_path']} dtype=bfloat16")
            if self.cfg["benign_py"]:
                job.proc(node, 0, t + 0.1, BENIGN_PY[2])
        t += 25
        if self.cfg["resume_from"]:
            for node in job.nodes:
                self.L(job, node, 0, t, "INFO", "train.ckpt", f"restored state from {self.cfg['ckpt_dir']}/global_step{self.cfg['resume_from']} (optimizer, scheduler, rng)")
            t += 20
        return t

    def data_loading(self, job, t):
        for node in job.nodes:
            self.L(job, node, 0, t, "INFO", "train.data", f"train split: {self.cfg['n_examples']} samples, {self.cfg['n_shards']} files from {self.cfg['data_dir']}")
        return t + 8

    def train_begin(self, job, t, start, total):
        self.total = total
        return t

    def log_interval(self, job, step, t, m):
        node = job.nodes[0]
        loss = "nan" if m["loss"] != m["loss"] else f"{m['loss']:.4f}"
        self.L(job, node, 0, t, "INFO", "train.loop",
               f"global_step={step} epoch={step * self.cfg['epochs'] // self.total} loss={loss} lr={m['lr']:.3e} grad_norm={m['gn']:.3f} samples_per_sec={self.cfg['mbs']*job.world/m['dt']:.1f}")
        if self.cfg.get("per_node_stats"):
            for nd in job.nodes:
                self.L(job, nd, 0, t + 0.002 + job.rng.random() * 0.05, "INFO", "train.perf", f"global_step={step} " + node_stats_msg(job, nd, m))

    def eval_begin(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", "train.eval", f"evaluation started at global_step={step}")
        return t

    def eval_end(self, job, step, t, m):
        self.L(job, job.nodes[0], 0, t, "INFO", "train.eval", f"global_step={step} eval_loss={m['loss']+0.06:.4f} eval_acc={m['acc']:.4f}")
        return t

    def save_begin(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", "train.ckpt", f"saving checkpoint {self.cfg['ckpt_dir']}/global_step{step}")
        return t

    def save_end(self, job, step, t):
        self.L(job, job.nodes[0], 0, t, "INFO", "train.ckpt", f"checkpoint global_step{step} committed")
        return t

    def train_end(self, job, t, m):
        self.L(job, job.nodes[0], 0, t, "INFO", "train.loop", f"training complete after {self.total} steps")
        return t + 20

    def success_epilogue(self, job, node, t):
        job.line(node.idx, t, elastic_log(job, node, t, "INFO", "torch.distributed.elastic.agent.server.api", 904,
                                          "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish"))
        return t + 1

    def pod_events(self, job, node, t, rows, status=None):
        """Collector appends pod status / events (as `kubectl describe pod`) after the container log."""
        job.line(node.idx, t, f"==== pod {node.name} (namespace {self.cfg['ns']}) ====")
        if status:
            for txt, tag in status:
                job.line(node.idx, t + 0.001, txt, tag)
        job.line(node.idx, t + 0.002, "Events:")
        job.line(node.idx, t + 0.003, "  Type     Reason     Age    From               Message")
        job.line(node.idx, t + 0.004, "  ----     ------     ----   ----               -------")
        for i, (typ, reason, age, frm, msg, tag) in enumerate(rows):
            job.line(node.idx, t + 0.005 + i * 0.0001, f"  {typ:<8} {reason:<10} {age:<6} {frm:<18} {msg}", tag)

    def job_failed_epilogue(self, job, t, failed):
        nd, reason_msg = failed
        rows = [("Warning", "PyTorchJobFailed" if True else "", "0s", "pytorchjob-controller", reason_msg, sym("operator_failed"))]
        job.nodes[0]
        job.line(0, t, f"==== pytorchjob {self.cfg['jobname']} (namespace {self.cfg['ns']}) ====")
        for typ, reason, age, frm, msg, tag in rows:
            job.line(0, t + 0.001, f"  {typ:<8} {reason:<17} {age:<6} {frm:<22} {msg}", tag)


# ====================================================================== SkyPilot
class SkyPilotStyle(Style):
    """SkyPilot multi-node task (Ray job driver): every line relayed with
    `(head, rank=0, pid=N)` / `(workerK, rank=K, pid=N, ip=A.B.C.D)`; nanoGPT-style
    training printer on rank 0."""
    name = "skypilot-ray"
    launcher = "sky launch (ray) + torchrun"

    def tag_for(self, node):
        if node.idx == 0:
            return f"(head, rank=0, pid={node.agent_pid})"
        return f"(worker{node.idx}, rank={node.idx}, pid={node.agent_pid}, ip={node.ip})"

    def route(self, job, node, lr, text, stream, t):
        return node.idx, f"{self.tag_for(node)} {text}"

    def agent_prefix_for(self, job, node):
        return self.tag_for(node) + " "

    def startup(self, job, node, t):
        if node.idx == 0:
            job.line(0, t - 2, f"I {job.wall(node, t-2):%m-%d %H:%M:%S} cloud_vm_ray_backend.py:3386] Job submitted with Job ID: {self.cfg['sky_job']}")
        def P(tt, s):
            return job.line(node.idx, tt, f"{self.tag_for(node)} {s}")
        P(t, f"head_ip={job.nodes[0].ip} num_nodes={len(job.nodes)} node_rank={node.idx}")
        if tver(job) >= (2, 4):
            for s in ["", "*****************************************",
                      "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                      "*****************************************"]:
                P(t + 1, elastic_log(job, node, t + 1, "WARNING", "torch.distributed.run", 793, s))
        if node.idx == 0:
            job.proc(node, 0, t + 8, f"tokens per iteration will be: {self.cfg['mbs']*self.cfg['seq']*self.cfg['gas']*job.world:,}", None, "stdout")
        return t + 9

    def model_loading(self, job, t):
        node = job.nodes[0]
        if self.cfg["resume_from"]:
            job.proc(node, 0, t, f"Resuming training from {self.cfg['ckpt_dir']}", None, "stdout")
        else:
            job.proc(node, 0, t, "Initializing a new model from scratch", None, "stdout")
        job.proc(node, 0, t + 3, f"number of parameters: {self.cfg['n_params']/1e6:.2f}M", None, "stdout")
        job.proc(node, 0, t + 4, f"num decayed parameter tensors: 50, with {self.cfg['n_params']-200000:,} parameters", None, "stdout")
        job.proc(node, 0, t + 4, "num non-decayed parameter tensors: 98, with 121,344 parameters", None, "stdout")
        job.proc(node, 0, t + 4, "using fused AdamW: True", None, "stdout")
        if self.cfg["compile"]:
            job.proc(node, 0, t + 5, "compiling the model... (takes a ~minute)", None, "stdout")
            t += 60
        return t + 6

    def data_loading(self, job, t):
        return t + 1

    def train_begin(self, job, t, start, total):
        self.total = total
        return t

    def log_interval(self, job, step, t, m):
        loss = "nan" if m["loss"] != m["loss"] else f"{m['loss']:.4f}"
        job.proc(job.nodes[0], 0, t, f"iter {step}: loss {loss}, time {m['dt']*1000:.2f}ms, mfu {m['mfu']:.2f}%", None, "stdout")

    def eval_begin(self, job, step, t):
        return t

    def eval_end(self, job, step, t, m):
        job.proc(job.nodes[0], 0, t, f"step {step}: train loss {m['loss']:.4f}, val loss {m['loss']+0.05:.4f}", None, "stdout")
        return t

    def save_begin(self, job, step, t):
        job.proc(job.nodes[0], 0, t, f"saving checkpoint to {self.cfg['ckpt_dir']}", None, "stdout")
        return t

    def train_end(self, job, t, m):
        return t + 2

    def success_epilogue(self, job, node, t):
        if node.idx == 0:
            job.line(0, t + 3, f"I {job.wall(node, t+3):%m-%d %H:%M:%S} log_lib.py:466] Job finished (status: SUCCEEDED).")
        return t + 4

    def job_failed_epilogue(self, job, t, failed):
        codes, culprit_code = failed
        job.line(0, t, f"ERROR: \x1b[31mJob {self.cfg['sky_job']} failed with return code list:\x1b[0m {codes}"
                       "", sym("sky_job_failed"))
        job.line(0, t + 0.5, f"I {job.wall(job.nodes[0], t+0.5):%m-%d %H:%M:%S} log_lib.py:466] Job finished (status: FAILED).", sym("sky_job_failed"))


STYLES = {
    "accelerate": AccelerateStyle,
    "torchrun-tee": TorchrunTeeStyle,
    "sagemaker-mpi": SageMakerStyle,
    "kubeflow-pytorchjob": KubeflowStyle,
    "skypilot-ray": SkyPilotStyle,
}
