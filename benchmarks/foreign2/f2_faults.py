"""Fault catalogue of the foreign2 generator.

Each kind renders the culprit's own output (indicators), the peers' propagated errors
and the launcher's teardown (symptoms).  The message texts follow public sources:
framework/launcher code and real failure reports (addresses in SOURCES / README.md).
"""
from __future__ import annotations

from f2_base import (
    IND,
    SYM,
    Frame,
    Nccl,
    Op,
    cuda_tail,
    dist_backend_error,
    gib,
    slurmstepd_cancel,
    srun_task_msg,
    traceback_lines,
    ts_logging,
    watchdog_cuda_error_block,
    watchdog_timeout_block,
)

HW, USER, PLAT, FW = "hardware", "user", "platform", "framework"
ALL = None
TRAIN_STYLES = ("lightning", "fabric", "nemo", "composer", "colossalai", "jsonl", "syslog")
TORCHISH = ("lightning", "fabric", "nemo", "composer", "colossalai", "jsonl", "syslog")


class Kind:
    def __init__(self, id, category, stage, root_cause, source, fn, styles=ALL, phase="train",
                 needs_resume=False, job_wide=False, silent=False):
        self.id, self.category, self.stage, self.root_cause = id, category, stage, root_cause
        self.source, self.fn, self.styles, self.phase = source, fn, styles, phase
        self.needs_resume, self.job_wide, self.silent = needs_resume, job_wide, silent


CATALOGUE: dict[str, Kind] = {}


def kind(id, category, stage, root_cause, source, styles=ALL, phase="train", needs_resume=False, job_wide=False, silent=False):
    def deco(fn):
        CATALOGUE[id] = Kind(id, category, stage, root_cause, source, fn, styles, phase, needs_resume, job_wide, silent)
        return fn
    return deco


# =============================================================================== helpers
def S(job):
    return job.style


