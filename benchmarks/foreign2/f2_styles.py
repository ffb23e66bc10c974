"""Framework / launcher renderers for the foreign2 generator.

A style renders what the processes of one training framework, started by one launcher,
print on each node: start-up, distributed init, model and data loading, progress,
evaluation, checkpointing, a clean finish, and how a rank's uncaught exception and the
launcher's teardown look.  Fault kinds (f2_faults.py) compose these pieces.

Message texts come from the frameworks' public sources (PyTorch Lightning, NeMo,
MosaicML Composer / llm-foundry, ColossalAI, verl / Ray, Slurm, NCCL, PyTorch) or
from public failure reports; see README.md.
"""
from __future__ import annotations

import math

from f2_base import (
    SYM,
    Frame,
    Nccl,
    NodeLog,
    TorchFlavour,
    dt,
    elastic_prefix,
    hms,
    human_params,
    interleave,
    slurmstepd_cancel,
    srun_task_msg,
    torchrun_failure,
    torchrun_omp_banner,
    traceback_lines,
    ts_iso,
    ts_logging,
    ts_plain,
    ts_rich,
    ts_syslog,
)

BAR = " ▏▎▍▌▋▊▉█"


def tqdm_bar(frac: float, width: int = 10) -> str:
    frac = min(max(frac, 0.0), 1.0)
    full = int(frac * width)
    rem = frac * width - full
    s = "█" * full
    if full < width:
        s += BAR[int(rem * 8)] if rem > 0 else " "
        s += " " * (width - full - 1)
    return s


def tqdm_line(desc: str, n: int, total: int, elapsed: float, rate: float, postfix: str = "", sep: str = ": ",
              noinv: bool = False) -> str:
    pct = int(100 * n / total) if total else 0
    rem = (total - n) / rate if rate > 0 else 0
    r = ("%.2fit/s" % rate) if (rate >= 1 or noinv) else ("%.2fs/it" % (1 / rate if rate else 0))
    post = (", " + postfix) if postfix else ""
    return "%s%s%3d%%|%s| %d/%d [%s<%s, %s%s]" % (desc, sep, pct, tqdm_bar(n / total if total else 0), n, total,
                                                 hms(elapsed), hms(rem), r, post)


