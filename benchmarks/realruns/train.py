"""A tiny but real distributed training job, for the real-run benchmark.

Why it exists: l4 must be right on logs it did not write.  This script is launched by
``torchrun`` (gloo over loopback, one launcher per "node") from ``make_runs.py`` and goes
through the seven stages real jobs go through -- initialization, data loading, model
loading, training, checkpointing, evaluation, finalization -- printing what a real site's
script prints, in one of several logging dialects (``--style``).  Faults are real: the
harness removes a file or module on one node, or sets ``L4RR_FAULT`` in one launcher's
environment, and this script then kills, stops, starves or poisons itself at the
iteration it is told; everything that ends up in the logs is printed by torch, torchrun,
gloo, Python or this script.

Layout of a node's working directory (``--node-dir``): ``data/shard-<rank>.pt`` (one
shard per global rank), ``data/val.pt``, ``init.pt`` (weights loaded at start-up),
``ckpt/`` (periodic checkpoints), ``export/`` (the final save).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import faulthandler
import logging
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rrhelpers  # noqa: E402  (a node whose code copy lacks it fails at start-up: a real ImportError)

# ---------------------------------------------------------------------------------------
# logging dialects: each is a real way sites print progress
# ---------------------------------------------------------------------------------------
LOG_FORMATS = {
    "plain": None,  # bare print()
    "asctime_level": "%(asctime)s %(levelname)s %(name)s: %(message)s",
    "asctime": "%(asctime)s - %(message)s",
    "bracket": "[%(asctime)s] [%(levelname)s] %(message)s",
    "level_only": "%(levelname)s:%(name)s:%(message)s",
}
ITER_FORMATS = {
    "iter_slash": "iter {it}/{total} loss={loss:.4f} lr={lr:.2e} time={ms:.1f}ms",
    "step_pipe": "step: {it} | loss {loss:.5f} | grad_norm {gn:.3f} | {ms:.1f} ms/step",
    "epoch_batch": "[Epoch {ep}][Batch {it}] loss: {loss:.4f}, lr: {lr:.6f}",
    "megatron": " iteration {it:8d}/{total:8d} | elapsed time per iteration (ms): {ms:.1f} | "
                "learning rate: {lr:.3E} | lm loss: {loss:.6E} |",
    "kv": "global_step={it} train_loss={loss:.4f} samples_per_sec={sps:.1f}",
    # DeepSpeed's throughput timer line: two counters that advance together
    "ds_throughput": "epoch={ep0}/micro_step={it}/global_step={it}, RunningAvgSamplesPerSec={sps:.3f}, "
                     "CurrSamplesPerSec={sps:.3f}, MemAllocated=0.0GB, MaxMemAllocated=0.0GB",
    # progress bars (tqdm, as Hugging Face Trainer and PyTorch Lightning draw them): one
    # over all steps, or one per epoch; a loss dict every LOG_EVERY steps, as Trainer logs
    "tqdm": None,
    "tqdm_epoch": None,
}
BARS = ("tqdm", "tqdm_epoch")
LOG_EVERY = 10

#: how a script words its phases: each key is one moment of the run, each value the lines
#: printed there ("default" is what configurations before PHASE_WORDS_FROM print). Real
#: sites differ in exactly this: Hugging Face Trainer's banners, DeepSpeed's log_dist
#: lines, or a script that prints nothing but its progress.
PHASE_WORDS: dict[str, dict[str, list[str]]] = {
    "default": {
        "data_load": ["loading training data from {shard}"],
        "data_ready": ["dataset ready: {n} samples, {nb} batches per epoch, num_workers={workers}"],
        "weights_load": ["loading pretrained weights from {init}"],
        "model_ready": ["model loaded: {npar} parameters, resumed from step {step0}"],
        "train_start": ["starting training for {iters} iterations"],
        "ckpt_start": ["saving checkpoint at iteration {it} to {path}"],
        "ckpt_done": ["checkpoint saved: {path}"],
        "eval_start": ["running evaluation at iteration {it}"],
        "eval_done": ["eval: iteration {it} val_loss={val:.4f}"],
        "final_start": ["training finished, saving final model"],
        "final_done": ["final model written to {final}"],
        "done": ["done"],
    },
    "hf": {
        "data_load": ["Loading dataset shard {shard}"],
        "data_ready": ["***** Running training *****", "  Num examples = {n}",
                       "  Num Epochs = {epochs}", "  Total optimization steps = {iters}"],
        "weights_load": ["loading weights file {init}"],
        "model_ready": ["All model checkpoint weights were used when initializing MLP."],
        "train_start": [],
        "ckpt_start": ["Saving model checkpoint to {ckdir}/checkpoint-{it}"],
        "ckpt_done": ["Model weights saved in {path}"],
        "eval_start": ["***** Running Evaluation *****", "  Num examples = {nval}", "  Batch size = {batch}"],
        "eval_done": ["{{'eval_loss': {val:.4f}, 'eval_runtime': 0.0123, 'epoch': {epf:.2f}}}"],
        "final_start": ["Training completed. Do not forget to share your model on huggingface.co/models =)"],
        "final_done": ["Saving model checkpoint to {final}"],
        "done": [],
    },
    "deepspeed": {
        "data_load": ["[Rank {rank}] reading samples from {shard}"],
        "data_ready": [],
        "weights_load": ["[Rank {rank}] Loading model from {init}"],
        "model_ready": ["[Rank {rank}] Successfully loaded {npar} parameters"],
        "train_start": [],
        "ckpt_start": ["[Rank {rank}] Saving model checkpoint: {path}"],
        "ckpt_done": ["[Torch] Saved {path}."],
        "eval_start": [],
        "eval_done": ["validation loss at iteration {it} | lm loss value: {val:.6E} |"],
        "final_start": [],
        "final_done": ["[Rank {rank}] Saving model checkpoint: {final}", "[Torch] Saved {final}."],
        "done": [],
    },
    "quiet": {k: [] for k in ("data_load", "data_ready", "weights_load", "model_ready", "train_start",
                              "ckpt_start", "ckpt_done", "eval_start", "eval_done", "final_start",
                              "final_done", "done")},
}


class Out:
    """One way of printing, chosen per job: print() or logging with a site's format."""

    def __init__(self, fmt: str, rank: int, who: str) -> None:
        self.rank = rank
        self.who = who  # "all", "local0" or "global0": which ranks print progress
        self.fmt = fmt
        self.words = "default"
        if LOG_FORMATS[fmt] is None:
            self.log = None
        else:
            logging.basicConfig(level=logging.INFO, format=LOG_FORMATS[fmt], stream=sys.stdout)
            self.log = logging.getLogger("train")

    def speaks(self, local_rank: int) -> bool:
        return (self.who == "all" or (self.who == "local0" and local_rank == 0)
                or (self.who == "global0" and self.rank == 0))

    def info(self, msg: str) -> None:
        if self.log is None:
            print(msg, flush=True)
        else:
            self.log.info(msg)
            sys.stdout.flush()

    def say(self, moment: str, **fields) -> None:
        """Print the lines this job's wording has for one moment of the run (maybe none)."""
        for line in PHASE_WORDS[self.words][moment]:
            self.info(line.format(**fields))

    def warning(self, msg: str) -> None:
        if self.log is None:
            print("WARNING: " + msg, flush=True)
        else:
            self.log.warning(msg)
            sys.stdout.flush()