def op_for(job, F, phase="train"):
    c = job.cfg
    rng = job.rng
    seq = F * c.ops_per_step + rng.randint(1, c.ops_per_step)
    if phase == "eval":
        return Op(seq, rng.choice(["_ALLGATHER_BASE", "ALLREDUCE", "ALLGATHER"]), rng.choice([1, 2, 4, 8192]))
    if phase == "ckpt":
        return Op(seq, rng.choice(["BROADCAST", "ALLGATHER", "_ALLGATHER_BASE"]), rng.choice([1, 1, 2048]))
    name = rng.choice(["ALLREDUCE", "_REDUCE_SCATTER_BASE", "_ALLGATHER_BASE", "ALLREDUCE"])
    nin = rng.choice([1, 262144, 16777216, 52428800, 131072000])
    if name == "_ALLGATHER_BASE":
        return Op(seq, name, nin // max(1, c.world), nin)
    if name == "_REDUCE_SCATTER_BASE":
        return Op(seq, name, nin, nin // max(1, c.world))
    return Op(seq, name, nin)


def exception(job, n, lr, t, where, inner, exc, kind, role=IND, chain=None):
    st = S(job)
    if st.name == "verl":
        frames = st.stack(where) + inner
        tb = traceback_lines(frames, exc, py311=job.cfg.py311)
        if chain:
            tb = chain + [("", "frame"), ("The above exception was the direct cause of the following exception:", "frame"), ("", "frame")] + tb
        for text, part in tb:
            st.say_worker(n, t, lr, text, role, kind if part == "exc" else kind + ":context")
        return
    st.print_exception(n, t, lr, where, inner, exc, role, kind, chain)


def say_pairs(job, n, t, lr, pairs, role):
    st = S(job)
    n.at(t)
    if st.name == "verl":
        for text, k in pairs:
            st.say_worker(n, t, lr, text, role if k else None, k)
        return
    for text, k in pairs:
        st.say(n, t, lr, text, role if k else None, k)


def tagged_block(job, n, t, per: dict, role):
    """per: lr -> [(text, kind)] ; interleave ranks."""
    from f2_base import interleave
    st = S(job)
    blocks = [[(lr, x) for x in lines] for lr, lines in per.items() if lines]
    n.at(t)
    for lr, (text, k) in interleave(job.rng, blocks):
        if st.name == "verl":
            st.say_worker(n, t, lr, text, role if k else None, k)
        else:
            st.say(n, t, lr, text, role if k else None, k)
        t += 0.0001
        n.at(t)


def watchdog_peers(job, n, lrs, t_det, op):
    c = job.cfg
    per = {}
    for lr in lrs:
        g = S(job).grank(n, lr)
        per[lr] = watchdog_timeout_block(job.tf, job.rng, g, n.ln(t_det + job.rng.uniform(0, 0.4)), op, c.timeout_s * 1000)
    tagged_block(job, n, t_det, per, SYM)


def dump_signal_lines(job, n, lrs, t, op):
    """torch >= 2.5 flight-recorder dump messages after a timeout."""
    tf = job.tf
    if tf.ver < (2, 5):
        return
    per = {}
    for i, lr in enumerate(lrs):
        g = S(job).grank(n, lr)
        if i == 0 and n.idx == 0:
            per[lr] = [(tf.c10(g, "E", n.ln(t), "ProcessGroupNCCL.cpp", 1870) + "%s Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: %d, last completed NCCL work: %d.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. " % (tf.pg(g), op.seq, op.seq - 1), "nccl_dump_signal")]
        else:
            per[lr] = [(tf.c10(g, "E", n.ln(t), "ProcessGroupNCCL.cpp", 1806) + "%s Observed flight recorder dump signal from another rank via TCPStore." % tf.pg(g), "nccl_dump_signal")]
    tagged_block(job, n, t, per, SYM)


def remote_error_peers(job, n, lrs, t_det, culprit, proto=None):
    """Peers see the culprit's NCCL connections fail (IB completion error / socket
    closed), naming the culprit's address, then the watchdog rethrows ncclRemoteError."""
    c, tf, rng = job.cfg, job.tf, job.rng
    proto = proto or ("IB" if c.net == "IB" else "Socket")
    per = {}
    W, EXC, TAT, SOME, AVOID, TERM, CHK = tf.lines
    for lr in lrs:
        g = S(job).grank(n, lr)
        nc = Nccl(job, n, lr)
        port = rng.randint(32768, 60999)
        if proto == "IB":
            last = "NET/IB : Got completion from peer %s<%d> with status=12 opcode=%d len=0 vendor err 129 (%s) localGid ::ffff:%s remoteGids::ffff:%s" % (
                culprit.ip, port, rng.choice([0, 1, 32616]), rng.choice(["Recv", "Send"]), n.ip, culprit.ip)
            warn = nc.warn("transport/net_ib.cc:1909", last)
        else:
            last = "socketProgress: Connection closed by remote peer %s<%d>" % (culprit.host, port)
            warn = nc.warn("misc/socket.cc:50", last)
        lines = [(x, "nccl_remote_peer" if x else "nccl_remote_peer:context") for x in warn]
        lines += [(nc.info("transport/net.cc:1302 -> 6"), "nccl_remote_peer:context"),
                  (nc.info("proxy.cc:698 -> 6"), "nccl_remote_peer:context"),
                  (nc.info("proxy.cc:878 -> 6 [Progress Thread]"), "nccl_remote_peer:context")]
        head = tf.c10(g, "E", n.ln(t_det + 1), "ProcessGroupNCCL.cpp", TERM)
        msg = ("%s Process group watchdog thread terminated with exception: " % tf.pg(g)) if tf.ver >= (2, 3) else "[Rank %d] NCCL watchdog thread terminated with exception: " % g
        be = dist_backend_error(tf, "ncclRemoteError", c.nccl_ver, last, where="NCCLUtils.hpp")
        first = "NCCL error: " + be[0].split(", ", 1)[1]
        lines.append((head + msg + first, "nccl_remote_error"))
        lines += [(be[1], "nccl_remote_error"), (be[2], "nccl_remote_error:context"), (be[3], "nccl_remote_error")]
        lines.append(("Exception raised from checkForNCCLErrorsInternal at %s/distributed/c10d/ProcessGroupNCCL.cpp:%d (most recent call first):" % (tf.src, CHK + 1400), "nccl_remote_error:context"))
        lines += [(f, "nccl_remote_error:context") for f in tf.frames(rng, "timeout")[:1] + tf.frames(rng, "rethrow")[1:]]
        lines.append(("", "nccl_remote_error:context"))
        lines.append(("terminate called after throwing an instance of 'c10::DistBackendError'" if tf.ver >= (2, 3) else "terminate called after throwing an instance of 'std::runtime_error'", "nccl_remote_error"))
        lines.append(("  what():  " + msg + first, "nccl_remote_error"))
        lines += [(be[1], "nccl_remote_error"), (be[2], "nccl_remote_error:context"), (be[3], "nccl_remote_error")]
        per[lr] = lines
    tagged_block(job, n, t_det, per, SYM)


def propagate(job, t_fail, crashed: dict, op, remote=None, mode=None, hang_nodes=()):
    """After ranks in `crashed` (idx -> [(lr, exitcode)]) died at t_fail, render the
    peers' reaction and the launcher teardown.  remote: culprit NodeLog whose address
    peers may name.  hang_nodes: nodes whose processes are alive but silent (no
    output, no exit)."""
    st, c, rng = S(job), job.cfg, job.rng
    failed = {idx: [(x[0], x[1], (x[2] if len(x) > 2 else t_fail) + rng.uniform(0.05, 0.5)) for x in lst] for idx, lst in crashed.items()}
    crashed = {idx: [(x[0], x[1]) for x in lst] for idx, lst in crashed.items()}
    if st.name == "verl":
        return failed
    if st.launcher == "srun" and c.kill_on_bad_exit and any(ec != 0 for lst in crashed.values() for (_, ec) in lst):
        st.teardown(t_fail, failed)
        return failed
    if mode is None:
        mode = "remote" if (remote is not None and rng.random() < 0.5) else "timeout"
    t_to = t_fail + c.timeout_s + rng.uniform(0.5, 20)
    dump_done = False
    for n in job.nodes:
        if n.dead_at is not None or n.idx in hang_nodes:
            continue
        crashed_here = {lr for (lr, _) in crashed.get(n.idx, [])}
        others = [lr for lr in st.local_ranks() if lr not in crashed_here]
        if not others:
            continue
        if n.idx in crashed and st.launcher in ("torchrun", "composer", "systemd"):
            # the node's own agent kills the remaining local workers right away
            failed[n.idx] += [(lr, -15, t_fail + 1) for lr in others]
            continue
        if mode == "remote" and n.idx not in crashed and remote is not None:
            t_det = t_fail + rng.uniform(2, 40)
            k = rng.randint(1, len(others))
            seen = others[:k]
            remote_error_peers(job, n, seen, t_det, remote)
            rest = others[k:]
            if rest:
                watchdog_peers(job, n, rest, t_det + rng.uniform(1, 10), op)
            failed.setdefault(n.idx, []).extend((lr, -6, t_det + 2) for lr in others)
        else:
            td = t_to + rng.uniform(0, 3)
            if not dump_done and job.tf.ver >= (2, 5) and rng.random() < 0.5:
                dump_signal_lines(job, n, others[:2], td - 0.2, op)
                dump_done = True
            watchdog_peers(job, n, others, td, op)
            failed.setdefault(n.idx, []).extend((lr, -6, td + 0.5) for lr in others)
    st.teardown(t_fail, failed)
    return failed


def pick_culprit(job, allow_zero=True):
    n = job.cfg.n_nodes
    lo = 0 if allow_zero and job.rng.random() < 0.2 else 1
    return job.nodes[job.rng.randint(min(lo, n - 1), n - 1)]


def set_faulty(job, nodes):
    job.faulty = [n.host for n in nodes]


def all_faulty(job):
    job.faulty = [n.host for n in job.nodes]


# =============================================================================== HARDWARE
@kind("hw_gpu_ecc_uncorrectable", HW, "training",
      "Uncorrectable ECC (double-bit) error on one GPU of the culprit node; the CUDA context is lost, the rank dies and its peers block in the next collective until the NCCL watchdog or the launcher ends them.",
      "https://github.com/pytorch/pytorch/issues/113128 ; https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194",
      styles=TORCHISH + ("verl",))
def k_ecc(job, t):
    return _sticky_cuda(job, t, "uncorrectable ECC error encountered", "cuda_ecc_error")


@kind("hw_nvlink_uncorrectable", HW, "training",
      "Uncorrectable NVLink error on the culprit node during a collective/kernel; the CUDA context is poisoned and the rank aborts.",
      "https://github.com/MIC-DKFZ/nnUNet/issues/1519 ; https://github.com/NVIDIA/srt-slurm/pull/307",
      styles=TORCHISH)
def k_nvlink(job, t):
    return _sticky_cuda(job, t, "uncorrectable NVLink error detected during the execution", "cuda_nvlink_error")


def _sticky_cuda(job, t, err, kind):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    variant = rng.choice(["python", "watchdog", "both"])
    if st.name == "syslog" and kind == "cuda_ecc_error":
        st.say(n, t - 0.4, "K", "NVRM: Xid (PCI:0000:%s): 48, pid=%d, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0." % (c.busids[lr][:-3].zfill(2) + ":00", n.pids[lr]), IND, "xid_48")
        st.say(n, t - 0.3, "K", "NVRM: Xid (PCI:0000:%s): 63, pid=%d, name=python3, Row Remapper: New row (0x0000000000d8e1a0) was marked for remapping, reset gpu to activate." % (c.busids[lr][:-3].zfill(2) + ":00", n.pids[lr]), IND, "xid_63:context")
    if st.name == "syslog" and kind == "cuda_nvlink_error":
        st.say(n, t - 0.4, "K", "NVRM: Xid (PCI:0000:%s): 74, pid=%d, name=python3, NVLink: fatal error detected on link 7(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)" % (c.busids[lr][:-3].zfill(2) + ":00", n.pids[lr]), IND, "xid_74")
    ec = 1
    if variant in ("watchdog", "both"):
        per = {lr: [(x, k.replace("cuda_error_watchdog", kind)) for x, k in watchdog_cuda_error_block(tf, rng, st.grank(n, lr), n.ln(t), err)]}
        tagged_block(job, n, t, per, IND)
        ec = -6
    if variant in ("python", "both"):
        exc = ["RuntimeError: CUDA error: %s" % err] + cuda_tail(tf)
        exception(job, n, lr, t + 0.01, "backward" if st.name != "verl" else "update",
                  [] if st.name != "verl" else [Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward(")], exc, kind)
        ec = 1 if variant == "python" else -6
    if st.name == "verl":
        st.driver_failure(t + 2, n, lr, "actor_rollout_update_actor", "RuntimeError: CUDA error: %s" % err, ["RuntimeError: CUDA error: %s" % err], "update")
        return
    propagate(job, t, {n.idx: [(lr, ec)]}, op_for(job, job.F), remote=n)


@kind("hw_gpu_fallen_off_bus", HW, "training",
      "A GPU on the culprit node fell off the PCIe bus (Xid 79); CUDA calls on that rank fail with 'unknown error' and the process aborts.",
      "https://github.com/nv-tlabs/3dgrut/issues/191 ; https://github.com/NVIDIA/NVSentinel/issues/155 ; https://github.com/flatironinstitute/cryoSBI/issues/66",
      styles=TORCHISH)
def k_fallen(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    pci = c.busids[lr][:-3].zfill(2) + ":00"
    if st.name == "syslog":
        st.say(n, t - 0.2, "K", "NVRM: Xid (PCI:0000:%s): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." % pci, IND, "xid_79")
        st.say(n, t - 0.1, "K", "NVRM: GPU 0000:%s.0: GPU has fallen off the bus." % pci, IND, "xid_79:context")
    pre = st.exc_prefix(n, lr)
    pairs = [(pre + "terminate called after throwing an instance of 'c10::Error'", "cuda_unknown_error"),
             (pre + "  what():  CUDA error: unknown error", "cuda_unknown_error")]
    pairs += [(pre + x, "cuda_unknown_error:context") for x in cuda_tail(tf)]
    pairs += [("", "cuda_unknown_error:context"),
              ("Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):", "cuda_unknown_error:context")]
    pairs += [(f, "cuda_unknown_error:context") for f in tf.frames(rng, "cuda")[:4]]
    say_pairs(job, n, t, lr, pairs, IND)
    propagate(job, t, {n.idx: [(lr, -6)]}, op_for(job, job.F), remote=n)


@kind("hw_node_power_loss", HW, "training",
      "The culprit node lost power (or hard-hung) mid-training: its log simply stops; only its peers report broken connections to its address, watchdog timeouts, and the scheduler's node-failure teardown.",
      "https://github.com/NVIDIA/nccl/issues/1405 ; https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c ; https://github.com/ray-project/ray/issues/44680",
      silent=True)
def k_power(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job, allow_zero=(st.launcher not in ("srun", "ray")))
    set_faulty(job, [n])
    n.dead_at = t
    n.truncate_last = rng.random() < 0.6
    if st.name == "verl":
        h = st.head()
        tm = t + rng.uniform(20, 60)
        h.at(tm).put("(raylet) The node with node id: %s and address: %s and node name: %s has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.) " % (c.node_ids[n.idx], n.ip, n.ip), SYM, "ray_node_dead")
        h.put("(raylet) \t(2) raylet has lagging heartbeats due to slow network or busy workload.", SYM, "ray_node_dead:context")
        _verl_actor_died(job, tm + rng.uniform(1, 5), n)
        return
    crashed = {}
    failed = propagate(job, t, crashed, op_for(job, job.F), remote=n, mode="remote" if rng.random() < 0.6 else "timeout")
    if st.launcher == "srun":
        h = st.head()
        tn = t + rng.uniform(60, 400)
        h.at(tn).put("srun: error: Node failure on %s" % n.host, SYM, "srun_node_failure")
        for m in job.nodes:
            if m is n:
                continue
            m.at(tn + 1).put(slurmstepd_cancel(job.job_id, "0", m.host, m.ln(tn + 1), "NODE FAILURE"), SYM, "slurm_node_failure")
        h.at(tn + 2).put("srun: Job step aborted: Waiting up to %d seconds for job step to finish." % c.kill_wait, SYM, "srun_step_aborted")


def _verl_actor_died(job, t, n):
    st, c, rng = S(job), job.cfg, job.rng
    h = st.head()
    h.at(t)
    msg = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    st.driver_failure(t, n, 0, "actor_rollout_generate_sequences", msg,
                      [msg, "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
                       "\tactor_id: %s" % c.actor_id2,
                       "\tpid: %d" % n.pids[0],
                       "\tname: %sWorkerDict_0:%d" % (c.wg_prefix, n.idx),
                       "\tnamespace: %s" % c.ray_ns,
                       "\tip: %s" % n.ip,
                       "The actor is dead because its node has died. Node Id: %s" % c.node_ids[n.idx]], "rollout")


@kind("hw_gpu_hang_silent", HW, "training",
      "A GPU on the culprit node stopped making progress (driver/GSP hang); the culprit prints nothing, every other rank times out in the pending collective, and the whole step is torn down.",
      "https://github.com/NVIDIA/nccl/issues/1111 ; https://github.com/verl-project/verl/issues/3873 ; https://github.com/huggingface/accelerate/issues/3861",
      styles=TORCHISH, silent=True)
def k_hang(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    if st.name == "syslog":
        pci = c.busids[lr][:-3].zfill(2) + ":00"
        st.say(n, t + 6, "K", "NVRM: Xid (PCI:0000:%s): 119, pid=%d, name=python3, Timeout after 6s of waiting for RPC response from GPU%d GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4)." % (pci, n.pids[lr], lr), IND, "xid_119")
    op = op_for(job, job.F)
    # culprit's ranks are wedged: they never print the timeout; everyone else does
    propagate(job, t, {}, op, hang_nodes=(n.idx,), mode="timeout")
    td = t + c.timeout_s + 30
    if st.launcher in ("torchrun", "systemd", "composer"):
        pass
    if st.launcher == "srun" and not c.kill_on_bad_exit:
        pass


@kind("hw_ib_link_down", HW, "training",
      "The culprit node's InfiniBand port went down (link flap); NCCL on the culprit logs the port error and completion errors, peers log completion errors naming its address, and all ranks abort with ncclRemoteError.",
      "https://github.com/NVIDIA/nccl/blob/v2.21.5-1/src/transport/net_ib.cc ; https://github.com/NVIDIA/nccl/issues/1405 ; https://github.com/NVIDIA/nccl/issues/1814",
      styles=TORCHISH)
def k_ib(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    set_faulty(job, [n])
    hca = rng.randrange(c.n_hca)
    if st.name == "syslog":
        st.say(n, t - 1, "K", "mlx5_core 0000:%02x:00.0 mlx5_%d: Port: 1 Link DOWN" % (0x18 + 0x10 * hca, hca), IND, "ib_link_down")
    lrs = [lr for lr in st.local_ranks() if lr // max(1, c.gpn // c.n_hca) == hca] or [0]
    peer = job.nodes[(n.idx + 1) % c.n_nodes]
    per = {}
    for i, lr in enumerate(lrs):
        nc = Nccl(job, n, lr)
        lines = []
        if i == 0:
            lines += [(x, "ib_port_error" if x else "ib_port_error:context") for x in nc.warn("transport/net_ib.cc:101", "NET/IB : mlx5_%d:1 Got async event : port error" % hca)]
        last = "NET/IB : Got completion from peer %s<%d> with status=%d opcode=%d len=0 vendor err %d (Send) localGid ::ffff:%s remoteGids::ffff:%s" % (
            peer.ip, rng.randint(32768, 60999), rng.choice([12, 5]), rng.choice([0, 1]), rng.choice([129, 249]), n.ip, peer.ip)
        lines += [(x, "ib_completion_error" if x else "ib_completion_error:context") for x in nc.warn("transport/net_ib.cc:1909", last)]
        lines += [(nc.info("transport/net.cc:1302 -> 6"), "ib_completion_error:context"), (nc.info("proxy.cc:698 -> 6"), "ib_completion_error:context")]
        be = dist_backend_error(tf, "ncclRemoteError", c.nccl_ver, last, where="NCCLUtils.hpp")
        pg = ("%s Process group watchdog thread terminated with exception: " % tf.pg(st.grank(n, lr))) if tf.ver >= (2, 3) else ""
        lines.append((tf.c10(st.grank(n, lr), "E", n.ln(t + 1), "ProcessGroupNCCL.cpp", tf.lines[5]) + pg + "NCCL error: " + be[0].split(", ", 1)[1], "nccl_remote_error"))
        lines += [(be[1], "nccl_remote_error"), (be[2], "nccl_remote_error:context"), (be[3], "ib_completion_error")]
        per[lr] = lines
    tagged_block(job, n, t, per, IND)
    crashed = {n.idx: [(lr, -6, t + 1.2) for lr in lrs]}
    for m in rng.sample([x for x in job.nodes if x is not n], min(c.n_nodes - 1, rng.randint(1, 3))):
        td = t + rng.uniform(0.05, 1.0)
        seen = rng.sample(list(st.local_ranks()), rng.randint(1, c.gpn))
        remote_error_peers(job, m, seen, td, n, proto="IB")
        crashed[m.idx] = [(l, -6, td + 1) for l in seen]
    propagate(job, t + 1.5, crashed, op_for(job, job.F), remote=n, mode="remote")


@kind("hw_straggler_node", HW, "training",
      "One node degrades (GPU thermal/power throttling): its compute time per step grows, every rank waits for it at each collective, and it finally stalls completely so the others hit the NCCL watchdog timeout.",
      "https://github.com/ai2cm/ace/issues/348 ; https://github.com/NVIDIA/nccl/issues/1111",
      styles=TRAIN_STYLES, silent=True)
def k_straggler(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = job.nodes[job.straggler]
    set_faulty(job, [n])
    if st.name == "syslog":
        st.say(n, job.slow_start_t + 30, "K", "mlx5_core 0000:%02x:00.0: mlx5_pcie_event:299:(pid %d): Detected insufficient power on the PCIe slot (27W)." % (0x18, rng.randint(100, 900)), None, None)
    propagate(job, t, {}, op_for(job, job.F), hang_nodes=(n.idx,), mode="timeout")


@kind("hw_local_disk_io_error", HW, "training",
      "Media error on the culprit node's local NVMe (data cache): a DataLoader worker gets EIO reading a shard and the rank dies.",
      "https://github.com/microsoft/pai/issues/5730 ; https://github.com/pytorch/pytorch/issues/10577",
      styles=TORCHISH)
def k_eio(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    if st.name == "syslog":
        st.say(n, t - 2, "K", "blk_update_request: critical medium error, dev nvme1n1, sector %d op 0x0:(READ) flags 0x80700 phys_seg 4 prio class 0" % rng.randint(10**8, 10**9), IND, "kernel_medium_error")
    wid = rng.randrange(max(1, c.dl_workers))
    shard = "%s/shard-%05d.bin" % (c.local_cache, rng.randrange(c.n_shards))
    orig = ["Caught OSError in DataLoader worker process %d." % wid, "Original Traceback (most recent call last):",
            '  File "%s/torch/utils/data/_utils/worker.py", line 351, in _worker_loop' % c.libdir, "    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]",
            '  File "%s/torch/utils/data/_utils/fetch.py", line 52, in fetch' % c.libdir, "    data = [self.dataset[idx] for idx in possibly_batched_index]",
            '  File "%s/lm/data.py", line 48, in __getitem__' % c.workdir, "    buf = self._read(shard, off, n)",
            '  File "%s/lm/data.py", line 61, in _read' % c.workdir, "    return f.read(n)",
            "OSError: [Errno 5] Input/output error: '%s'" % shard]
    exc = ["OSError: " + orig[0]] + orig[1:]
    exception(job, n, lr, t, "data_next", [], exc, "io_error")
    _retag_last(job, n, "OSError: [Errno 5] Input/output error", "io_error")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F), remote=n)


def _retag_last(job, n, prefix, kind):
    """Tag the last pending line that contains `prefix` as an indicator (used when
    the real root-cause line is inside a wrapped message)."""
    src = n.pending if n.deferred else None
    if src is None:
        return
    for i in range(len(src) - 1, -1, -1):
        e = src[i]
        if e[2] == "L" and prefix in e[3]:
            src[i] = (e[0], e[1], e[2], e[3], IND, kind)
            return
    st = S(job)
    if st.name == "composer":
        for lr, buf in n.rankbuf.items():
            for j in range(len(buf) - 1, -1, -1):
                if prefix in buf[j][0]:
                    buf[j] = (buf[j][0], IND, kind)
                    return


# =============================================================================== USER
@kind("user_cuda_oom_train", USER, "training",
      "CUDA out of memory on one rank during training (a long/packed batch or activation spike exceeds the memory budget of the configuration).",
      "https://github.com/pytorch/pytorch/issues/16417 ; https://github.com/murong-xu/CADS/issues/4",
      styles=TORCHISH + ("verl",))
def k_oom(job, t):
    _oom(job, t, "backward" if job.rng.random() < 0.5 else "train_step")


@kind("user_cuda_oom_eval", USER, "evaluation",
      "CUDA out of memory on one rank during periodic evaluation (eval batch/generation length larger than what fits next to the training state).",
      "https://github.com/pytorch/pytorch/issues/16417 ; https://github.com/huggingface/finetrainers/issues/114",
      styles=TRAIN_STYLES, phase="eval")
def k_oom_eval(job, t):
    _oom(job, t, "eval")


def _oom(job, t, where):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    total = c.gpu_mem - rng.uniform(0.3, 1.5)
    ask = rng.choice([0.25, 0.5, 1.0, 2.0, 3.91, 7.81, 15.62])
    free = rng.uniform(0.01, min(ask * 0.8, 1.9))
    inuse = total - free
    alloc = inuse - rng.uniform(1.0, 4.0)
    resv = rng.uniform(0.1, inuse - alloc - 0.2 if inuse - alloc > 0.4 else 0.3)
    msg = ("CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. Including non-PyTorch memory, this process has %s memory in use. Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
           % (gib(ask), lr, gib(total), gib(free), gib(inuse), gib(alloc), gib(resv)))
    exc = ("torch.OutOfMemoryError: " if job.tf.ver >= (2, 5) else "torch.cuda.OutOfMemoryError: ") + msg
    inner = [Frame(c.libdir + "/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)"),
             Frame(c.libdir + "/transformers/models/llama/modeling_llama.py", 1216, "forward", "logits = logits.float()")] if where != "backward" else []
    if st.name == "verl":
        exception(job, n, lr, t, "update", [Frame(c.libdir + "/torch/_tensor.py", 521, "backward", "torch.autograd.backward(")], [exc], "cuda_oom")
        st.driver_failure(t + 2, n, lr, "actor_rollout_update_actor", exc, [exc], "update")
        return
    exception(job, n, lr, t, where, inner, [exc], "cuda_oom")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F, "eval" if where == "eval" else "train"), remote=n)


@kind("user_nan_loss_abort", USER, "training",
      "Training diverged: the loss/gradients became NaN or Inf and the framework's own guard aborted the run (loss-spike callback, NaN grad-norm check, autograd anomaly detection).",
      "https://github.com/mosaicml/llm-foundry/blob/main/llmfoundry/callbacks/kill_loss_spike_callback.py ; https://github.com/NVIDIA-NeMo/Speech/issues/14348 ; https://github.com/NVIDIA-NeMo/Speech/issues/14751 ; https://github.com/critical88/TCA4Rec/issues/1 ; https://github.com/NVIDIA/Megatron-LM/issues/780",
      styles=("composer", "nemo", "lightning", "fabric", "jsonl"))
def k_nan(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    F = job.F
    if st.name == "composer":
        n = job.nodes[0]
        lr = 0
        set_faulty(job, [n])
        h = n
        for i in range(1, c.nan_patience + 2):
            st.say(h, t - (c.nan_patience + 2 - i) * c.step_time, 0, st.lf(h, t, 0, "INFO", "llmfoundry.callbacks.kill_loss_spike_callback", "Potential loss spike detected. Iteration: %d" % i), IND, "loss_spike:context")
        st.say(h, t - 0.1, 0, st.lf(h, t, 0, "INFO", "llmfoundry.callbacks.kill_loss_spike_callback", "Loss spike detected for %d steps. Try lowering the learning rate." % (c.nan_patience + 1)), IND, "loss_spike")
        msg = "llmfoundry.utils.exceptions.LossSpikeError: Training stopped due to a loss spike. The training loss was more than %s times greater than the running average loss (approx. %s) over %d consecutive training steps. Please try submitting the run again with a lower learning rate." % (
            c.outlier_mult, round(c.loss_at(F - 20), 4), c.nan_patience + 1)
        exception(job, n, lr, t, "callback", [], [msg], "loss_spike")
        propagate(job, t, {0: [(0, 1)]}, op_for(job, F), remote=n)
        return
    if st.name == "nemo":
        n = pick_culprit(job)
        lr = rng.randrange(c.gpn)
        set_faulty(job, [n])
        g = st.grank(n, lr)
        val = rng.choice(["nan", "nan", "inf"])
        msg = "RuntimeError: Rank %d, node %s, device %d, iteration %d: Unexpected result %s (message='found %s in local grad norm for bucket #%d in backward pass before data-parallel communication collective')" % (
            g, n.host, lr, st.display(F), val, "NaN" if val == "nan" else "Inf", rng.randrange(8))
        exception(job, n, lr, t, "optimizer", [Frame(c.libdir + "/megatron/core/rerun_state_machine.py", 519, "validate_result", "raise RuntimeError(full_message)")], [msg], "nan_grad_norm")
        propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, F), remote=n)
        return
    if st.name == "jsonl":
        n = pick_culprit(job)
        set_faulty(job, list(job.nodes))
        for m in job.nodes:
            st.say(m, t, 0, st.j(m, t, 0, "ERROR", "non-finite loss, aborting", step=F, loss=None, grad_norm=None), IND, "nonfinite_loss")
        for m in job.nodes:
            exception(job, m, 0, t + 0.01, "optimizer", [], ["FloatingPointError: loss is nan at step %d (check lr=%.2e / data)" % (F, c.peak_lr)], "nonfinite_loss")
        propagate(job, t, {m.idx: [(0, 1)] for m in job.nodes}, op_for(job, F))
        return
    # lightning / fabric with torch.autograd anomaly detection
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    g = st.grank(n, lr)
    fn = rng.choice(["LogSoftmaxBackward0", "SoftmaxBackward0", "MmBackward0", "NativeLayerNormBackward0"])
    pre = st.exc_prefix(n, lr)
    warn = ["%s/torch/autograd/graph.py:768: UserWarning: Error detected in %s. Traceback of forward call that caused the error:" % (c.libdir, fn),
            '  File "%s/lm/model.py", line 214, in forward' % c.workdir,
            "    logits = F.log_softmax(self.lm_head(h), dim=-1)" if fn.startswith("LogSoftmax") else "    x = self.proj(x)",
            " (Triggered internally at ../torch/csrc/autograd/python_anomaly_mode.cpp:111.)",
            "  return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass"]
    say_pairs(job, n, t - 0.05, lr, [(x, "anomaly_nan:context") for x in warn], IND)
    exception(job, n, lr, t, "backward", [], ["RuntimeError: Function '%s' returned nan values in its 0th output." % fn], "anomaly_nan")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, F), remote=n)


@kind("user_missing_dataset", USER, "data_loading",
      "The configured dataset path does not exist (typo / not staged to the shared filesystem); every rank fails while building its dataloader.",
      "https://github.com/hiyouga/LlamaFactory/issues/3065 ; https://github.com/NVIDIA/Megatron-LM/issues/1355 ; https://github.com/open-mmlab/mmcv/issues/2894",
      styles=TORCHISH, job_wide=True)
def k_missing_data(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    path = c.data_path.rstrip("/") + rng.choice(["/index.npy", "_text_document.idx", "/train-00000-of-00128.parquet", ".bin"])
    if st.name == "nemo":
        path = c.data_path + "_text_document.idx"
    crashed = {}
    for n in job.nodes:
        lrs = list(st.local_ranks()) if st.name != "composer" else list(st.local_ranks())
        for lr in lrs:
            exception(job, n, lr, t + rng.uniform(0, 2), "data_build", [], ["FileNotFoundError: [Errno 2] No such file or directory: '%s'" % path], "missing_file")
        crashed[n.idx] = [(lr, 1) for lr in lrs]
    _teardown_all(job, t + 2, crashed)


def _teardown_all(job, t, crashed):
    st = S(job)
    failed = {idx: [(lr, ec, t + job.rng.uniform(0, 1)) for lr, ec in lst] for idx, lst in crashed.items()}
    st.teardown(t, failed)


@kind("user_config_error", USER, "initialization",
      "Invalid run configuration (batch-size arithmetic / unknown config key) rejected by the framework at start-up on every rank.",
      "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/num_microbatches_calculator.py ; https://github.com/Lightning-AI/pytorch-lightning/blob/2.4.0/src/lightning/fabric/connector.py ; https://github.com/mosaicml/llm-foundry/blob/main/llmfoundry/utils/config_utils.py ; https://github.com/hpcaitech/ColossalAI/blob/main/colossalai/booster/plugin/hybrid_parallel_plugin.py",
      styles=("nemo", "lightning", "composer", "colossalai", "jsonl"), job_wide=True)
def k_config(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    t = st.init_launch(t)
    dp = c.world // (c.tp * c.pp) if st.name == "nemo" else c.world
    mbs = c.mbs + 1
    if st.name == "nemo":
        t = st.init_dist(t)
        exc = ["AssertionError: global batch size (%d) is not divisible by micro batch size (%d) times data parallel size (%d)" % (c.gbs, mbs, dp)]
        where = "model_build"
    elif st.name == "lightning":
        exc = ["ValueError: Precision %r is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')" % rng.choice(["bf16-mix", "bfloat16", "fp16-mixed"])]
        where = "init_pg"
    elif st.name == "composer":
        t = st.init_dist(t)
        gb = c.gbs + c.world // 2
        exc = ["ValueError: Global batchsize %d is not divisible by (world_size // data_replication_degree)=%d as a result, the batch size would be truncated, please adjust `global_batch_size` to be divisible by world size, %d." % (gb, c.world, c.world)]
        where = "model_build"
    elif st.name == "colossalai":
        t = st.init_dist(t)
        tp, pp = rng.choice([(3, 1), (2, 3), (8, 3)])
        exc = ["AssertionError: World size %d is not divisible by tp_size %d * pp_size %d" % (c.world, tp, pp)]
        where = "model_build"
    else:
        t = st.init_dist(t)
        exc = ["KeyError: 'micro_batch_size'"]
        where = "model_build"
    crashed = {}
    for n in job.nodes:
        for lr in st.local_ranks():
            exception(job, n, lr, t + rng.uniform(0, 1), where, [], exc, "config_error")
        crashed[n.idx] = [(lr, 1) for lr in st.local_ranks()]
    _teardown_all(job, t + 1.5, crashed)


@kind("user_code_exception_one_rank", USER, "training",
      "A bug in the user's data/model code surfaces on one rank for one batch (inconsistent sample shapes / out-of-range token id); that rank raises and the job is torn down.",
      "https://github.com/bghira/SimpleTuner/issues/59 ; https://github.com/Suanmd/TR-MISR/issues/3",
      styles=TORCHISH)
def k_user_exc(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    wid = rng.randrange(max(1, c.dl_workers))
    a = c.seq_len + 1
    b = a - rng.randint(1, 300)
    orig = ["Caught RuntimeError in DataLoader worker process %d." % wid, "Original Traceback (most recent call last):",
            '  File "%s/torch/utils/data/_utils/worker.py", line 351, in _worker_loop' % c.libdir, "    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]",
            '  File "%s/torch/utils/data/_utils/fetch.py", line 55, in fetch' % c.libdir, "    return self.collate_fn(data)",
            '  File "%s/lm/data.py", line 112, in collate' % c.workdir, "    input_ids = torch.stack([s[\"input_ids\"] for s in samples])",
            "RuntimeError: stack expects each tensor to be equal size, but got [%d] at entry 0 and [%d] at entry %d" % (a, b, rng.randint(1, 7))]
    exception(job, n, lr, t, "data_next", [], ["RuntimeError: " + orig[0]] + orig[1:], "user_code_error")
    _retag_last(job, n, "stack expects each tensor to be equal size", "user_code_error")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F), remote=n)


@kind("user_dataloader_worker_oom_killed", USER, "training",
      "Host RAM exhausted on the culprit node by too many/too large DataLoader workers; the kernel OOM killer kills a worker and the rank fails.",
      "https://github.com/pytorch/pytorch/issues/8976 ; https://github.com/hezhangsprinter/DCPDN/issues/12 ; https://github.com/SchedMD/slurm/blob/master/src/plugins/task/cgroup/task_cgroup_memory.c",
      styles=TORCHISH)
def k_dl_killed(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    wpid = n.pids[lr] + rng.randint(50, 4000)
    if st.name == "syslog":
        st.say(n, t - 0.5, "K", "Out of memory: Killed process %d (pt_data_worker) total-vm:%dkB, anon-rss:%dkB, file-rss:%dkB, shmem-rss:%dkB, UID:1000 pgtables:%dkB oom_score_adj:0" % (
            wpid, rng.randint(10**7, 9 * 10**7), rng.randint(10**7, 6 * 10**7), rng.randint(10**4, 10**6), rng.randint(10**5, 10**7), rng.randint(10**4, 10**5)), IND, "kernel_oom_kill")
    if st.launcher == "srun":
        n.at(t + 0.3).put("slurmstepd: error: Detected 1 oom_kill event in StepId=%d.0. Some of the step tasks have been OOM Killed." % job.job_id, IND, "slurm_oom_kill")
    exception(job, n, lr, t, "data_next", [Frame(c.libdir + "/torch/utils/data/_utils/signal_handling.py", 73, "handler", "_error_if_any_worker_fails()")],
              ["RuntimeError: DataLoader worker (pid %d) is killed by signal: Killed. " % wpid], "dataloader_killed")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F), remote=n)


@kind("user_ckpt_disk_quota", USER, "checkpointing",
      "Writing the periodic checkpoint exceeded the user's filesystem quota (EDQUOT).",
      "https://github.com/open-mmlab/mmdetection/issues/12069 ; https://github.com/tloen/alpaca-lora/issues/280",
      styles=TRAIN_STYLES + ("verl",), phase="ckpt")
def k_quota(job, t):
    _ckpt_write_fail(job, t, quota=True)


def _ckpt_write_fail(job, t, quota):
    st, c, rng = S(job), job.cfg, job.rng
    n = job.nodes[0] if st.name in ("lightning", "nemo", "syslog", "fabric") and rng.random() < 0.8 else pick_culprit(job)
    lr = 0 if n.idx == 0 else rng.randrange(c.gpn)
    if quota:
        set_faulty(job, [n])
        path = "%s/step_%d" % (c.ckpt_dir, job.F)
        first = traceback_lines([Frame(c.libdir + "/torch/serialization.py", 850, "save", "_save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)"),
                                 Frame(c.libdir + "/torch/serialization.py", 1114, "_save", "zip_file.write_record(name, storage, num_bytes)")],
                                ["RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/%d: file write failed" % rng.randint(3, 900)])
        exc = ["OSError: [Errno 122] Disk quota exceeded"]
        kind = "disk_quota"
        inner = [Frame(c.libdir + "/torch/serialization.py", 849, "save", "with _open_zipfile_writer(f) as opened_zipfile:"),
                 Frame(c.libdir + "/torch/serialization.py", 690, "__exit__", "self.file_like.write_end_of_file()")]
        exception(job, n, lr, t, "ckpt_save", inner, exc, kind, chain=[(x, "frame") for x, _ in first] and first)
        _retag_first(job, n, "PytorchStreamWriter failed writing file", "ckpt_write_failed")
    else:
        # shared FS full: every writer fails
        nodes = [m for m in job.nodes if rng.random() < 0.5] or [job.nodes[0]]
        set_faulty(job, nodes)
        texc = {}
        for m in nodes:
            lrs = [0] if m.idx == 0 else [rng.randrange(c.gpn)]
            for l in lrs:
                texc[m.idx] = (l, t + rng.uniform(0, 3))
                num = rng.randint(3, 900)
                pos = rng.randint(10**8, 4 * 10**9)
                first = traceback_lines([Frame(c.libdir + "/torch/serialization.py", 850, "save", "_save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)"),
                                         Frame(c.libdir + "/torch/serialization.py", 1114, "_save", "zip_file.write_record(name, storage, num_bytes)")],
                                        ["RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/%d: file write failed" % num])
                inner = [Frame(c.libdir + "/torch/serialization.py", 849, "save", "with _open_zipfile_writer(f) as opened_zipfile:"),
                         Frame(c.libdir + "/torch/serialization.py", 690, "__exit__", "self.file_like.write_end_of_file()")]
                exception(job, m, l, texc[m.idx][1], "ckpt_save", inner,
                          ["RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos %d vs %d" % (pos + rng.randint(64, 512), pos)], "ckpt_enospc",
                          chain=[(x, k) for x, k in first])
                _retag_first(job, m, "PytorchStreamWriter failed writing file", "ckpt_enospc")
        n, lr = nodes[0], (0 if nodes[0].idx == 0 else 0)
    if st.name == "verl":
        st.driver_failure(t + 3, n, lr, "actor_rollout_save_checkpoint", "OSError: [Errno 122] Disk quota exceeded" if quota else "RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos", ["OSError: [Errno 122] Disk quota exceeded"], "ckpt_save")
        return
    if quota:
        crashed = {n.idx: [(lr, 1, t + 0.01)]}
    else:
        crashed = {m.idx: [(texc[m.idx][0], 1, texc[m.idx][1] + 0.01)] for m in nodes}
    propagate(job, t, crashed, op_for(job, job.F, "ckpt"), remote=n)


def _retag_first(job, n, prefix, kind):
    src = n.pending if n.deferred else []
    for i in range(len(src) - 1, -1, -1):
        e = src[i]
        if e[2] == "L" and prefix in e[3] and e[4]:
            src[i] = (e[0], e[1], e[2], e[3], IND, kind)
            return
    if S(job).name == "composer":
        for lr, buf in n.rankbuf.items():
            for j in range(len(buf) - 1, -1, -1):
                if prefix in buf[j][0]:
                    buf[j] = (buf[j][0], IND, kind)
                    return


@kind("user_eval_collective_mismatch", USER, "evaluation",
      "The evaluation code issues different collectives on different ranks (e.g. logging a metric dict whose keys differ on one rank); with TORCH_DISTRIBUTED_DEBUG=DETAIL torch reports the mismatch and names the diverging rank.",
      "https://github.com/Lightning-AI/pytorch-lightning/issues/19106 ; https://github.com/speechbrain/speechbrain/issues/2401",
      styles=("lightning", "colossalai", "jsonl", "fabric"), phase="eval")
def k_mismatch(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    bad = st.grank(n, lr)
    seq = job.F * 7 + rng.randint(1, 6)
    opt = "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"
    crashed = {}
    for m in job.nodes:
        lst = []
        for l in st.local_ranks():
            g = st.grank(m, l)
            if g == bad:
                me = "CollectiveFingerPrint(SequenceNumber=%d, OpType=ALLREDUCE, TensorShape=[%d], TensorDtypes=Float, %s)" % (seq, rng.choice([3, 5, 6]), opt)
                other = "CollectiveFingerPrint(SequenceNumber=%d, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, %s)" % (seq, opt)
                ref = 0
                msg = "RuntimeError: Detected mismatch between collectives on ranks. Rank %d is running collective: %s, but Rank %d is running collective: %s.Collectives differ in the following aspects: \t Op type: ALLREDUCEvs BROADCAST  Tensor Tensor shapes: %svs 1  Tensor Tensor dtypes: Floatvs Long" % (
                    bad, me, ref, other, me.split("TensorShape=[")[1].split("]")[0])
                exception(job, m, l, t, "eval", [Frame(c.libdir + "/torch/distributed/c10d_logger.py", 83, "wrapper", "return func(*args, **kwargs)"),
                                                 Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 2288, "all_reduce", "work = group.allreduce([tensor], opts)")], [msg], "collective_mismatch")
                lst.append((l, 1))
            elif rng.random() < 0.35:
                me = "CollectiveFingerPrint(SequenceNumber=%d, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, %s)" % (seq, opt)
                other = "CollectiveFingerPrint(SequenceNumber=%d, OpType=ALLREDUCE, TensorShape=[%d], TensorDtypes=Float, %s)" % (seq, 5, opt)
                msg = "RuntimeError: Detected mismatch between collectives on ranks. Rank %d is running collective: %s, but Rank %d is running collective: %s.Collectives differ in the following aspects: \t Op type: BROADCASTvs ALLREDUCE  Tensor Tensor shapes: 1vs 5  Tensor Tensor dtypes: Longvs Float" % (g, me, bad, other)
                te = t + rng.uniform(0.01, 0.5)
                exception(job, m, l, te, "eval", [Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 2217, "broadcast", "work = group.broadcast([tensor], opts)")], [msg], "collective_mismatch", role=SYM)
                lst.append((l, 1, te))
        if lst:
            crashed[m.idx] = lst
    propagate(job, t, crashed, op_for(job, job.F, "eval"))


@kind("user_eval_hang_uneven_batches", USER, "evaluation",
      "Validation shards are uneven across ranks: the culprit rank finishes its eval loop and moves on to the next collective while the others still wait inside evaluation, so every rank hits the NCCL watchdog; only the culprit's timed-out operation differs.",
      "https://github.com/meta-pytorch/torchrec/issues/1014 ; https://github.com/huggingface/accelerate/issues/3861",
      styles=("lightning", "nemo", "colossalai", "jsonl", "syslog", "fabric"), phase="eval")
def k_eval_hang(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    op = op_for(job, job.F, "eval")
    mine = Op(op.seq, "ALLREDUCE" if op.op != "ALLREDUCE" else "BROADCAST", 1)
    td = t + c.timeout_s + rng.uniform(1, 15)
    per = {lr: [(x, k.replace("nccl_watchdog_timeout", "eval_desync_timeout")) for x, k in
                watchdog_timeout_block(job.tf, rng, st.grank(n, lr), n.ln(td - 2), mine, c.timeout_s * 1000)]}
    tagged_block(job, n, td - 2, per, IND)
    crashed = {n.idx: [(lr, -6, td - 1.5)]}
    propagate(job, td - 2 - c.timeout_s, crashed, op, mode="timeout")


@kind("user_resume_shape_mismatch", USER, "model_loading",
      "Resuming from a checkpoint written with a different model configuration (vocab/hidden size); loading the state dict fails with size mismatches on every rank.",
      "https://github.com/deepspeedai/DeepSpeed/issues/5570 ; https://github.com/acids-ircam/RAVE/issues/196",
      styles=("lightning", "fabric", "colossalai", "syslog"), needs_resume=True, job_wide=True)
def k_shape(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    st.resume_announce(t)
    v_ckpt, v_now = c.vocab, c.vocab + rng.choice([128, 256, 1024])
    hdim = c.hidden
    cls = "LitLM" if st.name == "lightning" else "GPT"
    exc = ["RuntimeError: Error(s) in loading state_dict for %s:" % cls,
           "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([%d, %d]) from checkpoint, the shape in current model is torch.Size([%d, %d])." % (v_ckpt, hdim, v_now, hdim),
           "\tsize mismatch for lm_head.weight: copying a param with shape torch.Size([%d, %d]) from checkpoint, the shape in current model is torch.Size([%d, %d])." % (v_ckpt, hdim, v_now, hdim)]
    inner = [Frame(c.libdir + "/torch/nn/modules/module.py", 2215, "load_state_dict", "raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(")]
    crashed = {}
    for n in job.nodes:
        for lr in st.local_ranks():
            exception(job, n, lr, t + rng.uniform(30, 60), "ckpt_load", inner, exc, "state_dict_mismatch")
        crashed[n.idx] = [(lr, 1) for lr in st.local_ranks()]
    _teardown_all(job, t + 61, crashed)


# =============================================================================== PLATFORM
@kind("plat_slurm_preemption", PLAT, "training",
      "The scheduler preempted the job for a higher-priority allocation: every step is cancelled at the same time (SIGTERM then SIGKILL).",
      "https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c ; https://github.com/Lightning-AI/pytorch-lightning/issues/20542",
      styles=("lightning", "fabric", "nemo"), job_wide=True)
def k_preempt(job, t):
    _slurm_cancel(job, t, "PREEMPTION")


@kind("plat_slurm_time_limit", PLAT, "training",
      "The job reached its wall-clock time limit and Slurm cancelled every step.",
      "https://github.com/ZettaAI/zetta_utils/issues/671 ; https://github.com/Lightning-AI/pytorch-lightning/issues/20542",
      styles=("lightning", "fabric", "nemo"), job_wide=True)
def k_timelimit(job, t):
    _slurm_cancel(job, t, "TIME LIMIT")


def _slurm_cancel(job, t, reason):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    h = st.head()
    if reason == "TIME LIMIT" and rng.random() < 0.7:
        h.at(t).put(slurmstepd_cancel(job.job_id, "batch", h.host, h.ln(t), reason), IND, "slurm_time_limit")
    for n in job.nodes:
        n.at(t + rng.uniform(0, 0.05)).put(slurmstepd_cancel(job.job_id, "0", n.host, n.ln(t), reason), IND,
                                           "slurm_time_limit" if reason == "TIME LIMIT" else "slurm_preempted")
    h.at(t + 0.1).put("srun: Job step aborted: Waiting up to %d seconds for job step to finish." % c.kill_wait, SYM, "srun_step_aborted")
    if st.name in ("lightning", "nemo"):
        for n in job.nodes:
            per = {}
            for lr in st.local_ranks():
                per[lr] = [("[rank: %d] Received SIGTERM: 15" % st.grank(n, lr), "sigterm"), ("Bypassing SIGTERM: 15", "sigterm")]
            tagged_block(job, n, t + 0.2, per, SYM)
        if st.name == "nemo" and c.nemo_preempt_cb:
            h.at(t + 0.5)
            st.say(h, t + 0.5, 0, st.nl(h.ln(t + 0.5), "I", "preemption", 67, "Preemption detected, saving checkpoint and exiting"), SYM, "preemption_callback")
    tk = t + c.kill_wait
    ids = []
    for n in job.nodes:
        h.at(tk + 0.5).put(srun_task_msg(n.host, [st.grank(n, lr) for lr in st.local_ranks()], rng.choice(["Terminated", "Killed"])), SYM, "srun_task_killed")


@kind("plat_nccl_socket_ifname", PLAT, "initialization",
      "The culprit node's image/environment sets NCCL_SOCKET_IFNAME to an interface that does not exist there; NCCL bootstrap finds no socket interface and its ranks fail the first collective, the others hang in init.",
      "https://github.com/pytorch/pytorch/issues/29482 ; https://github.com/codefuse-ai/MFTCoder/issues/31 ; https://github.com/NVIDIA/nccl/issues/1837",
      styles=TORCHISH)
def k_ifname(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    set_faulty(job, [n])
    t = st.init_launch(t)
    t = st.init_dist(t, upto_nccl=True)
    job.start_deferred()
    per = {}
    for lr in st.local_ranks():
        nc = Nccl(job, n, lr)
        lines = [(nc.info("NCCL_SOCKET_IFNAME set by environment to %s" % c.bad_if, main=True), "nccl_ifname:context")]
        lines += [(x, "nccl_no_socket_if" if x else "nccl_no_socket_if:context") for x in nc.warn("bootstrap.cc:48", "Bootstrap : no socket interface found", main=True)]
        lines += [(nc.info("init.cc:%d -> 3" % rng.choice([128, 1392]), main=True), "nccl_no_socket_if:context")]
        per[lr] = lines
    tagged_block(job, n, t, per, IND)
    for lr in st.local_ranks():
        be = dist_backend_error(tf, "ncclInternalError", c.nccl_ver, "Bootstrap : no socket interface found")
        exception(job, n, lr, t + 0.2, "init_pg", [Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 4166, "barrier", "work = default_pg.barrier(opts=opts)")], be, "nccl_init_failed")
    op = Op(1, rng.choice(["BROADCAST", "ALLREDUCE"]), 1)
    propagate(job, t + 0.2, {n.idx: [(lr, 1) for lr in st.local_ranks()]}, op, mode="timeout")


@kind("plat_nccl_shm_exhausted", PLAT, "initialization",
      "The culprit node's container has a tiny /dev/shm (64 MB default); NCCL cannot create its shared-memory segments at communicator init and returns ncclSystemError on that node's ranks.",
      "https://github.com/NVIDIA/nccl-tests/issues/166 ; https://github.com/pytorch/ci-infra/pull/490 ; https://github.com/NVIDIA/nccl/issues/342",
      styles=TORCHISH)
def k_nccl_shm(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    set_faulty(job, [n])
    t = st.init_launch(t)
    t = st.init_dist(t, upto_nccl=True)
    job.start_deferred()
    per = {}
    for lr in st.local_ranks():
        nc = Nccl(job, n, lr)
        seg = "/dev/shm/nccl-%s" % "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6))
        lines = [(x, "nccl_shm_extend" if x else "nccl_shm_extend:context") for x in nc.warn("misc/shmutils.cc:72", "Error: failed to extend %s to 9637892 bytes" % seg)]
        lines += [(x, "nccl_shm_create" if x else "nccl_shm_create:context") for x in nc.warn("misc/shmutils.cc:113", "Error while creating shared memory segment %s (size 9637888)" % seg)]
        lines += [(nc.info("transport/shm.cc:114 -> 2"), "nccl_shm_create:context"), (nc.info("transport.cc:33 -> 2"), "nccl_shm_create:context"),
                  (nc.info("init.cc:1089 -> 2"), "nccl_shm_create:context"), (nc.info("group.cc:65 -> 2 [Async thread]"), "nccl_shm_create:context")]
        per[lr] = lines
    tagged_block(job, n, t, per, IND)
    for lr in st.local_ranks():
        be = dist_backend_error(tf, "ncclSystemError", c.nccl_ver, "Error while creating shared memory segment /dev/shm/nccl-%s (size 9637888)" % "XXXXXX")
        exception(job, n, lr, t + 0.3, "init_pg", [Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 4166, "barrier", "work = default_pg.barrier(opts=opts)")], be, "nccl_init_failed")
    propagate(job, t + 0.3, {n.idx: [(lr, 1) for lr in st.local_ranks()]}, Op(1, "ALLREDUCE", 1), mode="timeout")


@kind("plat_rendezvous_missing_node", PLAT, "initialization",
      "The culprit node never joins the rendezvous (its container is stuck starting: image pull / filesystem mount); rank 0's TCPStore times out waiting for clients and names how many joined.",
      "https://github.com/OpenRLHF/OpenRLHF/issues/1040 ; https://github.com/pytorch/pytorch/pull/111805",
      styles=("lightning", "nemo", "fabric"), silent=True)
def k_rdzv(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = job.nodes[rng.randint(1, c.n_nodes - 1)]
    set_faulty(job, [n])
    # culprit: at most the container start is visible, then nothing
    n.mute = True
    t = st.init_launch(t)
    job.start_deferred()
    for m in job.nodes:
        if m is n:
            continue
        per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (st.grank(m, lr), st.grank(m, lr) + 1, c.world)] for lr in st.local_ranks()}
        st.rank_block(m, t, per)
    tt = t + c.store_timeout + 1
    h = st.head()
    exc = ["torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined." % (c.store_timeout + 1, c.world - c.gpn, c.world)]
    inner = [Frame(c.libdir + "/torch/distributed/c10d_logger.py", 79, "wrapper", "return func(*args, **kwargs)"),
             Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 1305, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
             Frame(c.libdir + "/torch/distributed/rendezvous.py", 246, "_env_rendezvous_handler", "store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)"),
             Frame(c.libdir + "/torch/distributed/rendezvous.py", 174, "_create_c10d_store", "return TCPStore(")]
    exception(job, h, 0, tt, "init_pg", inner, exc, "store_timeout", role=SYM)
    st.teardown(tt, {0: [(0, 1, tt + 0.5)]})
    n.mute = False
    n.at(tt + 1).put(slurmstepd_cancel(job.job_id, "0", n.host, n.ln(tt + 1), "TASK FAILURE" if c.slurm_new else None), SYM, "slurm_step_cancelled")


@kind("plat_master_port_in_use", PLAT, "initialization",
      "A stale process from an earlier job still holds the rendezvous port on the master node; the store server cannot listen (EADDRINUSE) and the job never starts.",
      "https://github.com/vllm-project/vllm/issues/39015 ; https://github.com/om-ai-lab/VLM-R1/issues/289",
      styles=("jsonl", "colossalai", "syslog", "lightning", "nemo"))
def k_port(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    h = job.nodes[0]
    set_faulty(job, [h])
    job.start_deferred()
    port = c.master_port
    if st.launcher in ("torchrun", "systemd"):
        for m in job.nodes:
            for x in __import__("f2_base").torchrun_omp_banner(tf, m.ln(t), m.launcher_pid):
                st.say(m, t, "L", x)
        pre = tf.c10(0, "W", h.ln(t + 1), "socket.cpp", 464).replace("[rank0]:", "") if tf.ver >= (2, 4) else "[W socket.cpp:464] "
        st.say(h, t + 1, "L", pre + "[c10d] The server socket has failed to bind to [::]:%d (errno: 98 - Address already in use)." % port, IND, "eaddrinuse:context")
        st.say(h, t + 1, "L", pre + "[c10d] The server socket has failed to bind to 0.0.0.0:%d (errno: 98 - Address already in use)." % port, IND, "eaddrinuse:context")
        pre_e = pre.replace("[W", "[E", 1)
        st.say(h, t + 1, "L", pre_e + "[c10d] The server socket has failed to listen on any local network address.", IND, "eaddrinuse")
        fr = [Frame("/usr/local/bin/torchrun", 8, "<module>", "sys.exit(main())"),
              Frame(c.libdir + "/torch/distributed/run.py", 919, "main", "run(args)"),
              Frame(c.libdir + "/torch/distributed/run.py", 910, "run", "elastic_launch("),
              Frame(c.libdir + "/torch/distributed/launcher/api.py", 138, "__call__", "return launch_agent(self._config, self._entrypoint, list(args))"),
              Frame(c.libdir + "/torch/distributed/launcher/api.py", 241, "launch_agent", "result = agent.run()"),
              Frame(c.libdir + "/torch/distributed/elastic/agent/server/api.py", 680, "run", "result = self._invoke_run(role)"),
              Frame(c.libdir + "/torch/distributed/elastic/agent/server/api.py", 829, "_invoke_run", "self._initialize_workers(self._worker_group)"),
              Frame(c.libdir + "/torch/distributed/elastic/agent/server/api.py", 652, "_initialize_workers", "self._rendezvous(worker_group)"),
              Frame(c.libdir + "/torch/distributed/elastic/agent/server/api.py", 489, "_rendezvous", "rdzv_info = spec.rdzv_handler.next_rendezvous()"),
              Frame(c.libdir + "/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", 66, "next_rendezvous", "self._store = TCPStore(  # type: ignore[call-arg]")]
        exc = ["torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use" % port]
        for text, part in traceback_lines(fr, exc, py311=c.py311):
            st.say(h, t + 1.2, "L", text, IND, "eaddrinuse" if part == "exc" else "eaddrinuse:context")
        tt = t + c.store_timeout
        for m in job.nodes[1:]:
            pe = tf.c10(0, "E", m.ln(tt), "socket.cpp", 1023).replace("[rank0]:", "") if tf.ver >= (2, 4) else "[E socket.cpp:1023] "
            st.say(m, tt, "L", pe + "[c10d] The client socket has timed out after %ds while trying to connect to (%s, %d)." % (c.store_timeout, job.hosts[0] if c.master_by_name else h.ip, port), SYM, "client_socket_timeout")
            exc2 = ["torch.distributed.DistNetworkError: The client socket has timed out after %ds while trying to connect to (%s, %d)." % (c.store_timeout, job.hosts[0] if c.master_by_name else h.ip, port)]
            for text, part in traceback_lines(fr, exc2, py311=c.py311):
                st.say(m, tt + 0.1, "L", text, SYM, "client_socket_timeout" if part == "exc" else "client_socket_timeout:context")
        if st.name == "syslog":
            for m in job.nodes:
                te = (t + 2) if m is h else (tt + 1)
                st.say(m, te, "Y", "%s: Main process exited, code=exited, status=1/FAILURE" % c.unit, SYM, "systemd_failed")
                st.say(m, te, "Y", "%s: Failed with result 'exit-code'." % c.unit, SYM, "systemd_failed")
        return
    # srun-launched frameworks: rank 0 creates the TCPStore server
    t = st.init_launch(t)
    for m in job.nodes:
        per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (st.grank(m, lr), st.grank(m, lr) + 1, c.world)] for lr in st.local_ranks()}
        st.rank_block(m, t, per)
    pre = tf.c10(0, "W", h.ln(t + 1), "socket.cpp", 464) if tf.ver >= (2, 4) else "[W socket.cpp:464] "
    st.say(h, t + 1, 0, pre + "[c10d] The server socket has failed to bind to [::]:%d (errno: 98 - Address already in use)." % port, IND, "eaddrinuse:context")
    st.say(h, t + 1, 0, pre + "[c10d] The server socket has failed to bind to 0.0.0.0:%d (errno: 98 - Address already in use)." % port, IND, "eaddrinuse:context")
    exc = ["torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use" % port]
    inner = [Frame(c.libdir + "/torch/distributed/c10d_logger.py", 79, "wrapper", "return func(*args, **kwargs)"),
             Frame(c.libdir + "/torch/distributed/distributed_c10d.py", 1305, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
             Frame(c.libdir + "/torch/distributed/rendezvous.py", 246, "_env_rendezvous_handler", "store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)"),
             Frame(c.libdir + "/torch/distributed/rendezvous.py", 174, "_create_c10d_store", "return TCPStore(")]
    exception(job, h, 0, t + 1.1, "init_pg", inner, exc, "eaddrinuse")
    st.teardown(t + 1.1, {0: [(0, 1, t + 1.5)]})


@kind("plat_ckpt_enospc", PLAT, "checkpointing",
      "The shared checkpoint filesystem ran out of space while ranks were writing the periodic checkpoint (torch.save fails with 'file write failed' / 'unexpected pos').",
      "https://github.com/verl-project/verl/issues/3346 ; https://github.com/hiyouga/LlamaFactory/issues/1223 ; https://github.com/meta-pytorch/torchforge/issues/568",
      styles=TRAIN_STYLES, phase="ckpt")
def k_enospc(job, t):
    _ckpt_write_fail(job, t, quota=False)


@kind("plat_nfs_stale_handle", PLAT, "training",
      "The NFS export holding the training shards was remounted/failed over under the culprit node: reads fail with ESTALE in its DataLoader workers.",
      "https://github.com/huggingface/transformers/issues/9732 ; https://github.com/modelscope/ms-swift/issues/6695 ; https://github.com/pytorch/pytorch/issues/45826",
      styles=TORCHISH)
def k_stale(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    if st.name == "syslog":
        st.say(n, t - 3, "K", "nfs: server %s not responding, still trying" % c.nfs_server, IND, "nfs_not_responding:context")
        st.say(n, t - 1, "K", "nfs: server %s OK" % c.nfs_server, None, None)
    wid = rng.randrange(max(1, c.dl_workers))
    shard = "%s/shard-%05d.bin" % (c.data_path, rng.randrange(c.n_shards))
    orig = ["Caught OSError in DataLoader worker process %d." % wid, "Original Traceback (most recent call last):",
            '  File "%s/torch/utils/data/_utils/worker.py", line 351, in _worker_loop' % c.libdir, "    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]",
            '  File "%s/torch/utils/data/_utils/fetch.py", line 52, in fetch' % c.libdir, "    data = [self.dataset[idx] for idx in possibly_batched_index]",
            '  File "%s/lm/data.py", line 47, in __getitem__' % c.workdir, "    with open(shard, \"rb\") as f:",
            "OSError: [Errno 116] Stale file handle: '%s'" % shard]
    exception(job, n, lr, t, "data_next", [], ["OSError: " + orig[0]] + orig[1:], "stale_file_handle")
    _retag_last(job, n, "Stale file handle", "stale_file_handle")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F), remote=n)


@kind("plat_hf_hub_unreachable", PLAT, "model_loading",
      "The culprit node has no route to the model hub (proxy/DNS missing on that node) and nothing in its local cache: loading the pretrained weights fails there.",
      "https://github.com/facebookresearch/bitsandbytes/issues/34 ; https://github.com/Comfy-Org/ComfyUI/issues/5695 ; https://github.com/BaranziniLab/KG_RAG/issues/46",
      styles=("lightning", "colossalai", "jsonl", "syslog"))
def k_hf(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    set_faulty(job, [n])
    lrs = list(st.local_ranks())
    first = traceback_lines([Frame(c.libdir + "/urllib3/connection.py", 198, "_new_conn", "sock = connection.create_connection("),
                             Frame(c.libdir + "/urllib3/util/connection.py", 85, "create_connection", "raise err"),
                             Frame(c.libdir + "/urllib3/util/connection.py", 73, "create_connection", "sock.connect(sa)")],
                            ["OSError: [Errno 101] Network is unreachable"])
    inner = [Frame(c.libdir + "/transformers/models/auto/auto_factory.py", 526, "from_pretrained", "config, kwargs = AutoConfig.from_pretrained("),
             Frame(c.libdir + "/transformers/models/auto/configuration_auto.py", 1021, "from_pretrained", "config_dict, unused_kwargs = PretrainedConfig.get_config_dict(pretrained_model_name_or_path, **kwargs)"),
             Frame(c.libdir + "/transformers/utils/hub.py", 445, "cached_file", "raise EnvironmentError(")]
    exc = ["OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like %s is not the path to a directory containing a file named config.json." % c.hf_model,
           "Checkout your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'."]
    for lr in lrs[: rng.randint(1, len(lrs))]:
        exception(job, n, lr, t + rng.uniform(10, 40), "model_build", inner, exc, "hf_hub_unreachable", chain=first)
    crashed = {n.idx: [(lr, 1) for lr in lrs]}
    propagate(job, t + 41, crashed, Op(2, "BROADCAST", 1), remote=None, mode="timeout")


@kind("plat_fabric_manager_down", PLAT, "initialization",
      "nvidia-fabricmanager is not running on the culprit (NVSwitch) node after a driver update/reboot; CUDA initialisation fails with error 802 'system not yet initialized' on all its ranks.",
      "https://github.com/microsoft/lisa/issues/2823 ; https://github.com/pytorch/pytorch/issues/35710 ; https://github.com/haotian-liu/LLaVA/issues/683",
      styles=TORCHISH)
def k_fm(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    set_faulty(job, [n])
    job.start_deferred()
    t = st.init_launch(t)
    msg = "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized"
    per = {}
    for lr in st.local_ranks():
        per[lr] = [("%s/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: %s (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)" % (c.libdir, msg), "cuda_init_802"),
                   ("  return torch._C._cuda_getDeviceCount() > 0", "cuda_init_802:context")]
    tagged_block(job, n, t + 1, per, IND)
    inner = [Frame(c.libdir + "/torch/cuda/__init__.py", 399, "set_device", "torch._C._cuda_setDevice(device)"),
             Frame(c.libdir + "/torch/cuda/__init__.py", 314, "_lazy_init", "torch._C._cuda_init()")]
    for lr in st.local_ranks():
        exception(job, n, lr, t + 2, "init_pg", inner, ["RuntimeError: " + msg], "cuda_init_802")
    for m in job.nodes:
        if m is not n and st.name in ("lightning", "nemo", "fabric"):
            per = {lr: ["Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" % (st.grank(m, lr), st.grank(m, lr) + 1, c.world)] for lr in st.local_ranks()}
            st.rank_block(m, t + 3, per)
    propagate(job, t + 2, {n.idx: [(lr, 1) for lr in st.local_ranks()]}, Op(1, "BROADCAST", 1), mode="timeout")


@kind("plat_node_image_missing_module", PLAT, "initialization",
      "The culprit node runs a different/stale container image without a compiled extension (flash-attn); every rank on that node fails at import while the others wait in rendezvous.",
      "https://github.com/mit-han-lab/bevfusion/issues/492 ; https://github.com/PKU-YuanGroup/UniWorld/issues/42",
      styles=TORCHISH)
def k_import(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    set_faulty(job, [n])
    job.start_deferred()
    t = st.init_launch(t)
    mod = rng.choice(["flash_attn", "flash_attn", "transformer_engine", "apex"])
    fr_user = [Frame(c.script_path_full, 14, "<module>", "from %s import %s" % (
        "lm.model" if st.name in ("lightning", "fabric", "syslog", "jsonl") else "modeling", "Transformer")),
               Frame(c.workdir + "/lm/model.py", 9, "<module>", "from flash_attn import flash_attn_func" if mod == "flash_attn" else "import %s" % mod)]
    for lr in st.local_ranks():
        pre = st.exc_prefix(n, lr)
        tb = traceback_lines(fr_user, ["ModuleNotFoundError: No module named '%s'" % mod])
        for text, part in tb:
            st.say(n, t + 1, lr, text, IND, "module_not_found" if part == "exc" else "module_not_found:context")
    crashed = {n.idx: [(lr, 1) for lr in st.local_ranks()]}
    propagate(job, t + 1.5, crashed, Op(1, "BROADCAST", 1), mode="timeout")


@kind("plat_dataloader_shm_bus_error", PLAT, "training",
      "The culprit pod/container has a small /dev/shm; DataLoader workers crash with SIGBUS when passing batches through shared memory.",
      "https://github.com/pytorch/pytorch/issues/108861 ; https://github.com/facebookresearch/mmf/issues/441 ; https://github.com/pytorch/pytorch/issues/5040",
      styles=TORCHISH)
def k_shm_dl(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    wpid = n.pids[lr] + rng.randint(50, 4000)
    say_pairs(job, n, t - 0.01, lr, [("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", "shm_bus_error")], IND)
    exception(job, n, lr, t, "data_next", [Frame(c.libdir + "/torch/utils/data/_utils/signal_handling.py", 73, "handler", "_error_if_any_worker_fails()")],
              ["RuntimeError: DataLoader worker (pid %d) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit." % wpid], "shm_bus_error")
    propagate(job, t, {n.idx: [(lr, 1)]}, op_for(job, job.F), remote=n)


@kind("plat_ray_memory_monitor_kill", PLAT, "training",
      "Host memory on the culprit node crossed Ray's memory-usage threshold during rollout; Ray's memory monitor killed the WorkerDict actor and the driver fails.",
      "https://github.com/verl-project/verl/issues/2950 ; https://github.com/ray-project/ray/pull/30312",
      styles=("verl",))
def k_ray_oom(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    set_faulty(job, [n])
    h = st.head()
    used = c.host_mem * rng.uniform(0.951, 0.99)
    msg0 = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."
    msg1 = "Memory on the node (IP: %s, ID: %s) where the task (actor ID: %s, name=%sWorkerDict.__init__, pid=%d, memory used=%.2fGB) was running was %.2fGB / %.2fGB (%f), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: %s) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip %s`. To see the logs of the worker, use `ray logs worker-%s*out -ip %s. Top 10 memory users:" % (
        n.ip, c.node_ids[n.idx], c.actor_id2, c.wg_prefix, n.pids[0], used / 4.2, used, c.host_mem, used / c.host_mem, c.worker_id, n.ip, c.worker_id, n.ip)
    h.at(t).put("(raylet, ip=%s) [%s E %d %d] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: %s, IP: %s) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip %s`" % (
        n.ip, ts_logging(n.ln(t)).replace(",", "."), rng.randint(100, 999), rng.randint(100, 999), c.node_ids[n.idx], n.ip, n.ip), IND, "ray_oom_kill")
    lines = [msg0, msg1, "PID\tMEM(GB)\tCOMMAND"] + ["%d\t%.2f\tray::WorkerDict.actor_rollout_generate_sequences" % (n.pids[i], used / 4.2 - i * 0.3) for i in range(min(4, c.gpn))]
    st.driver_failure(t + 1, n, 0, "actor_rollout_generate_sequences", msg0, lines, "rollout")
    # also tag on the culprit's own node log
    n.at(t).put("%s\tE raylet node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM) at node %s" % (ts_logging(n.ln(t)), c.node_ids[n.idx]), IND, "ray_oom_kill")


# =============================================================================== FRAMEWORK
@kind("fw_ckpt_corrupt_resume", FW, "model_loading",
      "The previous run was killed while the framework was writing its last checkpoint non-atomically; resuming from that truncated file fails on every rank ('failed finding central directory').",
      "https://github.com/open-mmlab/mmdetection/issues/4835 ; https://github.com/sml2h3/dddd_trainer/issues/36",
      styles=("lightning", "composer", "colossalai", "syslog", "verl", "nemo"), needs_resume=True, job_wide=True)
def k_corrupt(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    st.resume_announce(t)
    exc = ["RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"]
    inner = [Frame(c.libdir + "/torch/serialization.py", 1326, "load", "with _open_zipfile_reader(opened_file) as opened_zipfile:"),
             Frame(c.libdir + "/torch/serialization.py", 671, "__init__", "super().__init__(torch._C.PyTorchFileReader(name_or_buffer))")]
    if st.name == "verl":
        n = job.nodes[0]
        exception(job, n, 0, t + 5, "ckpt_load", inner, exc, "ckpt_corrupt")
        st.driver_failure(t + 6, n, 0, "actor_rollout_load_checkpoint", exc[0], exc, "ckpt_load")
        return
    crashed = {}
    for n in job.nodes:
        lrs = list(st.local_ranks())
        for lr in lrs:
            exception(job, n, lr, t + rng.uniform(5, 30), "ckpt_load", inner, exc, "ckpt_corrupt")
        crashed[n.idx] = [(lr, 1) for lr in lrs]
    _teardown_all(job, t + 31, crashed)


@kind("fw_dcp_missing_key_after_upgrade", FW, "model_loading",
      "After a framework upgrade the model/optimizer state-dict keys changed; torch.distributed.checkpoint refuses to load the old checkpoint ('Missing key in checkpoint state_dict') on every rank.",
      "https://github.com/pytorch/torchtitan/pull/3623 ; https://github.com/pytorch/pytorch/blob/main/torch/distributed/checkpoint/default_planner.py",
      styles=("jsonl", "syslog"), needs_resume=True, job_wide=True)
def k_dcp(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    st.resume_announce(t)
    key = rng.choice(["optimizer.state.model.layers.0.attention.wq.weight.step", "model.layers.0.self_attn.q_proj.weight",
                      "optimizer.param_groups.model.tok_embeddings.weight.fused"])
    inner = [Frame(c.libdir + "/torch/distributed/checkpoint/logger.py", 83, "wrapper", "result = func(*args, **kwargs)"),
             Frame(c.libdir + "/torch/distributed/checkpoint/state_dict_loader.py", 175, "load", "_load_state_dict("),
             Frame(c.libdir + "/torch/distributed/checkpoint/state_dict_loader.py", 234, "_load_state_dict", "central_plan: LoadPlan = distW.reduce_scatter(\"plan\", local_step, global_step)"),
             Frame(c.libdir + "/torch/distributed/checkpoint/utils.py", 193, "reduce_scatter", "raise result")]
    exc = ["torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys(%s)" % list(range(c.world)),
           "Traceback (most recent call last): (RANK 0)",
           '  File "%s/torch/distributed/checkpoint/utils.py", line 166, in reduce_scatter' % c.libdir,
           "    local_data = map_fun()",
           '  File "%s/torch/distributed/checkpoint/default_planner.py", line 347, in create_local_plan' % c.libdir,
           "    raise RuntimeError(f\"Missing key in checkpoint state_dict: {fqn}.\")",
           "RuntimeError: Missing key in checkpoint state_dict: %s." % key]
    crashed = {}
    for n in job.nodes:
        lrs = list(st.local_ranks())
        for lr in lrs:
            exception(job, n, lr, t + rng.uniform(20, 40), "ckpt_load", inner, exc, "dcp_missing_key")
            _retag_last(job, n, "RuntimeError: Missing key in checkpoint state_dict", "dcp_missing_key")
        crashed[n.idx] = [(lr, 1) for lr in lrs]
    _teardown_all(job, t + 41, crashed)


@kind("fw_vllm_illegal_memory_access", FW, "training",
      "A bug in the rollout engine (vLLM sampler kernels) triggers an illegal memory access on one worker during generation; the actor dies and the PPO driver aborts.",
      "https://github.com/verl-project/verl/issues/184 ; https://github.com/verl-project/verl/issues/241 ; https://github.com/Agent-RL/ReCall/issues/54",
      styles=("verl",))
def k_vllm(job, t):
    st, c, rng, tf = S(job), job.cfg, job.rng, job.tf
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    inner = [Frame(c.libdir + "/vllm/utils.py", 1063, "inner", "return fn(*args, **kwargs)"),
             Frame(c.libdir + "/vllm/entrypoints/llm.py", 353, "generate", "outputs = self._run_engine(use_tqdm=use_tqdm)"),
             Frame(c.libdir + "/vllm/entrypoints/llm.py", 879, "_run_engine", "step_outputs = self.llm_engine.step()"),
             Frame(c.libdir + "/vllm/worker/model_runner.py", 1708, "execute_model", "output: SamplerOutput = self.model.sample("),
             Frame(c.libdir + "/vllm/model_executor/layers/sampler.py", 274, "forward", "maybe_deferred_sample_results, maybe_sampled_tokens_tensor = _sample(")]
    exc = ["RuntimeError: CUDA error: an illegal memory access was encountered"] + cuda_tail(tf)
    exception(job, n, lr, t, "rollout", inner, exc, "cuda_illegal_memory_access")
    st.say_worker(n, t + 0.1, lr, "Fatal Python error: Aborted", IND, "fatal_abort:context")
    st.driver_failure(t + 2, n, lr, "actor_rollout_generate_sequences", exc[0], exc, "rollout")


@kind("fw_torch_compile_backend_failure", FW, "training",
      "torch.compile's inductor backend crashes while compiling the model at the first training step on every rank (compiler/framework bug).",
      "https://github.com/pytorch/pytorch/issues/121833 ; https://github.com/pytorch/pytorch/blob/main/torch/_dynamo/exc.py",
      styles=("jsonl", "fabric", "syslog"), job_wide=True)
def k_compile(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    err = rng.choice(["AssertionError: ", "LoweringException: AssertionError: ", "CompilationError: at 12:21:"])
    exc = ["torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
           "%s" % (err + ("target: aten.convolution_backward.default" if "Lowering" in err else "")),
           "",
           "Set TORCH_LOGS=\"+dynamo\" and TORCHDYNAMO_VERBOSE=1 for more information",
           "",
           "",
           "You can suppress this exception and fall back to eager by setting:",
           "    import torch._dynamo",
           "    torch._dynamo.config.suppress_errors = True"]
    inner = [Frame(c.libdir + "/torch/_dynamo/eval_frame.py", 465, "_fn", "return fn(*args, **kwargs)"),
             Frame(c.libdir + "/torch/_dynamo/convert_frame.py", 1269, "__call__", "return self._torchdynamo_orig_callable("),
             Frame(c.libdir + "/torch/_dynamo/output_graph.py", 1465, "_call_user_compiler", "raise BackendCompilerFailed(self.compiler_fn, e) from e")]
    crashed = {}
    for n in job.nodes:
        for lr in st.local_ranks():
            exception(job, n, lr, t + rng.uniform(0, 20), "train_step", inner, exc, "compile_failed")
        crashed[n.idx] = [(lr, 1) for lr in st.local_ranks()]
    _teardown_all(job, t + 21, crashed)


@kind("fw_ddp_unused_parameters", FW, "training",
      "The framework wraps the model in DDP without find_unused_parameters while some parameters receive no gradient on some steps (conditional branch / frozen head): DDP's reducer errors on the next iteration on every rank.",
      "https://github.com/hpcaitech/ColossalAI/issues/3251 ; https://github.com/pytorch/pytorch/issues/43259 ; https://github.com/Megvii-BaseDetection/YOLOX/issues/885",
      styles=("colossalai", "lightning"), job_wide=True)
def k_unused(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    all_faulty(job)
    idx = sorted(rng.sample(range(200, 400), 3))
    exc = ["RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by ",
           "making sure all `forward` function outputs participate in calculating loss. ",
           "If you already have done the above, then the distributed data parallel module wasn't able to locate the output tensors in the return value of your module's `forward` function. Please include the loss function and the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, iterable).",
           "Parameter indices which did not receive grad for rank %%d: %s" % " ".join(map(str, idx)),
           " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print out information about which particular parameters did not receive gradient on this rank as part of this error"]
    inner = [Frame(c.libdir + "/torch/nn/parallel/distributed.py", 1636, "forward", "inputs, kwargs = self._pre_forward(*inputs, **kwargs)"),
             Frame(c.libdir + "/torch/nn/parallel/distributed.py", 1527, "_pre_forward", "if torch.is_grad_enabled() and self.reducer._rebuild_buckets():")]
    crashed = {}
    for n in job.nodes:
        for lr in st.local_ranks():
            e = list(exc)
            e[3] = e[3] % st.grank(n, lr)
            exception(job, n, lr, t + rng.uniform(0, 1), "train_step", inner, e, "ddp_unused_params")
        crashed[n.idx] = [(lr, 1) for lr in st.local_ranks()]
    _teardown_all(job, t + 2, crashed)


# =============================================================================== FINALIZATION
@kind("fw_segfault_at_shutdown", FW, "finalization",
      "Training and the final checkpoint completed, but one rank crashed while the process groups were torn down at interpreter exit (NCCL/ProcessGroup destructor); the launcher reports the job as failed.",
      "https://github.com/NVIDIA/Fuser/issues/1820 ; https://github.com/modelscope/ms-swift/issues/5772 ; https://github.com/hpcaitech/ColossalAI/issues/6202",
      styles=TORCHISH)
def k_exit_segv(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = pick_culprit(job)
    lr = rng.randrange(c.gpn)
    set_faulty(job, [n])
    job.bad_exit_nodes = {n.idx}
    st.finish(t)
    te = t + rng.uniform(4, 20)
    mods = "numpy.core._multiarray_umath, numpy.core._multiarray_tests, numpy.linalg._umath_linalg, torch._C, torch._C._fft, torch._C._linalg, torch._C._nested, torch._C._nn, torch._C._sparse, torch._C._special, yaml._yaml, regex._regex, sentencepiece._sentencepiece, pyarrow.lib (total: %d)" % rng.randint(40, 90)
    pairs = [("Fatal Python error: Segmentation fault", "segfault_at_exit"), ("", "segfault_at_exit:context"),
             ("Thread 0x%016x (most recent call first):" % rng.randrange(0x7f0000000000, 0x7fffffffffff), "segfault_at_exit:context"),
             ("  <no Python frame>", "segfault_at_exit:context"), ("", "segfault_at_exit:context"),
             ("Current thread 0x%016x (most recent call first):" % rng.randrange(0x7f0000000000, 0x7fffffffffff), "segfault_at_exit:context"),
             ("  <no Python frame>", "segfault_at_exit:context"), ("", "segfault_at_exit:context"),
             ("Extension modules: " + mods, "segfault_at_exit:context")]
    if c.nccl_debug == "INFO":
        nc = Nccl(job, n, lr)
        pairs = [(nc.info("[Service thread] Connection closed by localRank %d" % lr), None),
                 (nc.info("comm 0x%x rank %d nranks %d cudaDev %d busId %s - Abort COMPLETE" % (rng.randrange(0x55d000000000, 0x55dfffffffff), st.grank(n, lr), c.world, lr, c.busids[lr])), None)] + pairs
    say_pairs(job, n, te, lr, pairs, IND)
    failed = {n.idx: [(lr, -11, te + 0.1)]}
    if st.launcher == "srun":
        h = st.head()
        h.at(te + 0.5).put(srun_task_msg(n.host, [st.grank(n, lr)], "Segmentation fault (core dumped)"), SYM, "srun_task_failed")
        return
    st.teardown(te, failed)


@kind("plat_final_export_enospc", PLAT, "finalization",
      "Training finished, but writing the final (Hugging Face / safetensors) export ran out of space on the output filesystem.",
      "https://github.com/hiyouga/LlamaFactory/issues/5155 ; https://github.com/bentoml/OpenLLM/issues/754 ; https://github.com/bghira/SimpleTuner/issues/2353",
      styles=("colossalai", "composer", "lightning"))
def k_final_enospc(job, t):
    st, c, rng = S(job), job.cfg, job.rng
    n = job.nodes[0]
    set_faulty(job, [n])
    h = n
    S_ = c.workdir + "/" + st.script
    if st.name == "colossalai":
        h.close_partial()
        st.say(h, t, 0, "Start saving final model checkpoint")
        stack = [Frame(S_, 471, "<module>", "train(args)"), Frame(S_, 430, "train", "booster.save_model(model, os.path.join(args.save_dir, \"modeling\"), shard=True)"),
                 Frame(c.libdir + "/colossalai/booster/booster.py", 326, "save_model", "self.checkpoint_io.save_model("),
                 Frame(c.libdir + "/colossalai/checkpoint_io/hybrid_parallel_checkpoint_io.py", 262, "save_sharded_model", "total_size = save_state_dict_shards("),
                 Frame(c.libdir + "/colossalai/checkpoint_io/utils.py", 327, "save_state_dict", "safe_save_file(state_dict, checkpoint_file_path, metadata={\"format\": \"pt\"})")]
    elif st.name == "composer":
        st.say(h, t, 0, st.lf(h, t, 0, "INFO", "llmfoundry.callbacks.hf_checkpointer", "Saving Hugging Face checkpoint in global batch %d" % c.total_steps))
        stack = [Frame(c.workdir + "/scripts/train/train.py", 9, "<module>", "train_from_yaml(yaml_path, args_list)"),
                 Frame(c.libdir + "/llmfoundry/command_utils/train.py", 647, "train", "trainer.fit()"),
                 Frame(c.libdir + "/composer/trainer/trainer.py", 2306, "fit", "self._train_loop()"),
                 Frame(c.libdir + "/composer/trainer/trainer.py", 2624, "_train_loop", "self.engine.run_event(Event.FIT_END)"),
                 Frame(c.libdir + "/llmfoundry/callbacks/hf_checkpointer.py", 464, "fit_end", "self._save_checkpoint(state, logger, upload_to_save_folder=True, register_to_mlflow=True)"),
                 Frame(c.libdir + "/llmfoundry/callbacks/hf_checkpointer.py", 812, "_save_checkpoint", "new_model_instance.save_pretrained("),
                 Frame(c.libdir + "/transformers/modeling_utils.py", 2793, "save_pretrained", "safe_save_file(shard, os.path.join(save_directory, shard_file), metadata={\"format\": \"pt\"})")]
    else:
        h.close_partial()
        st.say(h, t, 0, "`Trainer.fit` stopped: `max_steps=%d` reached." % c.total_steps)
        stack = [Frame(c.workdir + "/train.py", c.script_line, "<module>", "main()"),
                 Frame(c.workdir + "/train.py", c.main_line + 4, "main", "model.model.save_pretrained(cfg.export_dir, safe_serialization=True)"),
                 Frame(c.libdir + "/transformers/modeling_utils.py", 2793, "save_pretrained", "safe_save_file(shard, os.path.join(save_directory, shard_file), metadata={\"format\": \"pt\"})")]
    stack.append(Frame(c.libdir + "/safetensors/torch.py", 286, "save_file", "serialize_file(_flatten(tensors), filename, metadata=metadata)"))
    exc = ['safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })']
    tb = traceback_lines(stack, exc, py311=c.py311)
    pre = st.exc_prefix(h, 0)
    te = t + rng.uniform(30, 200)
    for text, part in tb:
        st.say(h, te, 0, pre + text, IND, "final_export_enospc" if part == "exc" else "final_export_enospc:context")
    failed = {0: [(0, 1, te + 0.2)]}
    if st.launcher == "srun":
        hh = st.head()
        hh.at(te + 0.6).put(srun_task_msg(h.host, [0], "Exited with exit code 1"), SYM, "srun_task_failed")
        return
    # the other ranks already left the training loop and exit normally
    st.teardown(te, failed)
