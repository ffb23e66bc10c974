"""Per-job dialects of the simulator: what real sites vary around a framework's own lines.

Why: with one fixed format per framework every simulated Megatron job speaks exactly the
same dialect, so figures measured on the simulator say little about real logs.  Real jobs
of one framework differ in how the training script stamps its own lines (timestamp and
level formats), in how a framework version or a user script words its generic lines
(iteration lines, save/evaluation/start-up announcements), in who-prefixes (torchrun,
Slurm ``--label``, pdsh, kubectl, layered), host-name schemes, ranks per node, and in which
ranks print what.  A :class:`Dialect` records those choices for one job; it is drawn from
its own random stream so the fault plan of a seed does not move.

Only healthy generic lines are restyled.  A fault's own messages (the blocks of
:mod:`l4.sim.simdata`) are never touched: their texts come from real reports.
"""

from __future__ import annotations

import random
import re
import time
import zlib
from dataclasses import asdict, dataclass, field

__all__ = ["Dialect", "pick_dialect", "restyle_lines", "header", "progress_body", "NATIVE"]

TS_FORMATS = ("py_ts", "dot_ts", "iso_ts3", "brk_ts", "none", "epoch_ts", "us_ts")
LEVEL_FORMATS = ("std", "bracket", "glog", "dash", "none")
ITER_STYLES = ("iteration", "step", "epoch_batch", "it_eq", "global_step")
HOST_SCHEMES = ("node", "gpu", "cn", "dgx", "aws", "nid", "compute", "hgx")


@dataclass
class Dialect:
    """One job's dialect.  ``native`` fields keep the framework's own default."""

    ts: str = "native"  # timestamp of the script's own lines, a TS_FORMATS entry
    level: str = "native"  # level format, a LEVEL_FORMATS entry
    logger: str = "__main__"  # logger name in ``INFO:name:`` / `` - name - INFO - ``
    wrap_plain: bool = False  # Megatron: a fork routes print_rank_0 through logging
    iter_style: str = "native"  # an ITER_STYLES entry
    progress_who: str = "native"  # r0 | last | l0 | all: who prints the progress line
    banner_who: str = "native"  # r0 | l0 | all: who prints rank-0 announcements
    inner: str = "native"  # torchrun prefix: default | rank | none (or the launcher's)
    outer: str = "none"  # none | label | pdsh | kubectl: what the collector adds per node
    host_scheme: str = "native"
    rpn: int | None = None  # ranks per node, when the dialect overrides the configuration
    paraphrase: dict[str, int] = field(default_factory=dict)  # template id -> variant (1..)
    script_file: str = "train.py"
    # a tqdm bar per epoch of this many steps instead of the script's progress line (0: none);
    # its count starts over every epoch, as Lightning's and many scripts' bars do
    bar_epoch: int = 0

    def record(self) -> dict:
        """What ``truth.json`` keeps under ``style``."""
        return asdict(self)


NATIVE = Dialect()