class ShardDataset(Dataset):
    """A rank's shard of (x, y) pairs, loaded from the node's local disk."""

    def __init__(self, path: Path) -> None:
        blob = torch.load(path, weights_only=True)
        self.x, self.y = blob["x"], blob["y"]

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


#: per-bucket loss weights (every sample's bucket id indexes this table)
BUCKET_WEIGHTS = torch.ones(4)


def build_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def kill_node() -> None:
    """What a power loss does: the launcher and every process it started die at once.

    torchrun starts workers in sessions of their own, so the launcher's process group
    does not cover them: walk /proc for every descendant of the launcher instead."""
    launcher = os.getppid()
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    todo, family = [launcher], []
    while todo:
        p = todo.pop()
        family.append(p)
        todo.extend(children.get(p, []))
    for p in family:
        if p != os.getpid():
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    os.kill(os.getpid(), signal.SIGKILL)


def inject(kind: str, loader_iter) -> None:
    """Faults that happen inside the training loop, at the start of iteration ``it``."""
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "sigsegv":
        ctypes.string_at(0)  # a real invalid read
    elif kind == "oom":
        # more than the machine has: the allocator refuses
        torch.empty(1 << 44, dtype=torch.float32).fill_(1.0)
    elif kind == "hang":
        time.sleep(3600)
    elif kind == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "node_down":
        kill_node()
    elif kind == "dl_worker_kill":
        for w in getattr(loader_iter, "_workers", []):
            os.kill(w.pid, signal.SIGKILL)
        time.sleep(2.0)  # the DataLoader's SIGCHLD handler raises here or at the next batch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--node-dir", type=Path, required=True)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--log-format", choices=sorted(LOG_FORMATS), default="plain")
    ap.add_argument("--iter-format", choices=sorted(ITER_FORMATS), default="iter_slash")
    ap.add_argument("--who", choices=("all", "local0", "global0"), default="local0")
    ap.add_argument("--phase-words", choices=sorted(PHASE_WORDS), default="default")
    ap.add_argument("--step-sleep", type=float, default=0.05)
    ap.add_argument("--faulthandler", action="store_true")
    ap.add_argument("--record", action="store_true", help="(consumed before main: torchrun's @record)")
    args = ap.parse_args()

    if args.faulthandler:
        faulthandler.enable()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    host = os.environ.get("L4RR_HOST", "localhost")
    fault = os.environ.get("L4RR_FAULT", "")
    fault_at = int(os.environ.get("L4RR_FAULT_AT", "0"))
    fault_rank = int(os.environ.get("L4RR_FAULT_LOCAL_RANK", "0"))
    mine = bool(fault) and local_rank == fault_rank
    out = Out(args.log_format, rank, args.who)
    out.words = args.phase_words
    talk = out.speaks(local_rank)
    torch.manual_seed(1234 + rank)
    torch.set_num_threads(1)

    # ---- initialization
    if talk:
        out.info(f"[{host}] rank {rank}/{world} (local {local_rank}) initializing process group "
                 f"backend=gloo timeout={args.timeout}s")
    dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=args.timeout))
    if talk:
        out.info(f"process group ready: world_size={dist.get_world_size()} rank={dist.get_rank()} "
                 f"{rrhelpers.describe_env()}")

    # ---- data loading
    data_dir = args.node_dir / "data"
    shard = data_dir / f"shard-{rank:05d}.pt"
    if talk:
        out.say("data_load", shard=shard, rank=rank)
    ds = ShardDataset(shard)
    loader = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                        drop_last=True, persistent_workers=args.workers > 0)
    if talk:
        out.say("data_ready", n=len(ds), nb=len(loader), workers=args.workers, rank=rank,
                epochs=-(-args.iters // max(len(loader), 1)), iters=args.iters)

    # ---- model loading
    model = build_model()
    init = args.node_dir / "init.pt"
    if talk:
        out.say("weights_load", init=init, rank=rank)
    state = torch.load(init, weights_only=True)
    model.load_state_dict(state["model"])
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    if talk:
        n_par = sum(p.numel() for p in model.parameters())
        out.say("model_ready", npar=n_par, step0=state.get("step", 0), rank=rank)
    dist.barrier()

    # ---- training
    if talk:
        out.say("train_start", iters=args.iters, rank=rank)
    fmt = ITER_FORMATS[args.iter_format]
    it, epoch = 0, 0
    loader_iter = iter(loader)
    bar = None
    if talk and args.iter_format in BARS:
        from tqdm import tqdm  # the real progress bar: "\r"-rewritten lines on stderr

        def new_bar(ep: int):
            if args.iter_format == "tqdm":
                return tqdm(total=args.iters, file=sys.stderr, mininterval=0, ncols=100)
            return tqdm(total=len(loader), file=sys.stderr, desc=f"Epoch {ep}", mininterval=0,
                        ncols=110)

        bar = new_bar(0)
    slow = 0.0
    while it < args.iters:
        it += 1
        t0 = time.perf_counter()
        if mine and fault == "straggler" and it >= fault_at:
            slow = 1.5
        if mine and it == fault_at and fault not in ("straggler", "nan", "bad_sample"):
            inject(fault, loader_iter)
        try:
            x, y = next(loader_iter)
        except StopIteration:
            epoch += 1
            loader_iter = iter(loader)
            x, y = next(loader_iter)
            if bar is not None and args.iter_format == "tqdm_epoch":
                bar.close()
                bar = new_bar(epoch)
        if mine and fault == "nan" and it >= fault_at:
            x = x * float("nan")  # one rank's data goes bad
        # every sample carries a bucket id that weighs its loss (all buckets weigh 1): a
        # sample with an id outside the table is a real user-data bug, found by indexing
        bucket = torch.zeros(y.shape[0], dtype=torch.long)
        if mine and fault == "bad_sample" and it == fault_at:
            bucket[-1] = len(BUCKET_WEIGHTS) + 3 + local_rank
        w = BUCKET_WEIGHTS[bucket]
        loss = (w * (ddp(x).squeeze(-1) - y) ** 2).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"Loss is {loss.item()} at iteration {it}, stopping training")
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1e9))
        opt.step()
        time.sleep(args.step_sleep + slow)
        ms = (time.perf_counter() - t0) * 1000
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.4f}", refresh=True)
            if it % LOG_EVERY == 0:
                bar.write(str({"loss": round(loss.item(), 4), "grad_norm": round(gn, 4),
                               "learning_rate": 0.01, "epoch": round(it / len(loader), 2)}),
                          file=sys.stdout)
        elif talk:
            out.info(fmt.format(it=it, total=args.iters, loss=loss.item(), lr=0.01, ms=ms, gn=gn,
                                ep=epoch + 1, ep0=epoch, sps=args.batch / max(ms, 1e-3) * 1000))

        # ---- checkpointing (node-local disk: local rank 0 of each node writes)
        if it % args.ckpt_every == 0 and it < args.iters:
            path = args.node_dir / "ckpt" / f"step_{it:06d}.pt"
            if local_rank == 0:
                if talk:
                    out.say("ckpt_start", it=it, path=path, ckdir=path.parent, rank=rank)
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": it}, path)
                if talk:
                    out.say("ckpt_done", it=it, path=path, rank=rank)
            dist.barrier()

        # ---- evaluation
        if it % args.eval_every == 0 and it < args.iters:
            if talk:
                out.say("eval_start", it=it, nval=64, batch=args.batch, rank=rank)
            val = torch.load(data_dir / "val.pt", weights_only=True)
            with torch.no_grad():
                vl = torch.nn.functional.mse_loss(model(val["x"]).squeeze(-1), val["y"])
            t = vl.detach().clone()
            dist.all_reduce(t)
            if talk:
                out.say("eval_done", it=it, val=t.item() / world, epf=it / max(len(loader), 1), rank=rank)

    # ---- finalization
    if bar is not None:
        bar.close()
    if talk:
        out.say("final_start", rank=rank)
    if local_rank == 0:
        final = args.node_dir / "export" / "model_final.pt"
        torch.save({"model": model.state_dict(), "step": it}, final)
        if talk:
            out.say("final_done", final=final, rank=rank)
    dist.barrier()
    dist.destroy_process_group()
    if talk:
        out.say("done", rank=rank)
    return 0


if __name__ == "__main__":
    if "--record" in sys.argv:
        # sites that follow torchrun's advice: the launcher's error summary then carries
        # the worker's exception instead of "To enable traceback see ..."
        from torch.distributed.elastic.multiprocessing.errors import record

        sys.exit(record(main)())
    sys.exit(main())