class Style:
    name = "base"
    framework = "base"
    launcher = "srun"
    script = "train.py"
    progress_everywhere = False     # does every node's local rank 0 print progress?

    def __init__(self, job):
        self.job = job
        self.cfg = job.cfg
        self.rng = job.rng
        self.tf: TorchFlavour = job.tf

    # ----------------------------------------------------------------- plumbing
    def grank(self, node: NodeLog, lr: int) -> int:
        return node.idx * self.cfg.gpn + lr

    def decorate(self, node: NodeLog, t: float, src, text: str) -> str:
        if src != "L" and src != "S" and isinstance(src, int) and self.launcher == "srun" and self.cfg.srun_label:
            w = len(str(self.cfg.world - 1))
            return "%*d: %s" % (w, self.grank(node, src), text)
        return text

    def say(self, node: NodeLog, t: float, src, text: str, role=None, kind=None):
        node.now = t
        for line in text.split("\n"):
            node.put(self.decorate(node, t, src, line), role, kind)

    def resume_announce(self, t: float):
        pass

    def say_tagged(self, node: NodeLog, t: float, src, pairs, role):
        """pairs: (text, kind) — kind None means untagged."""
        for text, kind in pairs:
            self.say(node, t, src, text, role if kind else None, kind)

    def rank_block(self, node: NodeLog, t: float, per_rank: dict):
        """Write per-rank line lists interleaved like concurrent processes do."""
        blocks = [[(lr, x) for x in lines] for lr, lines in per_rank.items() if lines]
        for lr, x in interleave(self.rng, blocks):
            self.say(node, t, lr, x)

    def nodes(self):
        return self.job.nodes

    def head(self) -> NodeLog:
        return self.job.nodes[0]

    def local_ranks(self):
        return range(self.cfg.gpn)

    # ----------------------------------------------------------------- shared pieces
    def nccl_init(self, node: NodeLog, t: float, lr: int) -> list[str]:
        c = self.cfg
        if c.nccl_debug != "INFO":
            return []
        return Nccl(self.job, node, lr).init_lines(self.grank(node, lr), c.world, c.n_nodes, c.gpn, self.job.comm_id,
                                                   verbose=(c.n_nodes <= 16 or node.idx < 2))

    def torch_warnings(self, node: NodeLog, t: float, lr: int) -> list[str]:
        c = self.cfg
        out = []
        lib = c.libdir
        if c.warn_import:
            out += [x % {"lib": lib} for x in c.warn_import]
        return out

    def extra_lines(self, node, t, lr, phase) -> list[str]:
        """Benign per-rank output printed by every process at a given moment
        (import, first training step, first eval, first checkpoint)."""
        c, lib = self.cfg, self.cfg.libdir
        out = []
        if phase == "import" and c.warn_typed_storage:
            pass
        if phase == "first_step":
            if c.warn_reentrant:
                out += ["%s/torch/utils/checkpoint.py:%d: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants." % (lib, 464 if self.tf.ver < (2, 4) else 1399),
                        "  warnings.warn("]
            if c.hf_model_based:
                out += ["`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`."]
            if c.dl_workers > c.cpus // c.gpn:
                out += ["%s/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will create %d worker processes in total. Our suggested max number of worker in current system is %d, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary." % (lib, c.dl_workers, max(1, c.cpus // c.gpn)),
                        "  warnings.warn("]
        if phase == "first_ckpt":
            if c.warn_typed_storage:
                out += ["%s/torch/_utils.py:831: UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()" % lib,
                        "  return self.fget.__get__(instance, owner)()"]
            if self.tf.ver >= (2, 5) and c.warn_pgdev:
                out += ["%s/torch/distributed/distributed_c10d.py:%d: FutureWarning: `_get_pg_default_device` will be deprecated, it only stays for backward-compatiblity reason. If you need to find a device for object collectives, please use `_get_object_coll_device`. If you need to query the device types supported by group, please use `_device_capability(group)`. " % (lib, 800 if self.tf.ver < (2, 7) else 853),
                        "  warnings.warn("]
        if phase in ("first_eval", "first_ckpt") and c.nccl_debug == "INFO" and c.extra_comm == phase:
            nc = Nccl(self.job, node, lr)
            g = self.grank(node, lr)
            cid = self.job.comm_id2
            out += [nc.info("ncclCommSplit comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s parent 0x%x color %d key %d commId %s - Init START" % (
                        self.rng.randrange(0x55d000000000, 0x55dfffffffff), g, c.world, lr, lr, c.busids[lr], self.rng.randrange(0x55d000000000, 0x55dfffffffff), 1583734210, g, cid)),
                    nc.info("Setting affinity for GPU %d to %s" % (lr, c.affinity[lr % 2])),
                    nc.info("comm 0x%x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0" % (self.rng.randrange(0x55d000000000, 0x55dfffffffff), g, c.world, c.n_nodes, c.gpn, lr)),
                    nc.info("P2P Chunksize set to 524288"),
                    nc.info("Connected all rings"),
                    nc.info("Connected all trees"),
                    nc.info("ncclCommSplit comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %s parent 0x%x color %d key %d commId %s - Init COMPLETE" % (
                        self.rng.randrange(0x55d000000000, 0x55dfffffffff), g, c.world, lr, lr, c.busids[lr], self.rng.randrange(0x55d000000000, 0x55dfffffffff), 1583734210, g, cid))]
        return out

    def emit_extra(self, t, phase):
        for n in self.nodes():
            per = {lr: self.extra_lines(n, t, lr, phase) for lr in self.local_ranks()}
            if any(per.values()):
                self.rank_block(n, t, per)

    def barrier_warning(self, node, t, lr) -> list[str]:
        if self.tf.ver >= (2, 4) and self.cfg.warn_barrier:
            return [self.tf.c10(self.grank(node, lr), "W", node.ln(t) + self.rng.uniform(0, 0.05), "ProcessGroupNCCL.cpp", 4115 if self.tf.ver < (2, 7) else 4561)
                    + "%s  using GPU %d to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() with a device_id." % (
                        self.tf.pg(self.grank(node, lr)).replace("(default_pg)", ""), lr)]
        return []

    def destroy_warning(self, node, t, lr) -> list[str]:
        g = self.grank(node, lr)
        if self.tf.ver >= (2, 7):
            return [self.tf.c10(g, "W", node.ln(t) + self.rng.uniform(0, 0.5), "ProcessGroupNCCL.cpp", 1496)
                    + "Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())"]
        if self.tf.ver >= (2, 4):
            return [self.tf.c10(g, "W", node.ln(t) + self.rng.uniform(0, 0.5), "ProcessGroupNCCL.cpp", 1168 if self.tf.ver == (2, 4) else 1250)
                    + "Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())"]
        return []

    # ----------------------------------------------------------------- phases (defaults)
    def init_launch(self, t: float) -> float:
        raise NotImplementedError

    def init_dist(self, t: float, upto_nccl: bool = False) -> float:
        raise NotImplementedError

    def model_loading(self, t: float) -> float:
        raise NotImplementedError

    def data_loading(self, t: float) -> float:
        raise NotImplementedError

    def train_start(self, t: float) -> float:
        return t

    def on_step(self, k: int, t: float, m: dict):
        pass

    def on_eval_begin(self, k: int, t: float):
        pass

    def on_eval_end(self, k: int, t: float, m: dict):
        pass

    def on_ckpt_begin(self, k: int, t: float):
        pass

    def on_ckpt_end(self, k: int, t: float):
        pass

    def finish(self, t: float):
        pass

    # display counter of a completed step k (1-based) as the framework prints it
    def display(self, k: int) -> int:
        return k

    # ----------------------------------------------------------------- exceptions & teardown
    def stack(self, where: str) -> list[Frame]:
        raise NotImplementedError

    def exc_prefix(self, node, lr) -> str:
        return self.tf.py_prefix(self.grank(node, lr))

    def print_exception(self, node: NodeLog, t: float, lr: int, where: str, inner: list[Frame], exc: list[str],
                        role: str, kind: str, chain: list[tuple[str, str]] | None = None):
        """A rank's uncaught exception.  inner frames are appended to the style's stack
        for `where`.  exc: exception lines (first = 'Type: message')."""
        frames = self.stack(where) + inner
        tb = traceback_lines(frames, exc, py311=self.cfg.py311)
        if chain:
            tb = chain + [("", "frame"), ("The above exception was the direct cause of the following exception:", "frame"), ("", "frame")] + tb
        pre = self.exc_prefix(node, lr)
        for text, part in tb:
            k = kind if part == "exc" else kind + ":context"
            self.say(node, t, lr, pre + text, role, k)

    def teardown(self, t: float, failed: dict, reason: str = "crash"):
        """Launcher output once ranks have died.  failed: node idx -> list of
        (lrank, exitcode, t_exit)."""
        raise NotImplementedError

    # helpers for metric values
    def loss(self, k: int) -> float:
        c = self.cfg
        return c.loss_inf + (c.loss0 - c.loss_inf) * math.exp(-k / c.loss_tau) + 0.03 * math.sin(k * 0.37) + self.rng.gauss(0, 0.02)

    def lr(self, k: int) -> float:
        c = self.cfg
        if k < c.warmup:
            return c.peak_lr * k / c.warmup
        p = (k - c.warmup) / max(1, c.total_steps - c.warmup)
        return c.min_lr + 0.5 * (c.peak_lr - c.min_lr) * (1 + math.cos(math.pi * min(p, 1)))


# =============================================================================== SLURM base
class SrunMixin:
    """Tasks started directly by srun (Lightning / NeMo / Fabric on Slurm).  The batch
    host (node 0) log holds the batch script's output and srun's own messages; every
    node holds its tasks' output and slurmstepd's messages."""

    launcher = "srun"

    def srun_prelude(self, t: float) -> float:
        c, j = self.cfg, self.job
        h = self.head()
        lines = list(c.batch_echo)
        for x in lines:
            h.put(x.replace("{JOBID}", str(j.job_id)).replace("{NODELIST}", j.nodelist).replace("{MASTER}", j.hosts[0])
                  .replace("{NNODES}", str(c.n_nodes)).replace("{T}", dt(h.ln(t)).strftime("%a %b %d %H:%M:%S UTC %Y")))
        if c.pyxis:
            for n in self.nodes():
                n.put("pyxis: importing docker image: %s" % c.image, force=True)
            for n in self.nodes():
                n.put("pyxis: imported docker image: %s" % c.image)
            t += self.rng.uniform(20, 90)
        return t

    def teardown(self, t: float, failed: dict, reason: str = "crash"):
        """failed: idx -> [(lr, exitcode, t_exit)].  Models srun --kill-on-bad-exit."""
        c, j = self.cfg, self.job
        h = self.head()
        first = min((te, idx, lr, ec) for idx, lst in failed.items() for (lr, ec, te) in lst)
        te, idx0, lr0, ec0 = first
        t = te + self.rng.uniform(0.05, 1.5)

        def what(ec):
            return "Exited with exit code %d" % ec if ec > 0 else {-6: "Aborted (core dumped)", -9: "Killed", -15: "Terminated",
                                                                    -11: "Segmentation fault (core dumped)", -7: "Bus error (core dumped)"}[ec]
        if reason == "crash":
            # group failures of the first failing node
            ecs = {}
            for (lr, ec, tx) in failed[idx0]:
                ecs.setdefault(ec, []).append(self.grank(j.nodes[idx0], lr))
            for ec, ids in ecs.items():
                h.put(srun_task_msg(j.hosts[idx0], ids, what(ec)), SYM, "srun_task_failed")
            if c.kill_on_bad_exit:
                h.put("srun: Job step aborted: Waiting up to %d seconds for job step to finish." % c.kill_wait, SYM, "srun_step_aborted")
                for n in self.nodes():
                    if n.dead_at is not None:
                        continue
                    n.put(slurmstepd_cancel(j.job_id, "0", n.host, n.ln(t + 0.3), "TASK FAILURE" if c.slurm_new else None), SYM, "slurm_step_cancelled")
                self.on_sigterm(t + 0.4, exclude=failed)
                t += self.rng.uniform(1, 5)
                for n in self.nodes():
                    if n.idx == idx0 or n.dead_at is not None:
                        continue
                    other = [self.grank(n, lr) for lr in self.local_ranks()]
                    h.put(srun_task_msg(n.host, other, "Terminated"), SYM, "srun_task_killed")
                rest = [self.grank(j.nodes[idx0], lr) for lr in self.local_ranks()
                        if lr not in [x[0] for x in failed[idx0]]]
                if rest:
                    h.put(srun_task_msg(j.hosts[idx0], rest, "Terminated"), SYM, "srun_task_killed")
                h.put("srun: Force Terminated StepId=%d.0" % j.job_id, SYM, "srun_force_terminated")
            else:
                for idx, lst in sorted(failed.items(), key=lambda kv: min(x[2] for x in kv[1])):
                    if idx == idx0:
                        continue
                    ecs = {}
                    for (lr, ec, tx) in lst:
                        ecs.setdefault(ec, []).append(self.grank(j.nodes[idx], lr))
                    for ec, ids in ecs.items():
                        h.put(srun_task_msg(j.hosts[idx], ids, what(ec)), SYM, "srun_task_failed")
        elif reason in ("TIME LIMIT", "PREEMPTION"):
            pass

    def on_sigterm(self, t, exclude=None):
        pass


# =============================================================================== PyTorch Lightning Trainer
class LightningStyle(SrunMixin, Style):
    name = "lightning"
    framework = "pytorch-lightning"
    script = "train.py"

    def pl_path(self, rel):
        return "%s/%s/%s" % (self.cfg.libdir, self.cfg.pl_pkg, rel)

    def warn(self, rel, line, msg):
        # Lightning's own warning format: "<file>:<line>: <message>"
        return "%s:%d: %s" % (self.pl_path(rel), line, msg)

    def init_launch(self, t):
        t = self.srun_prelude(t)
        c = self.cfg
        for n in self.nodes():
            per = {}
            for lr in self.local_ranks():
                per[lr] = self.torch_warnings(n, t, lr)
            self.rank_block(n, t, per)
        h = self.head()
        self.say(h, t, 0, "Using bfloat16 Automatic Mixed Precision (AMP)" if c.precision == "bf16" else "Using 16bit Automatic Mixed Precision (AMP)")
        self.say(h, t, 0, "GPU available: True (cuda), used: True")
        self.say(h, t, 0, "TPU available: False, using: 0 TPU cores")
        self.say(h, t, 0, "HPU available: False, using: 0 HPUs")
        return t + self.rng.uniform(5, 15)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        for n in self.nodes():
            per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (self.grank(n, lr), self.grank(n, lr) + 1, c.world)]
                   for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        if upto_nccl:
            return t
        h = self.head()
        self.say(h, t, 0, "-" * 100 + "\ndistributed_backend=nccl\nAll distributed processes registered. Starting with %d processes\n" % c.world + "-" * 100 + "\n")
        t += self.rng.uniform(1, 4)
        if c.gpu_tc_hint:
            self.say(h, t, 0, "You are using a CUDA device (%r) that has Tensor Cores. To properly utilize them, you should set `torch.set_float32_matmul_precision('medium' | 'high')` which will trade-off precision for performance. For more details, read https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html#torch.set_float32_matmul_precision" % c.gpu_name)
        for n in self.nodes():
            per = {}
            for lr in self.local_ranks():
                per[lr] = ["LOCAL_RANK: %d - CUDA_VISIBLE_DEVICES: [%s]" % (lr, ",".join(str(i) for i in range(c.gpn)))]
                per[lr] += self.nccl_init(n, t, lr)
            self.rank_block(n, t, per)
        return t + self.rng.uniform(2, 10)

    def model_loading(self, t):
        c = self.cfg
        h = self.head()
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(20, 120)
        if c.ckpt_dir_exists:
            self.say(h, t, 0, self.warn("callbacks/model_checkpoint.py", 654, "Checkpoint directory %s exists and is not empty." % c.ckpt_dir))
        p = c.n_params
        rows = ["  | Name  | Type             | Params | Mode ",
                "---------------------------------------------------",
                "0 | model | %-16s | %-6s | train" % (c.model_cls[:16], human_params(p)),
                "---------------------------------------------------",
                "%-9s Trainable params" % human_params(p),
                "0         Non-trainable params",
                "%-9s Total params" % human_params(p),
                "%-9s Total estimated model params size (MB)" % ("{:,.3f}".format(p * 4 / 1e6)),
                "%-9d Modules in train mode" % c.n_modules,
                "0         Modules in eval mode"]
        if c.resume:
            self.say(h, t, 0, "Restored all states from the checkpoint at %s" % c.resume_path)
        for r in rows:
            self.say(h, t, 0, r)
        return t + 1

    def resume_announce(self, t):
        self.say(self.head(), t, 0, "Restoring states from the checkpoint path at %s" % self.cfg.resume_path)

    def data_loading(self, t):
        c = self.cfg
        h = self.head()
        if c.dl_workers < 4:
            self.say(h, t, 0, self.warn("trainer/connectors/data_connector.py", 424,
                                        "The 'train_dataloader' does not have many workers which may be a bottleneck. Consider increasing the value of the `num_workers` argument` to `num_workers=%d` in the `DataLoader` to improve performance." % (c.cpus - 1)))
        if not c.resume:
            self.say(h, t, 0, "Sanity Checking: |          | 0/? [00:00<?, ?it/s]")
        return t + self.rng.uniform(5, 40)

    def train_start(self, t):
        self.epoch = (self.cfg.resume_step // self.cfg.steps_per_epoch) if self.cfg.resume else 0
        self.bar_t0 = t
        self.last_bar = None
        return t

    def _bar(self, k, t, m):
        c = self.cfg
        spe = c.steps_per_epoch
        e = (k - 1) // spe
        n = k - e * spe
        rate = 1.0 / c.step_time
        post = "v_num=%d, train_loss=%.3f" % (c.v_num, m["loss"])
        if m.get("val_loss") is not None:
            post += ", val_loss=%.3f" % m["val_loss"]
        return tqdm_line("Epoch %d" % e, n, spe, (n) * c.step_time, rate, post)

    def on_step(self, k, t, m):
        c = self.cfg
        h = self.head()
        spe = c.steps_per_epoch
        e = (k - 1) // spe
        n = k - e * spe
        if n == 1 or k % c.log_every == 0 or n == spe:
            h.partial("\r" + self._bar(k, t, m))
        if n == spe:
            h.close_partial()

    def on_eval_begin(self, k, t):
        h = self.head()
        h.partial("\n" if False else "")
        h.partial("\rValidation: |          | 0/? [00:00<?, ?it/s]")
        nb = self.cfg.eval_batches
        for i in (1, nb // 2, nb):
            h.partial("\r" + tqdm_line("Validation DataLoader 0", i, nb, i * self.cfg.eval_time / nb, nb / self.cfg.eval_time))

    def on_eval_end(self, k, t, m):
        h = self.head()
        h.partial("\r" + " " * 80 + "\r")
        if k == self.cfg.eval_every:
            self.say(h, t, 0, self.warn("trainer/connectors/logger_connector/result.py", 431,
                                        "It is recommended to use `self.log('val_loss', ..., sync_dist=True)` when logging on epoch level in distributed setting to accumulate the metric across devices."))

    def on_ckpt_begin(self, k, t):
        c = self.cfg
        h = self.head()
        e = (k - 1) // c.steps_per_epoch
        v = c.best_val(k)
        self.say(h, t, 0, "Epoch %d, global step %d: 'val_loss' reached %.5f (best %.5f), saving model to '%s/epoch=%d-step=%d.ckpt' as top %d" % (
            e, k, v, v, c.ckpt_dir, e, k, c.save_top_k))

    def finish(self, t):
        c = self.cfg
        h = self.head()
        h.close_partial()
        self.say(h, t, 0, "`Trainer.fit` stopped: `max_steps=%d` reached." % c.total_steps)
        for n in self.nodes():
            per = {lr: self.destroy_warning(n, t + 1, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        h.put("Training finished at %s" % dt(h.ln(t + 3)).strftime("%a %b %d %H:%M:%S UTC %Y")) if c.echo_done else None

    def on_sigterm(self, t, exclude=None):
        return lightning_sigterm(self, t, exclude)

    def _unused_sigterm(self, t, exclude=None):
        for n in self.nodes():
            if n.dead_at is not None:
                continue
            bad = [x[0] for x in (exclude or {}).get(n.idx, [])]
            per = {lr: ["[rank: %d] Received SIGTERM: 15" % self.grank(n, lr)] for lr in self.local_ranks() if lr not in bad}
            self.rank_block(n, t, per)
            for lr in per:
                pass

    def stack(self, where):
        c = self.cfg
        P = self.pl_path
        base = [Frame(c.workdir + "/" + self.script, c.script_line, "<module>", "main()"),
                Frame(c.workdir + "/" + self.script, c.main_line, "main", "trainer.fit(model, datamodule=dm%s)" % (", ckpt_path=args.resume" if c.resume else "")),
                Frame(P("trainer/trainer.py"), 538, "fit", "call._call_and_handle_interrupt("),
                Frame(P("trainer/call.py"), 47, "_call_and_handle_interrupt", "return trainer_fn(*args, **kwargs)"),
                Frame(P("trainer/trainer.py"), 574, "_fit_impl", "self._run(model, ckpt_path=ckpt_path)")]
        if where == "ckpt_load":
            return base + [Frame(P("trainer/trainer.py"), 950, "_run", "self._checkpoint_connector._restore_modules_and_callbacks(ckpt_path)"),
                           Frame(P("trainer/connectors/checkpoint_connector.py"), 397, "_restore_modules_and_callbacks", "self.resume_start(checkpoint_path)"),
                           Frame(P("trainer/connectors/checkpoint_connector.py"), 79, "resume_start", "loaded_checkpoint = self.trainer.strategy.load_checkpoint(checkpoint_path)"),
                           Frame(P("strategies/strategy.py"), 367, "load_checkpoint", "return self.checkpoint_io.load_checkpoint(checkpoint_path)"),
                           Frame(c.libdir + "/lightning/fabric/plugins/io/torch_io.py", 83, "load_checkpoint", "return pl_load(path, map_location=map_location)"),
                           Frame(c.libdir + "/lightning/fabric/utilities/cloud_io.py", 56, "_load", "return torch.load(")]
        if where in ("init_pg", "model_build", "data_build"):
            pre = base + [Frame(P("trainer/trainer.py"), 943, "_run", "self.strategy.setup_environment()"),
                          Frame(P("strategies/ddp.py"), 154, "setup_environment", "self.setup_distributed()"),
                          Frame(P("strategies/ddp.py"), 203, "setup_distributed", "_init_dist_connection(self.cluster_environment, self._process_group_backend, timeout=self._timeout)"),
                          Frame(c.libdir + "/lightning/fabric/utilities/distributed.py", 297, "_init_dist_connection", "torch.distributed.init_process_group(torch_distributed_backend, rank=global_rank, world_size=world_size, **kwargs)")]
            if where == "init_pg":
                return pre
            if where == "model_build":
                return [Frame(c.workdir + "/" + self.script, c.script_line, "<module>", "main()"),
                        Frame(c.workdir + "/" + self.script, c.main_line - 9, "main", "model = LitLM(cfg.model)"),
                        Frame(c.workdir + "/lm/module.py", 41, "__init__", "self.model = build_model(cfg)"),
                        Frame(c.workdir + "/lm/model.py", 118, "build_model", "model = AutoModelForCausalLM.from_pretrained(")]
            return base + [Frame(P("trainer/trainer.py"), 981, "_run", "results = self._run_stage()"),
                           Frame(P("trainer/trainer.py"), 1025, "_run_stage", "self.fit_loop.run()"),
                           Frame(P("loops/fit_loop.py"), 197, "run", "self.setup_data()"),
                           Frame(P("loops/fit_loop.py"), 243, "setup_data", "train_dataloader = _request_dataloader(source)"),
                           Frame(P("trainer/connectors/data_connector.py"), 325, "_request_dataloader", "return data_source.dataloader()"),
                           Frame(c.workdir + "/lm/data.py", 77, "train_dataloader", "ds = PackedTokenDataset(self.cfg.train_path, self.cfg.seq_len)"),
                           Frame(c.workdir + "/lm/data.py", 31, "__init__", "self.index = np.load(os.path.join(path, \"index.npy\"), mmap_mode=\"r\")")]
        loop = base + [Frame(P("trainer/trainer.py"), 981, "_run", "results = self._run_stage()"),
                       Frame(P("trainer/trainer.py"), 1025, "_run_stage", "self.fit_loop.run()"),
                       Frame(P("loops/fit_loop.py"), 205, "run", "self.advance()"),
                       Frame(P("loops/fit_loop.py"), 363, "advance", "self.epoch_loop.run(self._data_fetcher)"),
                       Frame(P("loops/training_epoch_loop.py"), 140, "run", "self.advance(data_fetcher)")]
        if where == "eval":
            return loop + [Frame(P("loops/training_epoch_loop.py"), 269, "advance", "self.on_advance_end(data_fetcher)"),
                           Frame(P("loops/training_epoch_loop.py"), 295, "on_advance_end", "self.val_loop.run()"),
                           Frame(P("loops/utilities.py"), 178, "_decorator", "return loop_run(self, *args, **kwargs)"),
                           Frame(P("loops/evaluation_loop.py"), 135, "run", "self._evaluation_step(batch, batch_idx, dataloader_idx, dataloader_iter)"),
                           Frame(P("loops/evaluation_loop.py"), 396, "_evaluation_step", "output = call._call_strategy_hook(trainer, hook_name, *step_args)"),
                           Frame(P("trainer/call.py"), 319, "_call_strategy_hook", "output = fn(*args, **kwargs)"),
                           Frame(P("strategies/strategy.py"), 411, "validation_step", "return self.lightning_module.validation_step(*args, **kwargs)"),
                           Frame(c.workdir + "/lm/module.py", 96, "validation_step", "self.log_dict(metrics, on_epoch=True, sync_dist=True)")]
        if where == "ckpt_save":
            return loop + [Frame(P("loops/training_epoch_loop.py"), 269, "advance", "self.on_advance_end(data_fetcher)"),
                           Frame(P("loops/training_epoch_loop.py"), 312, "on_advance_end", "call._call_callback_hooks(trainer, \"on_validation_end\")"),
                           Frame(P("trainer/call.py"), 218, "_call_callback_hooks", "fn(trainer, trainer.lightning_module, *args, **kwargs)"),
                           Frame(P("callbacks/model_checkpoint.py"), 334, "on_validation_end", "self._save_topk_checkpoint(trainer, monitor_candidates)"),
                           Frame(P("callbacks/model_checkpoint.py"), 406, "_save_topk_checkpoint", "self._save_monitor_checkpoint(trainer, monitor_candidates)"),
                           Frame(P("callbacks/model_checkpoint.py"), 715, "_save_monitor_checkpoint", "self._update_best_and_save(current, trainer, monitor_candidates)"),
                           Frame(P("callbacks/model_checkpoint.py"), 767, "_update_best_and_save", "self._save_checkpoint(trainer, filepath)"),
                           Frame(P("callbacks/model_checkpoint.py"), 390, "_save_checkpoint", "trainer.save_checkpoint(filepath, self.save_weights_only)"),
                           Frame(P("trainer/trainer.py"), 1365, "save_checkpoint", "self.strategy.save_checkpoint(checkpoint, filepath, storage_options=storage_options)"),
                           Frame(P("strategies/strategy.py"), 490, "save_checkpoint", "self.checkpoint_io.save_checkpoint(checkpoint, filepath, storage_options=storage_options)"),
                           Frame(c.libdir + "/lightning/fabric/plugins/io/torch_io.py", 58, "save_checkpoint", "_atomic_save(checkpoint, path)"),
                           Frame(c.libdir + "/lightning/fabric/utilities/cloud_io.py", 89, "_atomic_save", "torch.save(checkpoint, bytesbuffer)")]
        step = loop + [Frame(P("loops/training_epoch_loop.py"), 250, "advance", "batch_output = self.automatic_optimization.run(trainer.optimizers[0], batch_idx, kwargs)"),
                       Frame(P("loops/optimization/automatic.py"), 190, "run", "self._optimizer_step(batch_idx, closure)"),
                       Frame(P("loops/optimization/automatic.py"), 268, "_optimizer_step", "call._call_lightning_module_hook("),
                       Frame(P("trainer/call.py"), 167, "_call_lightning_module_hook", "output = fn(*args, **kwargs)"),
                       Frame(P("core/module.py"), 1306, "optimizer_step", "optimizer.step(closure=optimizer_closure)"),
                       Frame(P("core/optimizer.py"), 153, "step", "step_output = self._strategy.optimizer_step(self._optimizer, closure, **kwargs)"),
                       Frame(P("strategies/ddp.py"), 270, "optimizer_step", "optimizer_output = super().optimizer_step(optimizer, closure, model, **kwargs)"),
                       Frame(P("strategies/strategy.py"), 238, "optimizer_step", "return self.precision_plugin.optimizer_step(optimizer, model=model, closure=closure, **kwargs)"),
                       Frame(P("plugins/precision/amp.py"), 75, "optimizer_step", "return super().optimizer_step(optimizer, model=model, closure=closure, **kwargs)"),
                       Frame(P("plugins/precision/precision.py"), 122, "optimizer_step", "return optimizer.step(closure=closure, **kwargs)"),
                       Frame(c.libdir + "/torch/optim/optimizer.py", 487, "wrapper", "out = func(*args, **kwargs)"),
                       Frame(c.libdir + "/torch/optim/adamw.py", 197, "step", "loss = closure()"),
                       Frame(P("plugins/precision/precision.py"), 108, "_wrap_closure", "closure_result = closure()"),
                       Frame(P("loops/optimization/automatic.py"), 144, "__call__", "self._result = self.closure(*args, **kwargs)"),
                       Frame(c.libdir + "/torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
                       Frame(P("loops/optimization/automatic.py"), 129, "closure", "step_output = self._step_fn()")]
        if where == "backward":
            return step[:-1] + [Frame(P("loops/optimization/automatic.py"), 137, "closure", "self._backward_fn(step_output.closure_loss)"),
                                Frame(P("loops/optimization/automatic.py"), 241, "backward_fn", "call._call_strategy_hook(self.trainer, \"backward\", loss, optimizer)"),
                                Frame(P("trainer/call.py"), 319, "_call_strategy_hook", "output = fn(*args, **kwargs)"),
                                Frame(P("strategies/strategy.py"), 212, "backward", "self.precision_plugin.backward(closure_loss, self.lightning_module, optimizer, *args, **kwargs)"),
                                Frame(P("plugins/precision/precision.py"), 72, "backward", "model.backward(tensor, *args, **kwargs)"),
                                Frame(P("core/module.py"), 1101, "backward", "loss.backward(*args, **kwargs)"),
                                Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward("),
                                Frame(c.libdir + "/torch/autograd/__init__.py", 289, "backward", "_engine_run_backward("),
                                Frame(c.libdir + "/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")]
        if where == "data_next":
            return loop + [Frame(P("loops/training_epoch_loop.py"), 206, "advance", "batch, _, __ = next(data_fetcher)"),
                           Frame(P("loops/fetchers.py"), 134, "__next__", "batch = super().__next__()"),
                           Frame(P("loops/fetchers.py"), 61, "__next__", "batch = next(self.iterator)"),
                           Frame(P("utilities/combined_loader.py"), 341, "__next__", "out = next(self._iterator)"),
                           Frame(P("utilities/combined_loader.py"), 78, "__next__", "out[i] = next(self.iterators[i])"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                           Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")]
        # train_step (forward in user code)
        return step + [Frame(P("loops/optimization/automatic.py"), 317, "_training_step", "training_step_output = call._call_strategy_hook(trainer, \"training_step\", *kwargs.values())"),
                       Frame(P("trainer/call.py"), 319, "_call_strategy_hook", "output = fn(*args, **kwargs)"),
                       Frame(P("strategies/strategy.py"), 390, "training_step", "return self.lightning_module.training_step(*args, **kwargs)"),
                       Frame(c.workdir + "/lm/module.py", 63, "training_step", "out = self.model(**batch)")]


# =============================================================================== Lightning Fabric (litgpt-like loop)
class FabricStyle(LightningStyle):
    name = "fabric"
    framework = "lightning-fabric"
    script = "pretrain.py"

    def init_launch(self, t):
        t = self.srun_prelude(t)
        for n in self.nodes():
            per = {lr: self.torch_warnings(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        h = self.head()
        self.say(h, t, 0, "Using bfloat16 Automatic Mixed Precision (AMP)" if self.cfg.precision == "bf16" else "Using 16bit Automatic Mixed Precision (AMP)")
        return t + self.rng.uniform(3, 10)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        for n in self.nodes():
            per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (self.grank(n, lr), self.grank(n, lr) + 1, c.world)]
                   for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        if upto_nccl:
            return t
        h = self.head()
        self.say(h, t, 0, "-" * 100 + "\ndistributed_backend=nccl\nAll distributed processes registered. Starting with %d processes\n" % c.world + "-" * 100 + "\n")
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) + self.barrier_warning(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        self.say(h, t, 0, "Seed set to %d" % c.seed_val)
        return t + 3

    def model_loading(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, "{'data': {'data_path': %r, 'seed': 42, 'num_workers': %d},\n 'devices': %d,\n 'eval': {'interval': %d, 'max_iters': %d},\n 'model_name': %r,\n 'num_nodes': %d,\n 'out_dir': %r,\n 'precision': 'bf16-mixed',\n 'resume': %s,\n 'train': {'global_batch_size': %d,\n           'log_interval': %d,\n           'lr_warmup_steps': %d,\n           'max_steps': %d,\n           'micro_batch_size': %d,\n           'save_interval': %d}}" % (
            c.data_path, c.dl_workers, c.gpn, c.eval_every, c.eval_batches, c.model_name, c.n_nodes, c.ckpt_dir, "True" if c.resume else "False",
            c.gbs, c.log_every, c.warmup, c.total_steps, c.mbs, c.ckpt_every))
        t += 2
        self.say(h, t, 0, "Time to instantiate model: %.2f seconds." % self.rng.uniform(0.2, 3))
        self.say(h, t, 0, "Total parameters: %s" % "{:,}".format(int(c.n_params)))
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(20, 90)
        return t

    def resume_announce(self, t):
        self.say(self.head(), t, 0, "Resuming training from %s" % self.cfg.resume_path)

    def data_loading(self, t):
        c = self.cfg
        self.say(self.head(), t, 0, "Loading data from %s (%d shards)" % (c.data_path, c.n_shards))
        return t + self.rng.uniform(3, 20)

    def train_start(self, t):
        self.say(self.head(), t, 0, "Measured TFLOPs: %.2f" % self.cfg.tflops)
        return t

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every:
            return
        it = k * c.grad_accum
        e = (k - 1) // c.steps_per_epoch + 1
        rem = (c.total_steps - k) * c.step_time
        self.say(self.head(), t, 0, "Epoch %d | iter %d step %d | loss train: %.3f, val: %s | iter time: %.2f ms (step) remaining time: %s" % (
            e, it, k, m["loss"], ("%.3f" % m["val_loss"]) if m.get("val_loss") else "n/a", m["step_time"] * 1000 / c.grad_accum,
            "%d:%02d:%02d" % (rem // 3600, rem % 3600 // 60, rem % 60) if rem < 86400 else "%d day%s, %d:%02d:%02d" % (rem // 86400, "s" if rem >= 172800 else "", rem % 86400 // 3600, rem % 3600 // 60, rem % 60)))

    def on_eval_begin(self, k, t):
        self.say(self.head(), t, 0, "Validating ...")

    def on_eval_end(self, k, t, m):
        self.say(self.head(), t, 0, "iter %d: val loss %.4f, val time: %.2f ms" % (k * self.cfg.grad_accum, m["val_loss"], self.cfg.eval_time * 1000))

    def on_ckpt_begin(self, k, t):
        self.say(self.head(), t, 0, "Saving checkpoint to %r" % ("%s/step-%08d/lit_model.pth" % (self.cfg.ckpt_dir, k)))

    def finish(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, "Saving checkpoint to %r" % ("%s/final/lit_model.pth" % c.ckpt_dir))
        self.say(h, t + 30, 0, "Training time: %.2fs" % ((c.total_steps - c.resume_step) * c.step_time))
        self.say(h, t + 30, 0, "Memory used: %.02f GB" % c.mem_gb)
        for n in self.nodes():
            per = {lr: self.destroy_warning(n, t + 31, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)

    def on_sigterm(self, t, exclude=None):
        pass

    def stack(self, where):
        c = self.cfg
        S = c.workdir + "/" + self.script
        L = c.libdir + "/litgpt"
        F = c.libdir + "/lightning/fabric"
        base = [Frame(S, 493, "<module>", "CLI(setup)"),
                Frame(c.libdir + "/jsonargparse/_cli.py", 119, "CLI", "return _run_component(component, init.get(subcommand))"),
                Frame(c.libdir + "/jsonargparse/_cli.py", 204, "_run_component", "return component(**cfg)"),
                Frame(S, 142, "setup", "fabric.launch(main, devices, resume, seed, config, data, out_dir, tokenizer_dir, tokenizer, logger_name, train, eval, optimizer)"),
                Frame(F + "/fabric.py", 843, "launch", "return self._wrap_and_launch(function, self, *args, **kwargs)"),
                Frame(F + "/fabric.py", 929, "_wrap_and_launch", "return to_run(*args, **kwargs)"),
                Frame(F + "/fabric.py", 934, "_wrap_with_setup", "return to_run(*args, **kwargs)")]
        if where in ("init_pg", "model_build", "data_build", "ckpt_load"):
            tail = {"init_pg": [Frame(S, 98, "setup", "fabric = L.Fabric(devices=devices, num_nodes=num_nodes, strategy=strategy, precision=precision, loggers=[logger])")],
                    "model_build": [Frame(S, 188, "main", "model = fabric.setup(model)")],
                    "data_build": [Frame(S, 207, "main", "train_dataloader, val_dataloader = get_dataloaders(fabric, data, tokenizer, train, model.max_seq_length)"),
                                   Frame(S, 402, "get_dataloaders", "data.setup()"),
                                   Frame(L + "/data/text_files.py", 88, "setup", "train_dataset = StreamingDataset(")],
                    "ckpt_load": [Frame(S, 219, "main", "fabric.load(resume, state)"),
                                  Frame(F + "/fabric.py", 773, "load", "unloaded_state = self._strategy.load_checkpoint(path=path, state=state, strict=strict)"),
                                  Frame(F + "/strategies/fsdp.py", 587, "load_checkpoint", "checkpoint = torch.load(path, map_location=\"cpu\")")]}[where]
            return base[:4] + tail if where == "init_pg" else base + tail
        loop = base + [Frame(S, 231, "main", "fit(fabric, devices, state, train_dataloader, val_dataloader, out_dir, tokenizer_dir, train, eval)")]
        if where == "eval":
            return loop + [Frame(S, 348, "fit", "val_loss = validate(fabric, model, val_dataloader, max_iters=eval.max_iters)"),
                           Frame(c.libdir + "/torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
                           Frame(S, 372, "validate", "losses[k] = fabric.all_reduce(loss, reduce_op=\"mean\")")]
        if where == "ckpt_save":
            return loop + [Frame(S, 359, "fit", "save_checkpoint(fabric, state, tokenizer_dir, checkpoint_file)"),
                           Frame(S, 431, "save_checkpoint", "fabric.save(checkpoint_file, state)"),
                           Frame(F + "/fabric.py", 748, "save", "self._strategy.save_checkpoint(path=path, state=_unwrap_objects(state), filter=filter)"),
                           Frame(F + "/strategies/fsdp.py", 529, "save_checkpoint", "torch.save(converted_state, path)")]
        if where == "data_next":
            return loop + [Frame(S, 282, "fit", "for train_data in train_iterator:"),
                           Frame(L + "/utils.py", 530, "__next__", "return next(self.iterator)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                           Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")]
        if where == "backward":
            return loop + [Frame(S, 301, "fit", "fabric.backward(loss / train.gradient_accumulation_iters(devices))"),
                           Frame(F + "/fabric.py", 449, "backward", "self._strategy.backward(tensor, module, *args, **kwargs)"),
                           Frame(F + "/strategies/strategy.py", 191, "backward", "self.precision.backward(tensor, module, *args, **kwargs)"),
                           Frame(F + "/plugins/precision/fsdp.py", 145, "backward", "super().backward(tensor, model, *args, **kwargs)"),
                           Frame(F + "/plugins/precision/precision.py", 107, "backward", "tensor.backward(*args, **kwargs)"),
                           Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward("),
                           Frame(c.libdir + "/torch/autograd/__init__.py", 289, "backward", "_engine_run_backward("),
                           Frame(c.libdir + "/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")]
        return loop + [Frame(S, 297, "fit", "logits = model(input_ids)"),
                       Frame(c.libdir + "/torch/nn/modules/module.py", 1553, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
                       Frame(c.libdir + "/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)"),
                       Frame(F + "/wrappers.py", 142, "forward", "output = self._forward_module(*args, **kwargs)")]


# =============================================================================== NeMo (2.x on Lightning + Megatron core)
def lightning_sigterm(self, t, exclude=None):
    for n in self.nodes():
        if n.dead_at is not None:
            continue
        bad = [x[0] for x in (exclude or {}).get(n.idx, [])]
        per = {lr: ["[rank: %d] Received SIGTERM: 15" % self.grank(n, lr)] for lr in self.local_ranks() if lr not in bad}
        self.rank_block(n, t, per)


class NemoStyle(SrunMixin, Style):
    name = "nemo"

    def on_sigterm(self, t, exclude=None):
        return lightning_sigterm(self, t, exclude)
    framework = "nemo"
    script = "pretrain_gpt.py"

    def nl(self, t, lvl, mod, line, msg, rank_tag=False):
        return "[NeMo %s %s %s:%d] %s" % (lvl, ts_plain(t), mod, line, msg)

    def display(self, k):
        return k - 1

    def init_launch(self, t):
        t = self.srun_prelude(t)
        c = self.cfg
        for n in self.nodes():
            per = {}
            for lr in self.local_ranks():
                tt = n.ln(t) + self.rng.uniform(0, 2)
                per[lr] = [self.nl(tt, "W", "nemo_logging", 349, "%s/pyannote/core/notebook.py:134: MatplotlibDeprecationWarning: The get_cmap function was deprecated in Matplotlib 3.7 and will be removed two minor releases later. Use ``matplotlib.colormaps[name]`` or ``matplotlib.colormaps.get_cmap(obj)`` instead." % c.libdir),
                           "      cm = get_cmap(\"Set1\")",
                           "    "] if c.nemo_mpl else []
                per[lr] += [self.nl(tt, "W", "nemo_logging", 349, "%s/megatron/core/tensor_parallel/layers.py:%d: FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., device_type='cuda')` instead." % (c.libdir, 290)),
                            "      def forward(",
                            "    ",
                            self.nl(tt, "W", "nemo_logging", 349, "%s/megatron/core/tensor_parallel/layers.py:%d: FutureWarning: `torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use `torch.amp.custom_bwd(args..., device_type='cuda')` instead." % (c.libdir, 301)),
                            "      def backward(",
                            "    "]
            self.rank_block(n, t, per)
        h = self.head()
        self.say(h, t, 0, "Using bfloat16 Automatic Mixed Precision (AMP)")
        self.say(h, t, 0, "GPU available: True (cuda), used: True")
        self.say(h, t, 0, "TPU available: False, using: 0 TPU cores")
        self.say(h, t, 0, "HPU available: False, using: 0 HPUs")
        self.say(h, t, 0, self.nl(h.ln(t), "I", "exp_manager", 655, "Experiments will be logged at %s" % c.ckpt_dir.rsplit("/", 1)[0]))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "exp_manager", 1262, "TensorboardLogger has been set up"))
        if c.nemo_ft:
            self.say(h, t, 0, self.nl(h.ln(t), "I", "exp_manager", 773, "Enabling straggler detection..."))
        return t + self.rng.uniform(10, 30)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        for n in self.nodes():
            per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (self.grank(n, lr), self.grank(n, lr) + 1, c.world)]
                   for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        if upto_nccl:
            return t
        h = self.head()
        self.say(h, t, 0, "-" * 100 + "\ndistributed_backend=nccl\nAll distributed processes registered. Starting with %d processes\n" % c.world + "-" * 100 + "\n")
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 314, "Rank 0 has data parallel group : %s" % str(list(range(0, min(c.world, 64), c.tp * c.pp)))))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 320, "Ranks 0 has data parallel rank: 0"))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 328, "Rank 0 has context parallel group: [0]"))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 341, "Rank 0 has model parallel group: %s" % str(list(range(c.tp * c.pp)))))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 350, "Rank 0 has tensor model parallel group: %s" % str(list(range(c.tp)))))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_init", 373, "Rank 0 has pipeline model parallel group: %s" % str(list(range(0, c.world, max(1, c.world // c.pp)))[:c.pp])))
        for n in self.nodes():
            per = {lr: ["LOCAL_RANK: %d - CUDA_VISIBLE_DEVICES: [%s]" % (lr, ",".join(str(i) for i in range(c.gpn)))] + self.nccl_init(n, t, lr)
                   for lr in self.local_ranks()}
            self.rank_block(n, t, per)
            if c.nccl_debug == "INFO":
                for grp in range(self.rng.randint(1, 3)):
                    per = {lr: self.extra_lines(n, t, lr, c.extra_comm) for lr in self.local_ranks()}
                    self.rank_block(n, t + grp, per)
        return t + self.rng.uniform(5, 20)

    def model_loading(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, self.nl(h.ln(t), "I", "num_microbatches_calculator", 228, "setting number of microbatches to constant %d" % (c.gbs // (c.mbs * max(1, c.world // (c.tp * c.pp))))))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "megatron_parallel", 604, " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): %d" % int(c.n_params / (c.tp * c.pp))))
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(30, 150)
            self.say(h, t, 0, "Restored all states from the checkpoint at %s" % c.resume_path)
        rows = ["  | Name   | Type     | Params | Mode ",
                "--------------------------------------------",
                "0 | module | GPTModel | %-6s | train" % human_params(c.n_params / (c.tp * c.pp)),
                "--------------------------------------------",
                "%-9s Trainable params" % human_params(c.n_params / (c.tp * c.pp)),
                "0         Non-trainable params",
                "%-9s Total params" % human_params(c.n_params / (c.tp * c.pp)),
                "%-9s Total estimated model params size (MB)" % "{:,.3f}".format(c.n_params / (c.tp * c.pp) * 4 / 1e6),
                "%-9d Modules in train mode" % c.n_modules,
                "0         Modules in eval mode"]
        for r in rows:
            self.say(h, t, 0, r)
        return t + 2

    def resume_announce(self, t):
        h = self.head()
        self.say(h, t, 0, self.nl(h.ln(t), "I", "exp_manager", 1051, "Resuming training from checkpoint: %s" % self.cfg.resume_path))

    def data_loading(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, self.nl(h.ln(t), "I", "gpt_dataset", 307, "Load the GPTDataset train indices"))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "gpt_dataset", 310, "\tLoad the document index from %s-document_index.npy" % c.data_path))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "gpt_dataset", 318, "\tLoad the sample index from %s-sample_index.npy" % c.data_path))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "gpt_dataset", 326, "\tLoad the shuffle index from %s-shuffle_index.npy" % c.data_path))
        self.say(h, t, 0, self.nl(h.ln(t), "I", "gpt_dataset", 333, "> total number of samples: %d" % (c.total_steps * c.gbs)))
        return t + self.rng.uniform(5, 30)

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every:
            return
        n = k - c.resume_step if False else k
        h = self.head()
        gs = self.display(k)
        self.say(h, t, 0, "Training epoch 0, iteration %d/%d | lr: %.4g | global_batch_size: %d | global_step: %d | reduced_train_loss: %.4g | train_step_timing in s: %.4g | consumed_samples: %d" % (
            gs, c.total_steps - 1, m["lr"], c.gbs, gs, m["loss"], m["step_time"], k * c.gbs))

    def on_eval_begin(self, k, t):
        c = self.cfg
        h = self.head()
        step = max(1, c.eval_batches // 5)
        for i in range(step, c.eval_batches // 2 + 1, step):
            self.say(h, t + i * c.eval_time / c.eval_batches, 0, "Validation: iteration %d/%d" % (i, c.eval_batches))

    def on_eval_end(self, k, t, m):
        c = self.cfg
        h = self.head()
        step = max(1, c.eval_batches // 5)
        for i in range(c.eval_batches // 2 + step, c.eval_batches + 1, step):
            self.say(h, t, 0, "Validation: iteration %d/%d" % (i, c.eval_batches))

    def on_ckpt_begin(self, k, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, "Epoch 0, global step %d: 'val_loss' reached %.5f (best %.5f), saving model to '%s/megatron_gpt--val_loss=%.2f-step=%d-consumed_samples=%.1f.ckpt' as top %d" % (
            k - 1, c.best_val(k), c.best_val(k), c.ckpt_dir, c.best_val(k), k - 1, float(k * c.gbs), c.save_top_k))
        self.say(h, t + 0.5, 0, self.nl(h.ln(t + 0.5), "I", "dist_ckpt_io", 301, "Global Checkpoint Save : Rank: 0 : Iteration: %d : Start time: %.3fs : Save duration: %.3fs" % (k - 1, h.ln(t), self.rng.uniform(0.8, 4))))

    def on_ckpt_end(self, k, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, self.nl(h.ln(t), "I", "dist_ckpt_io", 312, "Successfully saved checkpoint from iteration %7d to %s/megatron_gpt--val_loss=%.2f-step=%d-consumed_samples=%.1f.ckpt" % (
            k - 1, c.ckpt_dir, c.best_val(k), k - 1, float(k * c.gbs))))

    def finish(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, "`Trainer.fit` stopped: `max_steps=%d` reached." % c.total_steps)
        for n in self.nodes():
            per = {lr: self.destroy_warning(n, t + 2, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)

    def stack(self, where):
        c = self.cfg
        P = lambda rel: "%s/lightning/pytorch/%s" % (c.libdir, rel)
        N = lambda rel: "%s/nemo/%s" % (c.libdir, rel)
        M = lambda rel: "%s/megatron/core/%s" % (c.libdir, rel)
        S = c.workdir + "/" + self.script
        base = [Frame(S, 112, "<module>", "llm.train("),
                Frame(N("collections/llm/api.py"), 107, "train", "trainer.fit(model, data)"),
                Frame(P("trainer/trainer.py"), 538, "fit", "call._call_and_handle_interrupt("),
                Frame(P("trainer/call.py"), 46, "_call_and_handle_interrupt", "return trainer.strategy.launcher.launch(trainer_fn, *args, trainer=trainer, **kwargs)"),
                Frame(P("strategies/launchers/subprocess_script.py"), 105, "launch", "return function(*args, **kwargs)"),
                Frame(P("trainer/trainer.py"), 574, "_fit_impl", "self._run(model, ckpt_path=ckpt_path)")]
        if where == "init_pg":
            return base + [Frame(P("trainer/trainer.py"), 943, "_run", "self.strategy.setup_environment()"),
                           Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 393, "setup_environment", "super().setup_environment()"),
                           Frame(P("strategies/ddp.py"), 154, "setup_environment", "self.setup_distributed()"),
                           Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 420, "setup_distributed", "super().setup_distributed()"),
                           Frame(P("strategies/ddp.py"), 203, "setup_distributed", "_init_dist_connection(self.cluster_environment, self._process_group_backend, timeout=self._timeout)"),
                           Frame(c.libdir + "/lightning/fabric/utilities/distributed.py", 297, "_init_dist_connection", "torch.distributed.init_process_group(torch_distributed_backend, rank=global_rank, world_size=world_size, **kwargs)")]
        if where in ("model_build", "ckpt_load"):
            if where == "ckpt_load":
                return base + [Frame(P("trainer/trainer.py"), 950, "_run", "self._checkpoint_connector._restore_modules_and_callbacks(ckpt_path)"),
                               Frame(P("trainer/connectors/checkpoint_connector.py"), 397, "_restore_modules_and_callbacks", "self.resume_start(checkpoint_path)"),
                               Frame(P("trainer/connectors/checkpoint_connector.py"), 79, "resume_start", "loaded_checkpoint = self.trainer.strategy.load_checkpoint(checkpoint_path)"),
                               Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 896, "load_checkpoint", "checkpoint = self.checkpoint_io.load_checkpoint(checkpoint_path, sharded_state_dict=sharded_state_dict)"),
                               Frame(N("lightning/io/pl.py"), 266, "load_checkpoint", "checkpoint = dist_checkpointing.load("),
                               Frame(M("dist_checkpointing/serialization.py"), 126, "load", "local_metadata, global_metadata = determine_global_metadata(sharded_state_dict)")]
            return base + [Frame(P("trainer/trainer.py"), 956, "_run", "self.strategy.setup(self)"),
                           Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 447, "setup", "self.model.configure_model()"),
                           Frame(N("collections/llm/gpt/model/base.py"), 512, "configure_model", "self.module = self.config.configure_model(self.tokenizer)")]
        loop = base + [Frame(P("trainer/trainer.py"), 981, "_run", "results = self._run_stage()"),
                       Frame(P("trainer/trainer.py"), 1025, "_run_stage", "self.fit_loop.run()"),
                       Frame(P("loops/fit_loop.py"), 205, "run", "self.advance()"),
                       Frame(P("loops/fit_loop.py"), 363, "advance", "self.epoch_loop.run(self._data_fetcher)"),
                       Frame(P("loops/training_epoch_loop.py"), 140, "run", "self.advance(data_fetcher)")]
        if where == "data_build":
            return loop[:8] + [Frame(P("loops/fit_loop.py"), 197, "run", "self.setup_data()"),
                               Frame(P("loops/fit_loop.py"), 243, "setup_data", "train_dataloader = _request_dataloader(source)"),
                               Frame(N("collections/llm/gpt/data/pre_training.py"), 309, "setup", "self._train_ds, self._validation_ds, self._test_ds = BlendedMegatronDatasetBuilder("),
                               Frame(M("datasets/blended_megatron_dataset_builder.py"), 189, "build", "datasets = self._build_blended_dataset_splits()"),
                               Frame(M("datasets/indexed_dataset.py"), 418, "__init__", "self.initialize(path_prefix, multimodal, mmap)"),
                               Frame(M("datasets/indexed_dataset.py"), 443, "initialize", "self.index = _IndexReader(get_idx_path(self.path_prefix), self.multimodal)"),
                               Frame(M("datasets/indexed_dataset.py"), 226, "__init__", "with open(idx_path, \"rb\") as stream:")]
        if where == "eval":
            return loop + [Frame(P("loops/training_epoch_loop.py"), 269, "advance", "self.on_advance_end(data_fetcher)"),
                           Frame(P("loops/training_epoch_loop.py"), 295, "on_advance_end", "self.val_loop.run()"),
                           Frame(P("loops/evaluation_loop.py"), 135, "run", "self._evaluation_step(batch, batch_idx, dataloader_idx, dataloader_iter)"),
                           Frame(P("loops/evaluation_loop.py"), 396, "_evaluation_step", "output = call._call_strategy_hook(trainer, hook_name, *step_args)"),
                           Frame(N("lightning/megatron_parallel.py"), 282, "forward", "microbatch_outputs = step()"),
                           Frame(M("pipeline_parallel/schedules.py"), 471, "forward_backward_no_pipelining", "output_tensor, num_tokens = forward_step(")]
        if where == "ckpt_save":
            return loop + [Frame(P("loops/training_epoch_loop.py"), 269, "advance", "self.on_advance_end(data_fetcher)"),
                           Frame(P("loops/training_epoch_loop.py"), 312, "on_advance_end", "call._call_callback_hooks(trainer, \"on_validation_end\")"),
                           Frame(N("lightning/pytorch/callbacks/model_checkpoint.py"), 253, "on_validation_end", "super().on_validation_end(trainer, pl_module)"),
                           Frame(P("callbacks/model_checkpoint.py"), 334, "on_validation_end", "self._save_topk_checkpoint(trainer, monitor_candidates)"),
                           Frame(N("lightning/pytorch/callbacks/model_checkpoint.py"), 518, "_save_checkpoint", "super()._save_checkpoint(trainer, filepath)"),
                           Frame(P("trainer/trainer.py"), 1365, "save_checkpoint", "self.strategy.save_checkpoint(checkpoint, filepath, storage_options=storage_options)"),
                           Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 849, "save_checkpoint", "self.checkpoint_io.save_checkpoint(checkpoint, filepath, storage_options=storage_options)"),
                           Frame(N("lightning/io/pl.py"), 202, "save_checkpoint", "async_save_request = dist_checkpointing.save("),
                           Frame(M("dist_checkpointing/serialization.py"), 394, "save", "sharded_strategy.save(sharded_state_dict, checkpoint_dir)"),
                           Frame(M("dist_checkpointing/strategies/torch.py"), 657, "save", "torch.save(metadata, os.path.join(checkpoint_dir, \".metadata\"))")]
        step = loop + [Frame(P("loops/training_epoch_loop.py"), 250, "advance", "batch_output = self.automatic_optimization.run(trainer.optimizers[0], batch_idx, kwargs)"),
                       Frame(P("loops/optimization/automatic.py"), 190, "run", "self._optimizer_step(batch_idx, closure)"),
                       Frame(P("core/module.py"), 1306, "optimizer_step", "optimizer.step(closure=optimizer_closure)"),
                       Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 685, "optimizer_step", "optimizer_output = super().optimizer_step(optimizer, closure, model, **kwargs)"),
                       Frame(P("plugins/precision/precision.py"), 108, "_wrap_closure", "closure_result = closure()"),
                       Frame(P("loops/optimization/automatic.py"), 129, "closure", "step_output = self._step_fn()"),
                       Frame(P("loops/optimization/automatic.py"), 317, "_training_step", "training_step_output = call._call_strategy_hook(trainer, \"training_step\", *kwargs.values())"),
                       Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 621, "training_step", "out = self.model.training_step(dataloader_iter, *args, **kwargs)"),
                       Frame(N("lightning/megatron_parallel.py"), 389, "training_step", "return self._step("),
                       Frame(N("lightning/megatron_parallel.py"), 501, "_step", "return self.forward("),
                       Frame(N("lightning/megatron_parallel.py"), 351, "forward", "microbatch_outputs = step()"),
                       Frame(N("lightning/megatron_parallel.py"), 1257, "__call__", "return self.forward_backward_func("),
                       Frame(M("pipeline_parallel/schedules.py"), 486, "forward_backward_no_pipelining", "backward_step(")]
        if where == "backward":
            return step + [Frame(M("pipeline_parallel/schedules.py"), 366, "backward_step", "custom_backward(output_tensor[0], output_tensor_grad[0])"),
                           Frame(M("pipeline_parallel/schedules.py"), 150, "custom_backward", "Variable._execution_engine.run_backward(")]
        if where == "optimizer":
            return step[:-6] + [Frame(N("lightning/pytorch/strategies/megatron_strategy.py"), 690, "optimizer_step", "optimizer_output = self.optimizer_step_fn()"),
                                Frame(M("optimizer/optimizer.py"), 474, "step", "grad_norm = self.clip_grad_norm(self.config.clip_grad)"),
                                Frame(M("distributed/finalize_model_grads.py"), 298, "finalize_model_grads", "model_chunk.finish_grad_sync()"),
                                Frame(M("distributed/distributed_data_parallel.py"), 438, "finish_grad_sync", "bucket_group.finish_grad_sync()"),
                                Frame(M("distributed/param_and_grad_buffer.py"), 393, "finish_grad_sync", "self.start_grad_sync()"),
                                Frame(M("distributed/param_and_grad_buffer.py"), 277, "start_grad_sync", "self.check_for_nan_in_grad()"),
                                Frame(M("distributed/param_and_grad_buffer.py"), 155, "check_for_nan_in_grad", "rerun_state_machine.validate_result(")]
        if where == "data_next":
            return step[:-3] + [Frame(N("lightning/megatron_parallel.py"), 1257, "__call__", "return self.forward_backward_func("),
                                Frame(M("pipeline_parallel/schedules.py"), 471, "forward_backward_no_pipelining", "output_tensor, num_tokens = forward_step("),
                                Frame(N("collections/llm/gpt/model/base.py"), 213, "gpt_data_step", "batch = next(dataloader_iter)"),
                                Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                                Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                                Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                                Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")]
        return step + [Frame(M("pipeline_parallel/schedules.py"), 471, "forward_backward_no_pipelining", "output_tensor, num_tokens = forward_step("),
                       Frame(M("pipeline_parallel/schedules.py"), 275, "forward_step", "output_tensor, loss_func = forward_step_func(data_iterator, model)"),
                       Frame(N("collections/llm/gpt/model/base.py"), 238, "gpt_forward_step", "return model(**forward_args)")]


# =============================================================================== Composer / llm-foundry
class ComposerStyle(Style):
    name = "composer"
    framework = "composer"
    launcher = "composer"
    script = "train.py"

    def __init__(self, job):
        super().__init__(job)
        for n in job.nodes:
            n.rankbuf = {lr: [] for lr in range(self.cfg.gpn)}

    def decorate(self, node, t, src, text):
        return text

    def say(self, node, t, src, text, role=None, kind=None):
        # composer's launcher sends local rank 0 to the terminal and the other local
        # ranks to per-rank files; those are printed only if that rank crashes.
        if isinstance(src, int) and src != 0:
            for line in text.split("\n"):
                node.rankbuf[src].append((line, role, kind))
            return
        super().say(node, t, src, text, role, kind)

    def lf(self, node, t, lr, lvl, name, msg):
        return "%s: rank%d[%d][MainThread]: %s: %s: %s" % (ts_logging(node.ln(t)), self.grank(node, lr), node.pids[lr], lvl, name, msg)

    def init_launch(self, t):
        c = self.cfg
        for n in self.nodes():
            if c.composer_verbose:
                n.put("INFO:composer.cli.launcher:Starting distributed environment on local node for global_rank(%d-%d)" % (n.idx * c.gpn, n.idx * c.gpn + c.gpn - 1))
                n.put("INFO:composer.cli.launcher:Distributed KV store: tcp://%s:%d" % (self.job.hosts[0] if c.master_by_name else self.job.ips[0], c.master_port))
                for lr in self.local_ranks():
                    n.put("INFO:composer.cli.launcher:Launching process for local_rank(%d), global_rank(%d) with command(['%s', '-u', '%s/%s', '%s'])" % (
                        lr, self.grank(n, lr), c.pyexe, c.workdir, self.script, c.yaml))
        for n in self.nodes():
            for lr in self.local_ranks():
                for x in self.torch_warnings(n, t, lr):
                    self.say(n, t, lr, x)
        return t + self.rng.uniform(5, 20)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        if upto_nccl:
            return t
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) + self.barrier_warning(n, t, lr) for lr in self.local_ranks()}
            for lr, lines in per.items():
                for x in lines:
                    self.say(n, t, lr, x)
        for h in self.nodes():
            self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Building tokenizer..."))
        return t + self.rng.uniform(2, 8)

    def model_loading(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.lf(n, t, 0, "INFO", "llmfoundry.command_utils.train", "Initializing model..."))
        t += self.rng.uniform(10, 60)
        for h in self.nodes():
            self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Building trainer..."))
        h = self.head()
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "composer.utils.reproducibility", "Setting seed to %d" % c.seed_val))
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "composer.trainer.trainer", "Run name: %s" % c.run_name))
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "composer.trainer.trainer", "Using precision Precision.AMP_BF16"))
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(30, 120)
            for n in self.nodes():
                self.say(n, t, 0, self.lf(n, t, 0, "INFO", "composer.utils.checkpoint", "Trainer checkpoint loaded from %s" % c.resume_path))
        return t

    def resume_announce(self, t):
        c = self.cfg
        h = self.head()
        for n in self.nodes():
            self.say(n, t, 0, self.lf(n, t, 0, "INFO", "composer.trainer.trainer", "Searching for a previous checkpoint to autoresume"))
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "composer.trainer.trainer", "Autoresuming training from checkpoint"))
        for n in self.nodes():
            self.say(n, t + 1, 0, self.lf(n, t + 1, 0, "INFO", "composer.utils.checkpoint", "Loading checkpoint from %s" % c.resume_path))

    def data_loading(self, t):
        c = self.cfg
        for h in self.nodes():
            self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Building train loader..."))
            self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Building eval loader..."))
        return t + self.rng.uniform(5, 40)

    def train_start(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Logging config"))
        for x in ["*" * 30, "Config:", "enable_qkv_clip: false", "global_train_batch_size: %d" % c.gbs, "max_seq_len: %d" % c.seq_len,
                  "device_train_microbatch_size: %d" % c.mbs, "eval_interval: %dba" % c.eval_every, "log_to_console: true",
                  "max_duration: %dba" % c.total_steps, "n_gpus: %d" % c.world, "save_folder: %s" % c.ckpt_dir, "save_interval: %dba" % c.ckpt_every,
                  "run_name: %s" % c.run_name, "", "*" * 30]:
            self.say(h, t, 0, x)
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "llmfoundry.command_utils.train", "Starting training..."))
        return t

    def block(self, head, data):
        return "\n".join([head + (":" if data else "")] + ["\t %s: %s" % kv for kv in data])

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every and k != 1:
            return
        data = [("Train time/batch", str(k - 1)), ("Train time/sample", str((k - 1) * c.gbs)),
                ("Train time/batch_in_epoch", str(k - 1)), ("Train time/sample_in_epoch", str((k - 1) * c.gbs)),
                ("Train time/token", str((k - 1) * c.gbs * c.seq_len)), ("Train time/token_in_epoch", str((k - 1) * c.gbs * c.seq_len)),
                ("Train memory/peak_allocated_mem", "%.4f" % c.mem_gb),
                ("Train trainer/device_train_microbatch_size", str(c.mbs)),
                ("Train loss/train/total", "%.4f" % m["loss"]), ("Train metrics/train/LanguageCrossEntropy", "%.4f" % m["loss"]),
                ("Train metrics/train/LanguagePerplexity", "%.4f" % math.exp(min(m["loss"], 20))),
                ("Train throughput/batches_per_sec", "%.4f" % (1 / m["step_time"])),
                ("Train throughput/samples_per_sec", "%.4f" % (c.gbs / m["step_time"])),
                ("Train time/train", "%.4f" % ((k - c.resume_step) * c.step_time / 3600)),
                ("Train time/val", "%.4f" % (c.eval_time * (k // c.eval_every) / 3600)),
                ("Train time/total", "%.4f" % ((k - c.resume_step) * c.step_time / 3600)),
                ("Train lr-DecoupledLionW/group0", "%.4e" % m["lr"])]
        for n in self.nodes():
            self.say(n, t + self.rng.uniform(0, 0.2), 0, self.block("[batch=%d/%d]" % (k, c.total_steps), data))

    def on_eval_begin(self, k, t):
        c = self.cfg
        for n in self.nodes():
            for i in range(1, c.eval_batches, max(1, c.eval_batches // 10)):
                self.say(n, t + i * c.eval_time / c.eval_batches, 0, "[Eval batch=%d/%d] Eval on eval data" % (i, c.eval_batches))

    def on_eval_end(self, k, t, m):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.block("[Eval batch=%d/%d] Eval on eval data" % (c.eval_batches, c.eval_batches),
                                         [("Eval metrics/eval/LanguageCrossEntropy", "%.4f" % m["val_loss"]),
                                          ("Eval metrics/eval/LanguagePerplexity", "%.4f" % math.exp(min(m["val_loss"], 20)))]))

    def on_ckpt_end(self, k, t):
        pass

    def finish(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, self.lf(h, t, 0, "INFO", "composer.trainer.trainer", "Waiting for checkpoint uploading to finish"))
        self.say(h, t + 20, 0, self.lf(h, t + 20, 0, "INFO", "composer.trainer.trainer", "Checkpoint uploading finished!"))
        self.say(h, t + 21, 0, self.lf(h, t + 21, 0, "INFO", "llmfoundry.command_utils.train", "Done."))
        for n in self.nodes():
            for x in self.destroy_warning(n, t + 22, 0):
                self.say(n, t, 0, x)
            if c.composer_verbose and n.idx not in self.job.bad_exit_nodes:
                for lr in self.local_ranks():
                    n.put("INFO:composer.cli.launcher:Rank %d finished successfully." % self.grank(n, lr))

    def stack(self, where):
        c = self.cfg
        S = c.workdir + "/scripts/train/train.py"
        F = lambda rel: "%s/llmfoundry/%s" % (c.libdir, rel)
        C = lambda rel: "%s/composer/%s" % (c.libdir, rel)
        base = [Frame(S, 9, "<module>", "train_from_yaml(yaml_path, args_list)"),
                Frame(F("command_utils/train.py"), 663, "train_from_yaml", "return train(yaml_cfg)")]
        if where == "init_pg":
            return base + [Frame(F("command_utils/train.py"), 187, "train", "dist.initialize_dist(get_device(None), timeout=dist_timeout)"),
                           Frame(C("utils/dist.py"), 527, "initialize_dist", "dist.init_process_group(device_obj.dist_backend, timeout=timeout_timedelta)")]
        if where == "model_build":
            return base + [Frame(F("command_utils/train.py"), 524, "train", "model = build_composer_model("),
                           Frame(F("utils/builders.py"), 234, "build_composer_model", "model = construct_from_registry(")]
        if where == "data_build":
            return base + [Frame(F("command_utils/train.py"), 462, "train", "train_loader = build_dataloader("),
                           Frame(F("data/dataloader.py"), 28, "build_dataloader", "return construct_from_registry("),
                           Frame(F("data/text_data.py"), 316, "build_text_dataloader", "dataset = StreamingTextDataset(")]
        tr = base + [Frame(F("command_utils/train.py"), 562, "train", "trainer = Trainer(**trainer_kwargs)")] if where == "ckpt_load" else \
            base + [Frame(F("command_utils/train.py"), 647, "train", "trainer.fit()")]
        if where == "ckpt_load":
            return tr + [Frame(C("trainer/trainer.py"), 1707, "__init__", "self._rng_state = checkpoint.load_checkpoint("),
                         Frame(C("utils/checkpoint.py"), 566, "load_checkpoint", "rng_state_dicts = _restore_checkpoint("),
                         Frame(C("utils/checkpoint.py"), 1012, "_restore_checkpoint", "state_dict = safe_torch_load(composer_states_filepath)"),
                         Frame(C("utils/checkpoint.py"), 963, "safe_torch_load", "raise e"),
                         Frame(C("utils/checkpoint.py"), 953, "safe_torch_load", "state_dict = torch.load(composer_states_filepath, map_location='cpu')")]
        fit = tr + [Frame(C("trainer/trainer.py"), 2306, "fit", "self._train_loop()"),
                    Frame(C("trainer/trainer.py"), 2514, "_train_loop", "total_loss_dict = self._train_batch(use_grad_scaling)")]
        if where == "eval":
            return tr + [Frame(C("trainer/trainer.py"), 2306, "fit", "self._train_loop()"),
                         Frame(C("trainer/trainer.py"), 2580, "_train_loop", "self._run_evaluators(Event.BATCH_END)"),
                         Frame(C("trainer/trainer.py"), 2665, "_run_evaluators", "self._eval_loop("),
                         Frame(C("trainer/trainer.py"), 3451, "_eval_loop", "self.outputs = self._original_model.eval_forward(self.state.batch)"),
                         Frame(F("models/hf/hf_causal_lm.py"), 291, "eval_forward", "return self.forward(batch)")]
        if where == "ckpt_save":
            return tr + [Frame(C("trainer/trainer.py"), 2306, "fit", "self._train_loop()"),
                         Frame(C("trainer/trainer.py"), 2590, "_train_loop", "self.engine.run_event(Event.BATCH_CHECKPOINT)"),
                         Frame(C("core/engine.py"), 296, "run_event", "self._run_nonlogger_callbacks(event)"),
                         Frame(C("core/engine.py"), 631, "_run_nonlogger_callbacks", "self._run_callbacks(event, callbacks)"),
                         Frame(C("core/engine.py"), 623, "_run_callbacks", "cb.run_event(event, self.state, self.logger)"),
                         Frame(C("core/callback.py"), 96, "run_event", "return event_cb(state, logger)"),
                         Frame(C("callbacks/checkpoint_saver.py"), 369, "batch_checkpoint", "self._save_checkpoint("),
                         Frame(C("callbacks/checkpoint_saver.py"), 447, "_save_checkpoint", "saved_path = checkpoint.save_checkpoint("),
                         Frame(C("utils/checkpoint.py"), 1163, "save_checkpoint", "_save_checkpoint("),
                         Frame(C("utils/checkpoint.py"), 1080, "_save_checkpoint", "torch.save(state_dict, save_filename)")]
        if where == "data_next":
            return tr + [Frame(C("trainer/trainer.py"), 2306, "fit", "self._train_loop()"),
                         Frame(C("trainer/trainer.py"), 2449, "_train_loop", "for batch_idx, self.state.batch in enumerate(self._iter_dataloader(TrainerMode.TRAIN)):"),
                         Frame(C("trainer/trainer.py"), 3643, "_iter_dataloader", "batch = next(dataloader_iter)"),
                         Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                         Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                         Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                         Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")]
        if where == "backward":
            return fit + [Frame(C("trainer/trainer.py"), 2886, "_train_batch", "self._train_microbatches(microbatches, total_loss_dict)"),
                          Frame(C("trainer/trainer.py"), 3045, "_train_microbatches", "microbatch_loss_dict = self._train_microbatch(use_grad_scaling, current_batch_size, is_final_microbatch)"),
                          Frame(C("trainer/trainer.py"), 3178, "_train_microbatch", "microbatch_loss.backward(create_graph=self._backwards_create_graph)"),
                          Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward("),
                          Frame(c.libdir + "/torch/autograd/__init__.py", 289, "backward", "_engine_run_backward("),
                          Frame(c.libdir + "/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")]
        if where == "callback":
            return tr + [Frame(C("trainer/trainer.py"), 2306, "fit", "self._train_loop()"),
                         Frame(C("trainer/trainer.py"), 2561, "_train_loop", "self.engine.run_event(Event.BATCH_END)"),
                         Frame(C("core/engine.py"), 296, "run_event", "self._run_nonlogger_callbacks(event)"),
                         Frame(C("core/engine.py"), 631, "_run_nonlogger_callbacks", "self._run_callbacks(event, callbacks)"),
                         Frame(C("core/engine.py"), 623, "_run_callbacks", "cb.run_event(event, self.state, self.logger)"),
                         Frame(C("core/callback.py"), 96, "run_event", "return event_cb(state, logger)"),
                         Frame(F("callbacks/kill_loss_spike_callback.py"), 183, "batch_end", "self._handle_loss_spike(logger, running_loss_avg)"),
                         Frame(F("callbacks/kill_loss_spike_callback.py"), 147, "_handle_loss_spike", "raise LossSpikeError(")]
        return fit + [Frame(C("trainer/trainer.py"), 2886, "_train_batch", "self._train_microbatches(microbatches, total_loss_dict)"),
                      Frame(C("trainer/trainer.py"), 3045, "_train_microbatches", "microbatch_loss_dict = self._train_microbatch(use_grad_scaling, current_batch_size, is_final_microbatch)"),
                      Frame(C("trainer/trainer.py"), 3113, "_train_microbatch", "self.state.outputs = self.state.model(self.state.batch)"),
                      Frame(c.libdir + "/torch/nn/modules/module.py", 1553, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
                      Frame(c.libdir + "/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)")]

    def teardown(self, t, failed, reason="crash"):
        """composer launcher on each node whose ranks died: report the crashed rank, SIGTERM
        the rest, dump crashed (non-signal) ranks' output."""
        c = self.cfg
        for idx, lst in sorted(failed.items()):
            n = self.job.nodes[idx]
            if n.dead_at is not None:
                continue
            lst = sorted(lst, key=lambda x: x[2])
            lr0, ec0, te = lst[0]
            tt = te + 0.1
            n.put("ERROR:composer.cli.launcher:Rank %d crashed with exit code %d." % (self.grank(n, lr0), ec0), SYM, "composer_rank_crashed")
            n.put("Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C to exit immediately.", SYM, "composer_waiting")
            dead = {x[0]: x[1] for x in lst}
            for lr in self.local_ranks():
                ec = dead.get(lr, -15)
                if ec in (-9, -15):
                    continue
                g = self.grank(n, lr)
                n.put("Global rank %d (PID %d) exited with code %d" % (g, n.pids[lr], ec), SYM, "composer_exit")
                if lr != 0:
                    n.put("----------Begin global rank %d STDOUT----------" % g, SYM, "composer_dump:context")
                    out = [x for x in n.rankbuf[lr] if not x[1]]
                    for line, role, kind in out[-6:]:
                        n.put(line)
                    n.put("", None)
                    n.put("----------End global rank %d STDOUT----------" % g, SYM, "composer_dump:context")
                    n.put("----------Begin global rank %d STDERR----------" % g, SYM, "composer_dump:context")
                    for line, role, kind in [x for x in n.rankbuf[lr] if x[1]]:
                        n.put(line, role, kind)
                    n.put("", None)
                    n.put("----------End global rank %d STDERR----------" % g, SYM, "composer_dump:context")
            first_bad = min(self.local_ranks(), key=lambda l: (dead.get(l, -15) == 0, l))
            n.put("ERROR:composer.cli.launcher:Global rank %d (PID %d) exited with code %d" % (self.grank(n, first_bad), n.pids[first_bad], dead.get(first_bad, -15)), SYM, "composer_exit")


# =============================================================================== ColossalAI (torchrun per node, rich logging)
class ColossalStyle(Style):
    name = "colossalai"
    framework = "colossalai"
    launcher = "torchrun"
    script = "train.py"

    def __init__(self, job):
        super().__init__(job)
        self.last_rich = {}

    def rich(self, node, t, lvl, msg):
        """RichHandler output: the time column is blank when the second did not change."""
        stamp = ts_rich(node.ln(t))
        col = stamp if self.last_rich.get(node.idx) != stamp else " " * len(stamp)
        self.last_rich[node.idx] = stamp
        return "%s %-8s colossalai - colossalai - %s: %s" % (col, lvl, lvl, msg)

    def init_launch(self, t):
        c = self.cfg
        for n in self.nodes():
            if c.colossal_cli and n.idx == 0:
                pass
            for x in torchrun_omp_banner(self.tf, n.ln(t), n.launcher_pid):
                n.put(x)
            per = {}
            for lr in self.local_ranks():
                per[lr] = self.torch_warnings(n, t, lr)
                for ext in c.colossal_ext:
                    per[lr] += ["[extension] Loading the JIT-built %s kernel during runtime now" % ext,
                                "[extension] Time taken to load %s op: %s seconds" % (ext, repr(round(self.rng.uniform(0.05, 0.9), 16)))]
            self.rank_block(n, t, per)
        return t + self.rng.uniform(4, 12)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        if upto_nccl:
            return t
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        h = self.head()
        self.say(h, t, 0, self.rich(h, t, "INFO", "%s/colossalai/initialize.py:75 launch" % c.libdir))
        self.say(h, t, 0, self.rich(h, t, "INFO", "Distributed environment is initialized, world size: %d" % c.world))
        self.say(h, t, 0, "Training Info:\nConfig file: %s \nTensorboard logs: %s \nModel checkpoint: %s" % (c.yaml, c.tb_dir, c.ckpt_dir))
        return t + 3

    def model_loading(self, t):
        c = self.cfg
        h = self.head()
        self.say(h, t, 0, "Load dataset: %s" % c.data_path)
        t += self.rng.uniform(2, 10)
        self.say(h, t, 0, "Max device memory after data loader: %.2f MB" % self.rng.uniform(300, 900))
        self.say(h, t, 0, "Gradient checkpointing enabled successfully")
        self.say(h, t, 0, "Model params: %s" % human_params(c.n_params).replace(" ", " "))
        self.say(h, t, 0, "Booster init max device memory: %.2f MB" % (c.mem_gb * 1024 * 0.4))
        self.say(h, t, 0, "Booster init max CPU memory: %.2f MB" % self.rng.uniform(20000, 90000))
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(20, 100)
            self.say(h, t, 0, "Loaded checkpoint %s at epoch %d step %d" % (c.resume_path, 0, c.resume_step))
            self.say(h, t, 0, "Loaded sample at index %d" % (c.resume_step * c.gbs))
            self.say(h, t, 0, "Checkpoint loaded max device memory: %.2f MB" % (c.mem_gb * 1024 * 0.45))
        return t + 2

    def resume_announce(self, t):
        self.say(self.head(), t, 0, "Load model checkpoint from %s" % self.cfg.resume_path)

    def data_loading(self, t):
        return t + self.rng.uniform(2, 8)

    def train_start(self, t):
        self.say(self.head(), t, 0, "Warmup steps is set to %d" % self.cfg.warmup)
        return t

    def on_step(self, k, t, m):
        c = self.cfg
        h = self.head()
        spe = c.steps_per_epoch
        e = (k - 1) // spe
        n = k - e * spe
        if n == 1 or k % c.log_every == 0 or n == spe:
            h.partial("\r" + tqdm_line("Epoch %d" % e, n, spe, n * c.step_time, 1 / c.step_time,
                                       "loss=%.3f, step=%d, global_step=%d" % (m["loss"], n - 1, k - 1)))
        if n == spe:
            h.close_partial()

    def on_eval_begin(self, k, t):
        c = self.cfg
        h = self.head()
        nb = c.eval_batches
        h.partial("\r" + tqdm_line("Evaluating", 0, nb, 0, nb / c.eval_time))
        for i in (nb // 4, nb // 2):
            h.partial("\r" + tqdm_line("Evaluating", i, nb, i * c.eval_time / nb, nb / c.eval_time))

    def on_eval_end(self, k, t, m):
        c = self.cfg
        h = self.head()
        nb = c.eval_batches
        h.partial("\r" + tqdm_line("Evaluating", nb, nb, c.eval_time, nb / c.eval_time))
        self.say(h, t, 0, "\nEvaluation at step %d: val_loss=%.4f, val_ppl=%.2f" % (k, m["val_loss"], math.exp(min(m["val_loss"], 20))))

    def on_ckpt_begin(self, k, t):
        h = self.head()
        self.say(h, t, 0, "\nStart saving model checkpoint with running states")

    def on_ckpt_end(self, k, t):
        c = self.cfg
        e = (k - 1) // c.steps_per_epoch
        self.say(self.head(), t, 0, "Saved checkpoint at epoch %d step %d at folder %s" % (e, k, c.ckpt_dir))

    def finish(self, t):
        c = self.cfg
        h = self.head()
        h.close_partial()
        self.say(h, t, 0, "Start saving final model checkpoint")
        self.say(h, t + 40, 0, "Saved final model checkpoint at epoch %d at folder %s" % ((c.total_steps - 1) // c.steps_per_epoch, c.ckpt_dir))
        self.say(h, t + 40, 0, "Max device memory usage: %.2f MB" % (c.mem_gb * 1024))
        for n in self.nodes():
            per = {lr: self.destroy_warning(n, t + 41, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)

    def stack(self, where):
        c = self.cfg
        S = c.workdir + "/" + self.script
        B = lambda rel: "%s/colossalai/%s" % (c.libdir, rel)
        base = [Frame(S, 471, "<module>", "train(args)")]
        if where == "init_pg":
            return base + [Frame(S, 96, "train", "colossalai.launch_from_torch()"),
                           Frame(B("initialize.py"), 165, "launch_from_torch", "launch("),
                           Frame(B("initialize.py"), 69, "launch", "dist.init_process_group(rank=rank, world_size=world_size, backend=backend, init_method=init_method)")]
        if where == "model_build":
            return base + [Frame(S, 183, "train", "model = AutoModelForCausalLM.from_pretrained(")]
        if where == "data_build":
            return base + [Frame(S, 153, "train", "dataset = load_tokenized_dataset(dataset_paths=args.dataset, mode=\"train\")"),
                           Frame(c.workdir + "/colossal_llama/dataset/loader.py", 42, "load_tokenized_dataset", "dataset = dataset_dict.load_from_disk(ds_path, keep_in_memory=False)")]
        if where == "ckpt_load":
            return base + [Frame(S, 254, "train", "start_epoch, start_step, sampler_start_idx = load_checkpoint("),
                           Frame(c.workdir + "/colossal_llama/utils/ckpt_io.py", 68, "load_checkpoint", "booster.load_optimizer(optimizer=optimizer, checkpoint=os.path.join(load_dir, \"optimizer\"))"),
                           Frame(B("booster/booster.py"), 347, "load_optimizer", "self.checkpoint_io.load_optimizer(optimizer, checkpoint)"),
                           Frame(B("checkpoint_io/hybrid_parallel_checkpoint_io.py"), 576, "load_optimizer", "state_dict = load_shard_state_dict(Path(file_path), use_safetensors=False)"),
                           Frame(B("checkpoint_io/utils.py"), 471, "load_shard_state_dict", "return torch.load(checkpoint_file, map_location=torch.device(\"cpu\"))")]
        loop = base + [Frame(S, 363, "train", "for step, batch in pbar:")] if where == "data_next" else base
        if where == "data_next":
            return loop + [Frame(c.libdir + "/tqdm/std.py", 1181, "__iter__", "for obj in iterable:"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                           Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")]
        if where == "ckpt_save":
            return base + [Frame(S, 326, "train", "save_checkpoint("),
                           Frame(c.workdir + "/colossal_llama/utils/ckpt_io.py", 48, "save_checkpoint", "booster.save_optimizer(optimizer, os.path.join(save_dir, \"optimizer\"), shard=True)"),
                           Frame(B("booster/booster.py"), 370, "save_optimizer", "self.checkpoint_io.save_optimizer(optimizer, checkpoint, shard, gather_dtensor, prefix, size_per_shard)"),
                           Frame(B("checkpoint_io/hybrid_parallel_checkpoint_io.py"), 489, "save_sharded_optimizer", "total_size = save_state_dict_shards("),
                           Frame(B("checkpoint_io/utils.py"), 247, "save_state_dict_shards", "save_state_dict(shard, checkpoint_file_path, use_safetensors=use_safetensors)"),
                           Frame(B("checkpoint_io/utils.py"), 329, "save_state_dict", "torch.save(state_dict, checkpoint_file_path)")]
        if where == "eval":
            return base + [Frame(S, 392, "train", "val_loss = evaluate(model, val_dataloader, booster, coordinator)"),
                           Frame(S, 84, "evaluate", "dist.all_reduce(total_loss, op=dist.ReduceOp.SUM)")]
        if where == "backward":
            return base + [Frame(S, 359, "train", "booster.backward(loss=loss, optimizer=optimizer)"),
                           Frame(B("booster/booster.py"), 176, "backward", "optimizer.backward(loss)"),
                           Frame(B("zero/low_level/low_level_optim.py"), 536, "backward", "loss.backward(retain_graph=retain_graph)"),
                           Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward("),
                           Frame(c.libdir + "/torch/autograd/__init__.py", 289, "backward", "_engine_run_backward("),
                           Frame(c.libdir + "/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")]
        return base + [Frame(S, 352, "train", "outputs = model(**batch)"),
                       Frame(c.libdir + "/torch/nn/modules/module.py", 1553, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
                       Frame(c.libdir + "/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)"),
                       Frame(B("booster/plugin/hybrid_parallel_plugin.py"), 219, "forward", "return super().forward(*args, **kwargs)")]

    def teardown(self, t, failed, reason="crash"):
        torchrun_teardown(self, t, failed)


def torchrun_teardown(style: Style, t, failed, decorate=None):
    """Each node's torchrun agent whose workers died: SIGTERM the rest, print failure and
    ChildFailedError."""
    c, tf = style.cfg, style.tf
    for idx, lst in sorted(failed.items()):
        n = style.job.nodes[idx]
        if n.dead_at is not None:
            continue
        lst = sorted(lst, key=lambda x: x[2])
        te = lst[0][2] + style.rng.uniform(0.5, 3)
        dead = {x[0] for x in lst}
        others = [n.pids[lr] for lr in style.local_ranks() if lr not in dead]
        fails = [(style.grank(n, lr), lr, ec, n.pids[lr]) for (lr, ec, tx) in lst]
        for text, kind in torchrun_failure(tf, style.rng, n.ln(te), n.launcher_pid, n.host, c.script_path, fails, others, c.pyexe, c.libdir):
            style.say(n, te, "L", text, SYM, kind)


# =============================================================================== verl on Ray
class VerlStyle(Style):
    name = "verl"
    framework = "verl"
    launcher = "ray"
    script = "verl.trainer.main_ppo"

    def worker_pid(self, node, lr):
        return node.pids[lr]

    def relay(self, node, lr, text, actor="WorkerDict"):
        """How the driver (head node) shows a line printed by a remote actor."""
        if node.idx == 0:
            return "(%s pid=%d) %s" % (actor, node.pids[lr], text)
        return "(%s pid=%d, ip=%s) %s" % (actor, node.pids[lr], node.ip, text)

    def say_worker(self, node, t, lr, text, role=None, kind=None, relay_role=None, relay_kind=None, dedup=None):
        """A worker actor's line: in its own node's log and relayed on the head node."""
        h = self.head()
        for line in text.split("\n"):
            if node.idx != 0:
                node.put(line, role, kind)
            h.put(self.relay(node, lr, line) + (" [repeated %dx across cluster]" % dedup if dedup else ""),
                  relay_role if relay_role is not None else (role if node.idx == 0 else (SYM if role else None)),
                  relay_kind if relay_kind is not None else ((kind if node.idx == 0 else ("relay:" + kind.replace(":context", "") + (":context" if kind.endswith(":context") else ""))) if role else None))

    def decorate(self, node, t, src, text):
        return text

    def init_launch(self, t):
        c = self.cfg
        h = self.head()
        for n in self.nodes():
            if n.idx == 0:
                n.put("%s\tINFO usage_lib.py:467 -- Usage stats collection is enabled by default without user confirmation because this terminal is detected to be non-interactive. To disable this, add `--disable-usage-stats` to the command that starts the cluster, or run the following command: `ray disable-usage-stats` before starting the cluster. See https://docs.ray.io/en/master/cluster/usage-stats.html for more details." % ts_logging(n.ln(t)))
                n.put("%s\tINFO scripts.py:865 -- Local node IP: %s" % (ts_logging(n.ln(t + 0.2)), n.ip))
            else:
                n.put("%s\tINFO scripts.py:1047 -- Local node IP: %s" % (ts_logging(n.ln(t + 5)), n.ip))
            if c.ray_shm_warn:
                n.put("%s\tWARNING services.py:2009 -- WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only 67108864 bytes available. This will harm performance! You may be able to free up space by deleting files in /dev/shm. If you are inside a Docker container, you can increase /dev/shm size by passing '--shm-size=10.24gb' to 'docker run' (or add it to the run_options list in a Ray cluster config). Make sure to set this to more than 30%% of available RAM." % ts_logging(n.ln(t + 1)))
            for x in ["%s\tSUCC scripts.py:%d -- --------------------" % (ts_logging(n.ln(t + 2)), 902 if n.idx == 0 else 1083),
                      "%s\tSUCC scripts.py:%d -- Ray runtime started." % (ts_logging(n.ln(t + 2)), 903 if n.idx == 0 else 1084),
                      "%s\tSUCC scripts.py:%d -- --------------------" % (ts_logging(n.ln(t + 2)), 904 if n.idx == 0 else 1085),
                      "%s\tINFO scripts.py:1089 -- To terminate the Ray runtime, run" % ts_logging(n.ln(t + 2)),
                      "%s\tINFO scripts.py:1090 -- \x1b[1m  ray stop\x1b[22m" % ts_logging(n.ln(t + 2)) if False else "%s\tINFO scripts.py:1090 --   ray stop" % ts_logging(n.ln(t + 2)),
                      "%s\tINFO scripts.py:1098 -- --block" % ts_logging(n.ln(t + 2)),
                      "%s\tINFO scripts.py:1099 -- This command will now block forever until terminated by a signal." % ts_logging(n.ln(t + 2)),
                      "%s\tINFO scripts.py:1102 -- Running subprocesses are monitored and a message will be printed if any of them terminate unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported." % ts_logging(n.ln(t + 2))]:
                n.put(x)
        t += self.rng.uniform(20, 60)
        h.put("%s\tINFO job_manager.py:530 -- Runtime env is setting up." % ts_logging(h.ln(t)))
        h.put("ray init kwargs: {'num_cpus': None, 'runtime_env': {'env_vars': {'TOKENIZERS_PARALLELISM': 'true', 'NCCL_DEBUG': '%s', 'VLLM_LOGGING_LEVEL': 'WARN'}}}" % (c.nccl_debug or "WARN"))
        h.put("%s\tINFO worker.py:1642 -- Connecting to existing Ray cluster at address: %s:6379..." % (ts_logging(h.ln(t + 1)), h.ip))
        h.put("%s\tINFO worker.py:1818 -- Connected to Ray cluster. View the dashboard at \x1b[1m\x1b[32m%s:8265 \x1b[39m\x1b[22m" % (ts_logging(h.ln(t + 2)), h.ip) if c.ray_color else
              "%s\tINFO worker.py:1818 -- Connected to Ray cluster. View the dashboard at %s:8265 " % (ts_logging(h.ln(t + 2)), h.ip))
        self.tr_pid = h.pids[-2]
        h.put("(TaskRunner pid=%d) TaskRunner hostname: %s, PID: %d" % (self.tr_pid, h.host, self.tr_pid))
        for n in self.nodes():
            for lr in self.local_ranks():
                for x in self.torch_warnings(n, t, lr):
                    self.say_worker(n, t, lr, x) if lr == 0 else (n.put(x) if n.idx != 0 else None)
        return t + self.rng.uniform(5, 20)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        if upto_nccl:
            return t
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) for lr in self.local_ranks()}
            blocks = [[(lr, x) for x in lines] for lr, lines in per.items() if lines]
            for lr, x in interleave(self.rng, blocks):
                if n.idx != 0:
                    n.put(x)
                self.head().put(self.relay(n, lr, x))
        return t + 5

    def model_loading(self, t):
        c = self.cfg
        h = self.head()
        self.say_worker(h.job.nodes[0], t, 0, "Qwen2ForCausalLM contains %.2fB parameters" % (c.n_params / 1e9))
        self.say_worker(h.job.nodes[0], t, 0, "Before building vllm rollout, memory allocated (GB): %.2f, memory reserved (GB): %.2f, device memory used/total (GB): %.2f/%.2f" % (
            c.mem_gb * 0.2, c.mem_gb * 0.25, c.mem_gb * 0.3, c.gpu_mem))
        t += self.rng.uniform(30, 120)
        if c.resume:
            self.resume_announce(t)
        return t

    def resume_announce(self, t):
        c = self.cfg
        h = self.head().at(t)
        h.put("(TaskRunner pid=%d) Load from checkpoint folder: %s/global_step_%d" % (self.tr_pid, c.ckpt_dir, c.resume_step))
        h.put("(TaskRunner pid=%d) Setting global step to %d" % (self.tr_pid, c.resume_step))
        h.put("(TaskRunner pid=%d) Resuming from %s/global_step_%d" % (self.tr_pid, c.ckpt_dir, c.resume_step))

    def data_loading(self, t):
        c = self.cfg
        h = self.head()
        h.put("(TaskRunner pid=%d) dataset len: %d" % (self.tr_pid, c.total_steps * c.gbs // 2))
        h.put("(TaskRunner pid=%d) filter dataset len: %d" % (self.tr_pid, c.total_steps * c.gbs // 2 - self.rng.randint(10, 900)))
        h.put("(TaskRunner pid=%d) Size of train dataloader: %d, Size of val dataloader: 1" % (self.tr_pid, c.total_steps))
        h.put("(TaskRunner pid=%d) Total training steps: %d" % (self.tr_pid, c.total_steps))
        return t + 3

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every and k != 1:
            return
        h = self.head()
        parts = ["step:%d" % k, "global_seqlen/min:%d" % self.rng.randint(300000, 400000), "global_seqlen/max:%d" % self.rng.randint(400000, 500000),
                 "actor/entropy:%r" % round(0.3 + self.rng.random() * 0.2, 17), "actor/pg_loss:%r" % round(self.rng.gauss(0, 0.05), 17),
                 "actor/pg_clipfrac:%r" % round(0.001 + self.rng.random() * 0.004, 18), "actor/ppo_kl:%r" % round(self.rng.gauss(0, 0.0005), 19),
                 "actor/grad_norm:%r" % round(0.1 + self.rng.random() * 0.3, 16), "perf/mfu/actor:%r" % round(0.2 + self.rng.random() * 0.1, 16),
                 "perf/max_memory_allocated_gb:%r" % round(c.mem_gb, 13), "actor/lr:%r" % m["lr"],
                 "critic/score/mean:%r" % round(min(0.95, 0.1 + k / c.total_steps + self.rng.gauss(0, 0.02)), 16),
                 "response_length/mean:%r" % round(500 + 300 * k / c.total_steps + self.rng.gauss(0, 20), 13),
                 "timing_s/gen:%r" % round(m["step_time"] * 0.55, 15), "timing_s/update_actor:%r" % round(m["step_time"] * 0.3, 15),
                 "timing_s/step:%r" % round(m["step_time"], 15), "perf/total_num_tokens:%d" % self.rng.randint(2000000, 3000000),
                 "perf/throughput:%r" % round(self.rng.uniform(1500, 3000), 12)]
        h.put("(TaskRunner pid=%d) %s" % (self.tr_pid, " - ".join(parts)))

    def on_eval_end(self, k, t, m):
        h = self.head()
        h.put("(TaskRunner pid=%d) test_gen_batch meta info: {'eos_token_id': 151643, 'pad_token_id': 151643, 'recompute_log_prob': False, 'do_sample': False, 'validate': True}" % self.tr_pid)

    def on_ckpt_begin(self, k, t):
        c = self.cfg
        h = self.head()
        h.put("(TaskRunner pid=%d) local_global_step_folder: %s/global_step_%d" % (self.tr_pid, c.ckpt_dir, k))

    def finish(self, t):
        c = self.cfg
        h = self.head()
        h.put("(TaskRunner pid=%d) Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': %r}" % (self.tr_pid, round(self.rng.uniform(0.6, 0.9), 16)))
        h.put("")
        h.put("-" * 46)
        h.put("Job 'raysubmit_%s' succeeded" % c.ray_sub)
        h.put("-" * 46)

    def stack(self, where):
        c = self.cfg
        V = lambda rel: "%s/verl/%s" % (c.libdir, rel)
        if where == "rollout":
            return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                    Frame(V("single_controller/base/decorator.py"), 430, "inner", "return func(*args, **kwargs)"),
                    Frame(V("workers/fsdp_workers.py"), 736, "generate_sequences", "output = self.rollout.generate_sequences(prompts=prompts)"),
                    Frame(c.libdir + "/torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
                    Frame(V("workers/rollout/vllm_rollout/vllm_rollout_spmd.py"), 289, "generate_sequences", "outputs = self.inference_engine.generate(")]
        if where == "update":
            return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                    Frame(V("single_controller/base/decorator.py"), 430, "inner", "return func(*args, **kwargs)"),
                    Frame(V("workers/fsdp_workers.py"), 662, "update_actor", "metrics = self.actor.update_policy(data=data)"),
                    Frame(V("workers/actor/dp_actor.py"), 412, "update_policy", "loss.backward()")]
        if where == "ckpt_save":
            return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                    Frame(V("single_controller/base/decorator.py"), 430, "inner", "return func(*args, **kwargs)"),
                    Frame(V("workers/fsdp_workers.py"), 958, "save_checkpoint", "self.checkpoint_manager.save_checkpoint("),
                    Frame(V("utils/checkpoint/fsdp_checkpoint_manager.py"), 214, "save_checkpoint", "torch.save(optimizer_state_dict, optim_path)")]
        if where == "ckpt_load":
            return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                    Frame(V("workers/fsdp_workers.py"), 989, "load_checkpoint", "self.checkpoint_manager.load_checkpoint("),
                    Frame(V("utils/checkpoint/fsdp_checkpoint_manager.py"), 137, "load_checkpoint", "optimizer_state_dict = torch.load(remote_optim_path, weights_only=False)")]
        if where == "init_pg":
            return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                    Frame(V("workers/fsdp_workers.py"), 143, "__init__", "torch.distributed.init_process_group(")]
        return [Frame(V("single_controller/ray/base.py"), 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
                Frame(V("workers/fsdp_workers.py"), 512, "init_model", "self.actor_module_fsdp, self.actor_optimizer, self.actor_lr_scheduler, self.actor_model_config = self._build_model_optimizer(")]

    def driver_failure(self, t, node, lr, method, exc_first: str, inner_exc: list[str], where: str):
        """The driver's RayTaskError for a failed actor method, then the job failure banner."""
        c = self.cfg
        h = self.head()
        D = lambda rel: "%s/%s" % (c.libdir, rel)
        V = lambda rel: "%s/verl/%s" % (c.libdir, rel)
        fr = [Frame(V("trainer/main_ppo.py"), 42, "main", "run_ppo(config)"),
              Frame(V("trainer/main_ppo.py"), 96, "run_ppo", "ray.get(runner.run.remote(config))"),
              Frame(D("ray/_private/auto_init_hook.py"), 21, "auto_init_wrapper", "return fn(*args, **kwargs)"),
              Frame(D("ray/_private/client_mode_hook.py"), 103, "wrapper", "return func(*args, **kwargs)"),
              Frame(D("ray/_private/worker.py"), 2822, "get", "values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)"),
              Frame(D("ray/_private/worker.py"), 930, "get_objects", "raise value.as_instanceof_cause()")]
        exc = ["ray.exceptions.RayTaskError(%s): ray::TaskRunner.run() (pid=%d, ip=%s, actor_id=%s, repr=<main_ppo.TaskRunner object at 0x%x>)" % (
            exc_first.split(":")[0].split(".")[-1], self.tr_pid, h.ip, c.actor_id, self.rng.randrange(0x7f0000000000, 0x7fffffffffff))]
        inner = [("  File \"%s\", line %d, in fit" % (V("trainer/ppo/ray_trainer.py"), 1145), "frame"),
                 ("    gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)" if method.endswith("generate_sequences") else "    actor_output = self.actor_rollout_wg.update_actor(batch)", "frame"),
                 ("  File \"%s\", line 48, in __call__" % V("single_controller/ray/base.py"), "frame"),
                 ("    output = ray.get(output)", "frame"),
                 ("ray.exceptions.RayTaskError(%s): ray::WorkerDict.%s() (pid=%d, ip=%s, actor_id=%s, repr=<verl.single_controller.ray.base.WorkerDict object at 0x%x>)" % (
                     exc_first.split(":")[0].split(".")[-1], method, node.pids[lr], node.ip, c.actor_id2, self.rng.randrange(0x7f0000000000, 0x7fffffffffff)), "exc")]
        tb = traceback_lines(fr, exc)
        for text, part in tb:
            h.put(text, SYM, "ray_task_error" if part == "exc" else "ray_task_error:context")
        for text, part in inner:
            h.put(text, SYM, "ray_task_error" if part == "exc" else "ray_task_error:context")
        for x in inner_exc:
            h.put(x, SYM, "relay:" + exc_first.split(":")[0].split(".")[-1])
        h.put("")
        h.put("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", SYM, "hydra_error:context")
        t += self.rng.uniform(2, 6)
        h.put("%s\tERROR job_supervisor.py:196 -- Job entrypoint command failed with exit code 1" % ts_logging(h.ln(t)), SYM, "ray_job_failed")
        h.put("")
        h.put("-" * 43)
        h.put("Job 'raysubmit_%s' failed" % c.ray_sub, SYM, "ray_job_failed")
        h.put("-" * 43)
        h.put("")
        h.put("Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):", SYM, "ray_job_failed")
        h.put("ray.exceptions.RayTaskError(%s): ray::TaskRunner.run() (pid=%d, ip=%s, actor_id=%s, repr=<main_ppo.TaskRunner object at 0x%x>)" % (
            exc_first.split(":")[0].split(".")[-1], self.tr_pid, h.ip, c.actor_id, self.rng.randrange(0x7f0000000000, 0x7fffffffffff)), SYM, "ray_task_error")
        h.put(exc_first, SYM, "relay:" + exc_first.split(":")[0].split(".")[-1])

    def teardown(self, t, failed, reason="crash"):
        pass

    def emit_extra(self, t, phase):
        for n in self.nodes():
            for lr in self.local_ranks():
                lines = self.extra_lines(n, t, lr, phase)
                if lines:
                    self.say_worker(n, t, lr, "\n".join(lines))


# =============================================================================== custom FSDP trainer, JSON-lines logs, torchrun in k8s
class JsonlStyle(Style):
    name = "jsonl"
    framework = "custom-fsdp"
    launcher = "torchrun"
    script = "train_fsdp.py"
    progress_everywhere = True

    def j(self, node, t, lrank, level, msg, **kw):
        import json
        d = {"ts": ts_iso(node.ln(t), z=self.cfg.json_z), "level": level, "rank": self.grank(node, lrank), "host": node.host, "msg": msg}
        d.update(kw)
        return json.dumps(d, separators=(", ", ": ") if self.cfg.json_spaces else (",", ":"))

    def init_launch(self, t):
        c = self.cfg
        for n in self.nodes():
            for x in torchrun_omp_banner(self.tf, n.ln(t), n.launcher_pid):
                n.put(x)
            per = {lr: self.torch_warnings(n, t, lr) + [self.j(n, t + 1, lr, "INFO", "starting worker", local_rank=lr, world_size=c.world, pid=n.pids[lr])]
                   for lr in self.local_ranks()}
            self.rank_block(n, t, per)
        return t + self.rng.uniform(3, 10)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        if upto_nccl:
            return t
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) + self.barrier_warning(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
            self.say(n, t + 2, 0, self.j(n, t + 2, 0, "INFO", "process group ready", backend="nccl", world_size=c.world, master=c.master))
        return t + 3

    def model_loading(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "building model", model=c.model_name, params=int(c.n_params), fsdp="FULL_SHARD"))
        t += self.rng.uniform(20, 90)
        if c.resume:
            self.resume_announce(t)
            t += self.rng.uniform(20, 90)
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "model ready", peak_mem_gb=round(c.mem_gb * 0.4, 2)))
        return t

    def resume_announce(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "loading checkpoint", path=c.resume_path, step=c.resume_step))

    def data_loading(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "opening dataset", path=c.data_path, shards=c.n_shards))
        return t + self.rng.uniform(3, 20)

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every:
            return
        for n in self.nodes():
            sk = m.get("node_step_time", {}).get(n.idx, m["step_time"])
            comp = m.get("compute", {}).get(n.idx, sk * 0.8)
            self.say(n, t, 0, self.j(n, t + self.rng.uniform(0, 0.05), 0, "INFO", "train", step=k, samples=k * c.gbs, loss=round(m["loss"], 4),
                                     lr=float("%.3e" % m["lr"]), step_ms=round(sk * 1000, 1), compute_ms=round(comp * 1000, 1),
                                     comm_wait_ms=round(max(0.0, sk - comp) * 1000, 1), tokens_per_s=int(c.gbs * c.seq_len / sk)))

    def on_eval_begin(self, k, t):
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "eval start", step=k))

    def on_eval_end(self, k, t, m):
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "eval done", step=k, val_loss=round(m["val_loss"], 4), eval_s=round(self.cfg.eval_time, 1)))

    def on_ckpt_begin(self, k, t):
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "saving checkpoint", step=k, path="%s/step_%d" % (self.cfg.ckpt_dir, k)))

    def on_ckpt_end(self, k, t):
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "checkpoint saved", step=k, seconds=round(self.cfg.ckpt_time, 1)))

    def finish(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, self.j(n, t, 0, "INFO", "training complete", step=c.total_steps, wall_h=round((c.total_steps - c.resume_step) * c.step_time / 3600, 2)))
            per = {lr: self.destroy_warning(n, t + 2, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
            if self.tf.ver >= (2, 4) and n.idx not in self.job.bad_exit_nodes:
                self.say(n, t + 3, "L", elastic_prefix(self.tf, "I", n.ln(t + 3), "torch.distributed.elastic.agent.server.api", 879, n.launcher_pid)
                         + "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.")

    def stack(self, where):
        c = self.cfg
        S = c.workdir + "/" + self.script
        T = c.workdir + "/trainer"
        base = [Frame(S, 301, "<module>", "main()"),
                Frame(c.libdir + "/torch/distributed/elastic/multiprocessing/errors/__init__.py", 355, "wrapper", "return f(*args, **kwargs)"),
                Frame(S, 288, "main", "trainer.run()")]
        d = {"init_pg": [Frame(S, 276, "main", "dist.init_process_group(\"nccl\", timeout=timedelta(seconds=cfg.nccl_timeout))")],
             "model_build": [Frame(T + "/trainer.py", 88, "run", "self.model = self.build_model()"),
                             Frame(T + "/trainer.py", 141, "build_model", "model = load_pretrained(self.cfg.model)")],
             "data_build": [Frame(T + "/trainer.py", 91, "run", "self.loader = build_loader(self.cfg.data, self.rank, self.world)"),
                            Frame(T + "/data.py", 57, "build_loader", "ds = TokenShardDataset(cfg.path, cfg.seq_len)"),
                            Frame(T + "/data.py", 23, "__init__", "self.shards = sorted(open_shards(path))")],
             "ckpt_load": [Frame(T + "/trainer.py", 95, "run", "self.step = self.ckpt.load(self.model, self.optim)"),
                           Frame(T + "/ckpt.py", 71, "load", "dcp.load(state, checkpoint_id=path)")],
             "eval": [Frame(T + "/trainer.py", 122, "run", "self.evaluate()"),
                      Frame(T + "/trainer.py", 201, "evaluate", "dist.all_reduce(loss_sum)")],
             "ckpt_save": [Frame(T + "/trainer.py", 125, "run", "self.ckpt.save(self.step, self.model, self.optim)"),
                           Frame(T + "/ckpt.py", 44, "save", "torch.save(shard_state, os.path.join(path, f\"shard_{self.rank:05d}.pt\"))")],
             "data_next": [Frame(T + "/trainer.py", 104, "run", "batch = next(self.batches)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 630, "__next__", "data = self._next_data()"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                           Frame(c.libdir + "/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                           Frame(c.libdir + "/torch/_utils.py", 706, "reraise", "raise exception")],
             "backward": [Frame(T + "/trainer.py", 111, "run", "loss.backward()"),
                          Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward("),
                          Frame(c.libdir + "/torch/autograd/__init__.py", 289, "backward", "_engine_run_backward("),
                          Frame(c.libdir + "/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")],
             "optimizer": [Frame(T + "/trainer.py", 115, "run", "gnorm = clip_grad_norm_(self.model.parameters(), self.cfg.clip)")],
             }
        return base + d.get(where, [Frame(T + "/trainer.py", 108, "run", "loss = self.model(**batch).loss"),
                                    Frame(c.libdir + "/torch/nn/modules/module.py", 1553, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
                                    Frame(c.libdir + "/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)")])

    def teardown(self, t, failed, reason="crash"):
        torchrun_teardown(self, t, failed)


# =============================================================================== custom DDP trainer, logs via journald (syslog prefixes)
class SyslogStyle(Style):
    name = "syslog"
    framework = "custom-ddp"
    launcher = "systemd"
    script = "train_ddp.py"
    progress_everywhere = True

    def decorate(self, node, t, src, text):
        lt = node.ln(t)
        if src == "K":
            return "%s %s kernel: %s" % (ts_syslog(lt), node.host, text)
        if src == "Y":
            return "%s %s systemd[1]: %s" % (ts_syslog(lt), node.host, text)
        return "%s %s %s[%d]: %s" % (ts_syslog(lt), node.host, self.cfg.syslog_ident, node.launcher_pid, text)

    def say(self, node, t, src, text, role=None, kind=None):
        # the journal timestamps each line when it arrives
        for line in text.split("\n"):
            node.now = t
            node.put(self.decorate(node, t, src, line), role, kind)
            t += 0.0002

    def init_launch(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, "Y", "Started %s - LLM pretraining worker (node %d)." % (c.unit, n.idx))
            for x in torchrun_omp_banner(self.tf, n.ln(t), n.launcher_pid):
                self.say(n, t + 1, "L", x)
            per = {lr: self.torch_warnings(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t + 2, per)
        return t + self.rng.uniform(3, 10)

    def init_dist(self, t, upto_nccl=False):
        c = self.cfg
        if upto_nccl:
            return t
        for n in self.nodes():
            per = {lr: self.nccl_init(n, t, lr) for lr in self.local_ranks()}
            self.rank_block(n, t, per)
            self.say(n, t + 1, 0, "[node %d] rank %d-%d up, world=%d, backend=nccl" % (n.idx, n.idx * c.gpn, n.idx * c.gpn + c.gpn - 1, c.world))
        return t + 3

    def model_loading(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, "model=%s params=%s dtype=bfloat16 ddp=true" % (c.model_name, human_params(c.n_params).replace(" ", "")))
        if c.resume:
            self.resume_announce(t + 1)
        for n in self.nodes():
            pass
        return t + (self.rng.uniform(30, 90) if c.resume else self.rng.uniform(5, 20))

    def resume_announce(self, t):
        for n in self.nodes():
            self.say(n, t, 0, "resume: loading %s" % self.cfg.resume_path)

    def data_loading(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, "data: %s shards=%d workers=%d" % (c.data_path, c.n_shards, c.dl_workers))
        return t + self.rng.uniform(2, 10)

    def on_step(self, k, t, m):
        c = self.cfg
        if k % c.log_every:
            return
        for n in self.nodes():
            self.say(n, t + self.rng.uniform(0, 0.05), 0, "it=%d samples=%d loss=%.4f lr=%.3e dt=%.0fms tok/s=%d mem=%.1fG" % (
                k, k * c.gbs, m["loss"], m["lr"], m.get("node_step_time", {}).get(n.idx, m["step_time"]) * 1000, c.gbs * c.seq_len / m["step_time"], c.mem_gb))

    def on_eval_begin(self, k, t):
        for n in self.nodes():
            self.say(n, t, 0, "eval it=%d starting (%d batches)" % (k, self.cfg.eval_batches))

    def on_eval_end(self, k, t, m):
        for n in self.nodes():
            self.say(n, t, 0, "eval it=%d val_loss=%.4f ppl=%.2f" % (k, m["val_loss"], math.exp(min(m["val_loss"], 20))))

    def on_ckpt_begin(self, k, t):
        for n in self.nodes():
            if n.idx == 0:
                self.say(n, t, 0, "ckpt it=%d -> %s/it_%07d.pt" % (k, self.cfg.ckpt_dir, k))

    def on_ckpt_end(self, k, t):
        self.say(self.head(), t, 0, "ckpt it=%d saved in %.1fs" % (k, self.cfg.ckpt_time))

    def finish(self, t):
        c = self.cfg
        for n in self.nodes():
            self.say(n, t, 0, "done it=%d" % c.total_steps)
            per = {lr: self.destroy_warning(n, t + 1, lr) for lr in self.local_ranks()}
            self.rank_block(n, t + 1, per)
            if n.idx not in self.job.bad_exit_nodes:
                self.say(n, t + 3, "Y", "%s: Deactivated successfully." % c.unit)
                self.say(n, t + 3, "Y", "%s: Consumed %dh %dmin %.3fs CPU time." % (c.unit, self.rng.randint(100, 900), self.rng.randint(0, 59), self.rng.uniform(0, 60)))

    def stack(self, where):
        return JsonlStyle.stack(self, where)

    def teardown(self, t, failed, reason="crash"):
        torchrun_teardown(self, t, failed)
        c = self.cfg
        for idx, lst in sorted(failed.items()):
            n = self.job.nodes[idx]
            if n.dead_at is not None:
                continue
            te = max(x[2] for x in lst) + self.rng.uniform(3, 8)
            self.say(n, te, "Y", "%s: Main process exited, code=exited, status=1/FAILURE" % c.unit, SYM, "systemd_failed")
            self.say(n, te, "Y", "%s: Failed with result 'exit-code'." % c.unit, SYM, "systemd_failed")


STYLES = {s.name: s for s in (LightningStyle, FabricStyle, NemoStyle, ComposerStyle, ColossalStyle, VerlStyle, JsonlStyle, SyslogStyle)}