def pick_dialect(seed: int, tag: str, *, framework: str, launcher: str, platform: str,
                 n_world_max: int) -> Dialect:
    """Draw a dialect for one job from ``(seed, tag)`` (deterministic, own stream)."""
    rng = random.Random(zlib.crc32(f"l4-dialect-{seed}-{tag}".encode()))
    # drawn from a stream of its own, so that adding it left every other draw as it was
    bars = random.Random(zlib.crc32(f"l4-bar-{seed}-{tag}".encode()))
    d = Dialect()
    if rng.random() < 0.2:  # some jobs keep every framework default
        d.host_scheme = rng.choice(HOST_SCHEMES)
        return d
    d.ts = rng.choice(TS_FORMATS)
    d.level = rng.choice(LEVEL_FORMATS)
    d.logger = rng.choice(("__main__", "__main__", "train", "root", "trainer"))
    d.wrap_plain = framework in ("megatron", "mindspeed") and rng.random() < 0.4
    d.iter_style = rng.choice(("native",) + ITER_STYLES)
    d.progress_who = rng.choice(("native", "r0", "last", "l0", "all"))
    if d.progress_who == "all" and n_world_max > 128:
        d.progress_who = "l0"
    d.banner_who = rng.choice(("native", "native", "l0", "all"))
    if d.banner_who == "all" and n_world_max > 64:
        d.banner_who = "l0"
    if launcher == "torchrun":
        d.inner = rng.choice(("default", "rank", "none"))
        outer = {"slurm": ("none", "label"), "bare": ("none", "pdsh"), "k8s": ("none", "kubectl")}
        d.outer = rng.choice(outer.get(platform, ("none",)))
    elif launcher == "srun":
        d.inner = rng.choice(("label", "none"))
    d.host_scheme = rng.choice(HOST_SCHEMES)
    if framework != "mindspeed" and rng.random() < 0.35:
        d.rpn = rng.choice((1, 2, 4, 8, 16))
    d.paraphrase = {k: rng.randrange(1, len(v) + 1) for k, v in PARAPHRASES.items() if rng.random() < 0.6}
    d.script_file = rng.choice(("train.py", "pretrain.py", "run.py", "main.py", "finetune.py"))
    if d.iter_style != "native" and bars.random() < 0.3:
        d.bar_epoch = bars.choice((8, 12, 16, 25, 50))
    return d


# --------------------------------------------------------------------------------------
# Headers: the script's own timestamp + level format.
# --------------------------------------------------------------------------------------

_TS_CACHE: dict[tuple[str, int], str] = {}


def _ts(fmt: str, t: float) -> str:
    if fmt in ("epoch_ts", "none", "native"):
        return f"{t:.3f}" if fmt == "epoch_ts" else ""
    sec = int(t)
    key = (fmt, sec)
    base = _TS_CACHE.get(key)
    if base is None:
        if len(_TS_CACHE) > 50_000:
            _TS_CACHE.clear()
        base = _TS_CACHE[key] = _ts_sec(fmt, sec)
    if fmt in ("py_ts", "dot_ts", "iso_ts3"):
        sep = "," if fmt == "py_ts" else "."
        return f"{base}{sep}{int((t % 1) * 1000):03d}"
    return base


def _ts_sec(fmt: str, sec: int) -> str:
    tm = time.gmtime(sec)
    if fmt in ("py_ts", "dot_ts"):
        return time.strftime("%Y-%m-%d %H:%M:%S", tm)
    if fmt == "iso_ts3":
        return time.strftime("%Y-%m-%dT%H:%M:%S", tm)
    if fmt == "brk_ts":
        return time.strftime("[%Y-%m-%d %H:%M:%S]", tm)
    if fmt == "us_ts":
        return time.strftime("%m/%d/%Y %H:%M:%S", tm)
    if fmt == "glog_md":
        return time.strftime("%m%d %H:%M:%S", tm)
    return ""


def header(d: Dialect, t: float, level: str, pid: int | str, lineno: int) -> str:
    """The text a job's logging setup puts before a message of ``level`` at time ``t``."""
    level = level.upper()
    if d.level == "glog":
        md = _ts("glog_md", t)
        return f"{level[0]}{md}.{int((t % 1) * 1e6):06d} {pid} {d.script_file}:{lineno}] "
    ts = _ts(d.ts, t)
    if d.level == "std":
        body = f"{level}:{d.logger}:"
        return f"{ts} {body}" if ts else body
    if d.level == "bracket":
        return f"{ts} [{level}] " if ts else f"[{level}] "
    if d.level == "dash":
        return f"{ts} - {d.logger} - {level} - " if ts else f"{d.logger} - {level} - "
    return f"{ts} " if ts else ""


def restyled(d: Dialect) -> bool:
    """Whether the dialect replaces the script's own headers."""
    return d.level != "native"


# --------------------------------------------------------------------------------------
# Template restyling of healthy step texts.
# --------------------------------------------------------------------------------------

_LEVEL = r"(INFO|WARNING|DEBUG|ERROR)"
_SCRIPT_HEADS = (
    re.compile(r"^\[titan\] \{py_ts\} - root - " + _LEVEL + " - (.*)$"),
    re.compile(r"^\{loguru_ts\} \| " + _LEVEL + r" +\| __main__:\w+:\d+ - (.*)$"),
    re.compile(r"^\{us_ts\} - " + _LEVEL + r" - __main__ - (.*)$"),
)
_FOREIGN = ("NCCL INFO", "HCCL(", "make:", "Loading checkpoint shards", "INFO:", "WARNING:",
            "[INFO", "@args", "[{py_ts}]", "Map ", "Running tokenizer", "Grouping texts")


def _head_field(level: str, tmpl: str) -> str:
    return f"{{dhead_{level}_{zlib.crc32(tmpl.encode()) % 900 + 40}}}"


def restyle_template(d: Dialect, framework: str, tmpl: str) -> str:
    """One healthy template in dialect ``d``: paraphrased, then its header replaced."""
    tmpl = paraphrased(d, tmpl)
    if not restyled(d):
        return tmpl
    for rx in _SCRIPT_HEADS:
        m = rx.match(tmpl)
        if m:
            return _head_field(m.group(1), m.group(2)) + m.group(2)
    if (d.wrap_plain and framework in ("megatron", "mindspeed") and tmpl.strip()
            and not any(x in tmpl for x in _FOREIGN) and not tmpl.startswith(("-", "  ", "R "))):
        return _head_field("INFO", tmpl) + tmpl
    return tmpl


def restyle_lines(d: Dialect, framework: str, lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(stream, template)`` pairs of a step in dialect ``d`` (rank lines only)."""
    return [(s, restyle_template(d, framework, t) if s == "R" else t) for s, t in lines]


# Generic announcements a framework version or a user script words differently.  Keys are
# the templates of :mod:`l4.sim.simdata` (without stream/key characters); a dialect picks
# variant k (1-based) of some of them.  None may contain a fault marker.
PARAPHRASES: dict[str, tuple[str, ...]] = {
    "training ...": ("Starting training loop ...", ">>> start training", "begin training"),
    "building GPT model ...": ("> building GPT model ...", "building model (GPT) ..."),
    "> building train, validation, and test datasets ...": (
        "> building train/valid/test datasets ...", "building datasets for train, valid and test ..."),
    "saving checkpoint at iteration {it:7d} to {ckpt_dir} in torch_dist format": (
        "saving checkpoint at iteration {it:7d} to {ckpt_dir}",
        "Saving checkpoint to {ckpt_dir}/iter_{it:07d}",
        "[ckpt] writing iteration {it} to {ckpt_dir}"),
    "  successfully saved checkpoint from iteration {it:7d} to {ckpt_dir} [ t 1/{tp}, p 1/{pp} ]": (
        "  successfully saved checkpoint at iteration {it:7d} to {ckpt_dir}",
        "Checkpoint for iteration {it} written to {ckpt_dir}",
        "[ckpt] iteration {it} saved"),
    " validation loss at iteration {it} | lm loss value: {val_loss_e} | lm loss PPL: {val_ppl_e} |": (
        " validation loss at iteration {it} | lm loss: {val_loss_e} | PPL: {val_ppl_e} |",
        "eval @ iteration {it}: loss {val_loss_f} ppl {val_ppl_f}",
        "[eval] iter {it} val_loss={val_loss_f} val_ppl={val_ppl_f}"),
    "***** Evaluating perplexity, Epoch 1/1 *****": (
        "Running evaluation ...", "***** Evaluating *****", "start eval"),
    "ppl: {val_ppl_f}, loss: {val_loss_f}": (
        "eval ppl={val_ppl_f} loss={val_loss_f}", "Validation perplexity {val_ppl_f} (loss {val_loss_f})"),
    "saving the final model ...": ("Saving final model", "saving model to output dir ..."),
    "***** Running Evaluation *****": ("***** Running evaluation *****",),
    "Training completed. Do not forget to share your model on huggingface.co/models =)": (
        "Training completed.",),
    "Saving the checkpoint (or staging if async is enabled).": (
        "Saving a checkpoint at step {it}.", "Saving the checkpoint."),
    "Finished saving the checkpoint (or staging if async is enabled)in {secs_a}.{secs_b:02d} seconds.": (
        "Finished saving the checkpoint in {secs_a}.{secs_b:02d} seconds.",
        "Checkpoint saved in {secs_a}.{secs_b:02d} seconds."),
    "Training starts at step {first_iter}.": (
        "Training starts at step {first_iter}, with local batch size {lbs}",
        "Starting training from step {first_iter}"),
    "Training completed": ("Training is done", "Finished training"),
    "Starting job: Llama 3 {model_size} training": ("Starting job: llama3 {model_size}", "Launching training job"),
    "validate step: {it:2d}  loss: {val_loss_f}  memory: {mem_a}GiB({mem_pct}%)": (
        "validate step: {it}  loss: {val_loss_f}", "eval step {it} loss {val_loss_f}"),
    "***** Running training *****": ("***** Running training loop *****", "Start training"),
}
_PARA_BY_SUFFIX = sorted(PARAPHRASES, key=len, reverse=True)


def paraphrased(d: Dialect, tmpl: str) -> str:
    """``tmpl`` with its message part replaced by the dialect's paraphrase, if any."""
    if not d.paraphrase:
        return tmpl
    for key in _PARA_BY_SUFFIX:
        k = d.paraphrase.get(key)
        if k and tmpl.endswith(key):
            return tmpl[: len(tmpl) - len(key)] + PARAPHRASES[key][k - 1]
    return tmpl


# --------------------------------------------------------------------------------------
# Progress lines (the hot path): one per iteration in the dialect's wording.
# --------------------------------------------------------------------------------------

def progress_body(style: str, it: int, last: int, loss: float, lr: float, secs: float) -> str:
    """The message part of a progress line; the printed iteration number is ``it``."""
    if style == "iteration":
        return f"iteration {it}/{last} | loss {loss:.4f} | lr {lr:.3e} | {secs * 1000:.1f} ms/it"
    if style == "step":
        return f"step {it} | loss: {loss:.4f} | lr: {lr:.3e} | step time: {secs:.3f}s"
    if style == "epoch_batch":
        return f"[Epoch 0][Batch {it}/{last}] loss: {loss:.4f} lr: {lr:.2e} time: {secs:.2f}s"
    if style == "it_eq":
        return f"it={it} loss={loss:.4f} lr={lr:.3e} dt={secs:.3f}"
    return f"global_step={it}, loss={loss:.4f}, lr={lr:.3e}, step_time={secs:.3f}"


def epoch_bar(it: int, steps: int, elapsed: float, per: float, loss: float) -> str:
    """tqdm's line for global step ``it`` (1-based) on a bar of ``steps`` per epoch, as
    ``tqdm(loader, desc=f"Epoch {e}")`` with a loss postfix draws it under ``--tee``."""
    epoch, k = divmod(it - 1, steps)
    k += 1
    pct = int(100 * k / steps)
    filled = int(10 * k / steps)
    bar = "█" * filled + " " * (10 - filled)
    remain = max(0.0, (steps - k) * per)
    rate = f"{1 / per:.2f}it/s" if per < 1 else f"{per:.2f}s/it"
    return (f"Epoch {epoch}: {pct:3d}%|{bar}| {k}/{steps} [{_mmss(elapsed)}<{_mmss(remain)}, "
            f"{rate}, loss={loss:.3g}]")


def _mmss(sec: float) -> str:
    m, s = divmod(int(sec), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


EPOCH_BAR = r"Epoch (\d+): +\d+%\|.{10}\| (\d+)/(\d+) \["


def progress_pattern(style: str) -> str:
    """A regex whose group 1 is the printed iteration number (for tests and tools); for
    ``epoch_bar``, :data:`EPOCH_BAR` (epoch, step in it, steps per epoch)."""
    if style == "epoch_bar":
        return EPOCH_BAR
    return {"iteration": r"iteration (\d+)/\d+ \| loss", "step": r"step (\d+) \| loss:",
            "epoch_batch": r"\[Epoch 0\]\[Batch (\d+)/", "it_eq": r"\bit=(\d+) loss=",
            "global_step": r"global_step=(\d+), loss="}[style]
