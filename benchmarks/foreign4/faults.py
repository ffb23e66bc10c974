"""Fault catalogue and injection for foreign4.

Each entry: id, category, stage, styles it can appear in, root cause, sources,
and an injector fn(run, t) that continues the run from the start of training
and writes the fault and its propagation.  The injector records truth in
run.truth (culprits, stage, iteration, iteration_exact).
"""
import math

from styles import dt_of

T, MS, HV, MX, DT = "titan-slurm", "mindspeed-npu", "horovod-mpirun", "maxtext-jax", "determined"
TORCH_STYLES = [T, HV, DT]


def _it(run, step):
    k = run.P["k"]
    return int(math.ceil(step / k) * k)


def set_truth(run, culprits, stage, step=None, exact=None, iteration=None):
    run.truth = {"culprits": culprits, "stage": stage,
                 "iteration": (iteration if iteration is not None else (_it(run, step) if step is not None else None)),
                 "iteration_exact": exact if exact is not None else step}


def pick_culprit(run, avoid_head=False, n=1):
    nodes = run.nodes[1:] if (avoid_head and len(run.nodes) > 1) else run.nodes
    out = run.rng.sample(nodes, min(n, len(nodes)))
    return sorted(out, key=lambda x: x.idx)


def pick_l(run, node):
    l = run.rng.choice(run.S.vis(node))
    run.culprit_l = l
    return l


def seq_of(run, step):
    return 37 + (step - run.P["start"]) * (2 * run.P["layers"] + 3)


def fault_step(run):
    P = run.P
    lo = P["start"] + 2 * P["k"] + 1
    hi = P["total"] - 1
    if hi <= lo:
        hi = lo + 1
    return run.rng.randint(lo, hi)


def to_fault_step(run, t, slow=None):
    F = fault_step(run)
    t = run.train_to(F - 1, t, slow=slow)
    t += run.P["dt"] * run.rng.uniform(0.2, 0.9)
    return t, F


def event_step(run, every):
    P = run.P
    K = (P["start"] // every + 1) * every
    while K <= P["start"] + P["k"]:
        K += every
    if K >= P["total"]:
        P["total"] = K + 2 * P["k"]
    return K


# ----------------------------------------------------------------------
# propagation
def is_silent_factory(run):
    run.silent = set()
    run.is_silent = lambda node, l: (node.name, l) in run.silent


def propagate(run, t, culprits, mode, cfail=None, sig=None, seq=0, exit_code=1):
    """mode: crash (culprit process exited), hang (culprit silent but alive), power (node gone)."""
    S = run.S
    st = S.name
    peers = [n for n in run.nodes if n not in culprits]
    rpn = run.P["rpn"]
    l = run.culprit_l if run.culprit_l is not None else 0
    if st == HV:
        if mode == "crash":
            g = culprits[0].idx * rpn + l
            cn = culprits[0]
            for n in peers:
                for ll in range(rpn):
                    if run.rng.random() < 0.5:
                        x = t + 0.2 + 0.01 * ll
                        run.emit(n, x, S.X(n, ll, "%s:%d:%d [%d] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:%s remoteGid ::ffff:%s" % (
                            n.name, S.pid(n, ll), S.pid(n, ll) + 50, ll, cn.ip, 42000 + cn.idx, n.ip, cn.ip), "stdout"), ("symptoms", "nccl_ib_completion_error"))
            S.mpirun_box(t + 1.2, g, exit_code, sig=sig)
            return
        if mode == "power":
            head = run.nodes[0]
            x = t + 35
            for m, mk in [("--------------------------------------------------------------------------", None),
                          ("ORTE has lost communication with a remote daemon.", ("symptoms", "orte_lost_daemon")), ("", None),
                          ("  HNP daemon   : [[%d,0],0] on node %s" % (run.P["mpi_jobid"], head.name), None),
                          ("  Remote daemon: [[%d,0],%d] on node %s" % (run.P["mpi_jobid"], culprits[0].idx, culprits[0].name), ("symptoms", "orte_lost_daemon")),
                          ("", None), ("This is usually due to either a failure of the TCP network", None),
                          ("connection to the node, or possibly an internal failure of", None),
                          ("the daemon itself. We cannot recover from this failure, and", None),
                          ("therefore will terminate the job.", None),
                          ("--------------------------------------------------------------------------", None)]:
                run.emit(head, x, m, mk)
            return
        ends = [S.peer_fail(n, t, culprits, "hang", seq) for n in run.nodes]
        S.mpirun_box(max(ends) + 1, 0 if not run.is_silent(run.nodes[0], 0) else 1, 1)
        return
    # culprit side
    if mode == "crash" and cfail:
        for cn in culprits:
            if S.name in (T, MS, DT):
                S.teardown(cn, t + 1, cfail)
        if st in (T, MX):
            S.job_end(t + 2.5, [(cn, sig or exit_code) for cn in culprits])
    # peers
    pm = "crash" if mode in ("crash", "power") else "hang"
    if st == MX and mode == "hang":
        x = t + run.rng.uniform(3000, 9000)
        for n in run.nodes:
            S.sched_cancel(n, x, "TIME LIMIT", ("symptoms", "slurm_step_cancelled"))
        S.job_end(x + 1, [(n, "term") for n in run.nodes], cancel=True)
        return
    if st == MX and mode == "power" and culprits[0].idx == 0:
        peers_fail_nodes = peers
    ends = []
    pnodes = peers if mode != "hang" else run.nodes
    for n in pnodes:
        te = S.peer_fail(n, t + 2, culprits, pm, seq)
        ends.append((n, te))
    for n, te in ends:
        if S.name in (T, MS, DT):
            fl = []
            for ll in range(rpn):
                if run.is_silent(n, ll):
                    continue
                fl.append((ll, 1 if pm == "crash" and S.name != MS else -6))
            for ll in range(rpn):
                if run.is_silent(n, ll):
                    fl.append((ll, -9))
            if n in culprits and fl:
                run.emit(n, te + 0.5, S.A(n, te + 0.5, "W", "torch/distributed/elastic/multiprocessing/api.py:916", "Unable to shutdown process %d via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL" % S.pid(n, l)) if S.name == T else
                         (S.D(n, te + 0.5, "W%s %d torch/distributed/elastic/multiprocessing/api.py:875] Unable to shutdown process %d via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL" % (dt_of(te + 0.5 + n.skew).strftime("%m%d %H:%M:%S.%f"), n.pid0, S.pid(n, l))) if S.name == DT else
                          "WARNING:torch.distributed.elastic.multiprocessing.api:Unable to shutdown process %d via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL" % S.pid(n, l)))
                te += 30
            S.teardown(n, te, fl)
    tend = max([te for _, te in ends] or [t]) + 2
    if st in (T, MX):
        nf = culprits[0] if mode == "power" else None
        if nf is not None:
            for n in peers:
                S.sched_cancel(n, tend + 1, "NODE FAILURE", ("symptoms", "slurm_step_cancelled"))
        S.job_end(tend + 1.5, [(n, ("abort" if st == MX else 1)) for n, _ in ends], node_fail=nf)
    elif st == DT:
        S.job_end(tend + 2, [], node_fail=culprits[0] if mode == "power" else None)


def jobwide_end(run, t, cfail_code=1, sig=None):
    """every node raised; each launcher tears down."""
    S = run.S
    rpn = run.P["rpn"]
    if S.name == HV:
        S.mpirun_box(t + 1, 0, cfail_code, sig=sig)
        return
    ends = []
    for n in run.nodes:
        if S.name in (T, MS, DT):
            ends.append(S.teardown(n, t + 1 + n.idx * 0.002, [(l, cfail_code) for l in range(rpn)]))
    if S.name in (T, MX):
        S.job_end(t + 3, [(n, cfail_code) for n in run.nodes])
    elif S.name == DT:
        S.job_end(t + 4, [])


def culprit_exc(run, cn, l, t, frames, finals, kind, pre=(), all_ranks=False):
    S = run.S
    ranks = S.vis(cn) if all_ranks else [l]
    for ll in ranks:
        for (txt, k) in pre:
            run.emit(cn, t, txt(cn, ll) if callable(txt) else txt, ("indicators", k))
        S.exc(cn, ll, t + 0.001 * ll, frames, finals, kind)


def cuda_cont():
    return ["CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]


def dmesg(run, cn, t, lines, kind):
    """node health-check epilog dumps kernel messages into the job log."""
    S = run.S
    hdr = "==== %s: node health check (dmesg -T | tail) ====" % cn.name
    if S.name == DT:
        hdr = S.D(cn, t, hdr)
    run.emit(cn, t, hdr)
    up = 800000 + cn.idx * 1311
    for i, ln in enumerate(lines):
        d = dt_of(t - 30 + i + cn.skew)
        txt = "[%s] %s" % (d.strftime("%a %b %d %H:%M:%S %Y"), ln)
        if S.name == DT:
            txt = S.D(cn, t, txt)
        run.emit(cn, t, txt, ("indicators", kind))


# ----------------------------------------------------------------------
# injectors
def f_xid79(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    if S.name == MX:
        culprit_exc(run, cn, l, t, S.frames_train(), ["jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA error: Failed to synchronize GPU for command buffer execution: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"], "xla_cuda_error")
    else:
        culprit_exc(run, cn, l, t, S.frames_train(), ["RuntimeError: CUDA error: unspecified launch failure"] + cuda_cont(), "cuda_error")
    dmesg(run, cn, t + 3, ["NVRM: GPU at PCI:0000:%02x:00: GPU-%s" % (0x18 + l * 0x10, run.uuid("gpu%d" % l)),
                           "NVRM: Xid (PCI:0000:%02x:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." % (0x18 + l * 0x10),
                           "NVRM: GPU %d is lost." % l], "xid79")
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_ecc(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    if S.name == MX:
        culprit_exc(run, cn, l, t, S.frames_train(), ["jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA error: : CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered"], "xla_ecc_error")
    else:
        culprit_exc(run, cn, l, t, S.frames_train(), ["RuntimeError: CUDA error: uncorrectable ECC error encountered"] + cuda_cont(), "cuda_ecc_error")
    dmesg(run, cn, t + 3, ["NVRM: Xid (PCI:0000:%02x:00): 48, pid=%d, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition %d, subpartition 0." % (0x18 + l * 0x10, S.pid(cn, l), l % 8),
                           "NVRM: Xid (PCI:0000:%02x:00): 63, pid=%d, name=python3, Row Remapper: New row marked for remapping, reset gpu to activate." % (0x18 + l * 0x10, S.pid(cn, l))], "xid48_dbe")
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_ib_port(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    hca = "mlx5_%d" % (l % 8)
    if S.name == T:
        pre = [(lambda n, ll: S.nccl(n, ll, "transport/net_ib.cc:99 NCCL WARN NET/IB : %s:1 Got async event : port error" % hca), "nccl_ib_port_error")]
    elif S.name == HV:
        pre = [(lambda n, ll: S.X(n, ll, "%s:%d:%d [%d] transport/net_ib.cc:99 NCCL WARN NET/IB : %s:1 Got async event : port error" % (n.name, S.pid(n, ll), S.pid(n, ll) + 50, ll, hca), "stdout"), "nccl_ib_port_error")]
    else:
        pre = [(lambda n, ll: S.D(n, t, "%s:%d:%d [%d] transport/net_ib.cc:99 NCCL WARN NET/IB : %s:1 Got async event : port error" % (n.name, S.pid(n, ll), S.pid(n, ll) + 50, ll, hca), S.g(n, ll)), "nccl_ib_port_error")]
    culprit_exc(run, cn, l, t + 2, S.frames_train() + [("/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py" if S.name == T else S.site + "/torch/distributed/distributed_c10d.py", 2501, "all_reduce", "work.wait()")] if S.name != HV else
                S.frames_train() + [(S.site + "/horovod/torch/mpi_ops.py", 1170, "synchronize", "raise HorovodInternalError(e)")],
                (["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
                  "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. "] if S.name != HV else
                 ["horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled system error"]),
                "nccl_system_error", pre=pre)
    dmesg(run, cn, t + 4, ["mlx5_core 0000:%02x:00.0: mlx5_port_module_event:1153:(pid 0): Port module event: module %d, Cable unplugged" % (0x1a + l * 0x10, l % 8),
                           "mlx5_core 0000:%02x:00.0 ib%d: Link down" % (0x1a + l * 0x10, l % 8)], "ib_link_down")
    set_truth(run, [cn], "training", F)
    propagate(run, t + 2, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_aicore(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    g = S.g(cn, l)
    ts = lambda: __import__("styles").cann_ts(t + cn.skew)
    culprit_exc(run, cn, l, t, S.frames_train() + [
        ("/home/work/MindSpeed-LLM/mindspeed/ops/fusion_attention_v2.py", 63, "backward", "results = mindspeed_ops.npu_fusion_attention_grad("),
        (S.site + "/torch/_ops.py", 1116, "__call__", "return self._op(*args, **(kwargs or {}))")],
        ["RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the current working operator name is FlashAttentionScoreGrad.",
         "Since the operator is called asynchronously, the stacktrace may be inaccurate. If you want to get the accurate stacktrace, pleace set the environment variable ASCEND_LAUNCH_BLOCKING=1.",
         "[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR00100 PTA call acl api failed" % (dt_of(t + cn.skew).strftime("%Y-%m-%d-%H:%M:%S"), S.pid(cn, l), l, g)],
        "npu_inner_error")
    for m in ["EZ9999: Inner Error!",
              "EZ9999: [PID: %d] %s The error from device(chipId:%d, dieId:0), serial number is %d, there is an aivec error exception, core id is %d, error code = 0x800000, dump info: pc start: 0x12c0c0a8d000, current: 0x12c0c0a8d4c0, vec error info: 0x1a0b000e71, mte error info: 0x3d05000082, ifu error info: 0x2bc71a5e3e00, ccu error info: 0xb5a1af2000000000, cube error info: 0, biu error info: 0, aic error mask: 0x6500020bd000288, para base: 0x12c1c0404800.[FUNC:ProcessStarsCoreErrorInfo][FILE:device_error_proc.cc][LINE:1380]" % (S.pid(cn, l), ts(), l, 11 + F % 50, 5 + l),
              "        TraceBack (most recent call last):",
              "       The extend info: errcode:(0x800000, 0, 0) errorStr: The DDR address of the MTE instruction is out of range. fixp_error0 info: 0x5000082, fixp_error1 info: 0x3d, fsmId:1, tslot:2, thread:0, ctxid:0, blk:12, sublk:0, subErrType:4.[FUNC:ProcessStarsCoreErrorInfo][FILE:device_error_proc.cc][LINE:1392]",
              "       Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr][FILE:davinci_kernel_task.cc][LINE:1259]",
              "       Aicore kernel execute failed, device_id=%d, stream_id=2, report_stream_id=2, task_id=%d, flip_num=3, fault kernel_name=FlashAttentionScoreGrad_%d_high_performance_mix_aic, fault kernel info ext=none, program id=146, hash=%d.[FUNC:GetError][FILE:stream.cc][LINE:1183]" % (l, 40000 + F % 20000, 10000 + F % 777, 11300000000 + F),
              "       rtStreamSynchronize execute failed, reason=[vector core exception][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
              "       synchronize stream failed, runtime result = 507035[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]"]:
        run.emit(cn, t + 0.01, m, ("indicators", "cann_EZ9999") if ("EZ9999" in m or "rtStreamSynchronize" in m or "Aicore kernel" in m) else None)
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_npu_oom(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    culprit_exc(run, cn, l, t, S.frames_train() + [
        ("/home/work/MindSpeed-LLM/megatron/core/pipeline_parallel/schedules.py", 274, "forward_step", "output_tensor, loss_func = forward_step_func(data_iterator, model)"),
        (S.site + "/torch/nn/functional.py", 1888, "silu", "return torch._C._nn.silu(input)")],
        ["RuntimeError: NPU out of memory. Tried to allocate 3.91 GiB (NPU %d; 60.97 GiB total capacity; 53.12 GiB already allocated; 53.12 GiB current active; 2.03 GiB free; 57.94 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation." % l],
        "npu_oom")
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_cuda_oom(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    culprit_exc(run, cn, l, t, S.frames_train() + [("/opt/venv/lib/python3.11/site-packages/torch/_tensor.py" if S.name == T else S.site + "/torch/_tensor.py", 581, "backward", "torch.autograd.backward(")],
                ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU %d has a total capacity of 79.11 GiB of which 1.37 GiB is free. Including non-PyTorch memory, this process has 77.73 GiB memory in use. Of the allocated memory 71.20 GiB is allocated by PyTorch, and 4.96 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)" % l],
                "cuda_oom")
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_xla_oom(run, t):
    S = run.S
    F = run.P["start"] + 1
    t += 20
    for n in run.nodes:
        S.exc(n, 0, t + n.idx * 0.01, S.frames_train() + [(S.site + "/jax/_src/interpreters/pxla.py", 1288, "__call__", "results = self.xla_executable.execute_sharded(")],
              ["jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate %d bytes." % (13254107136 + run.P["seq"] * 1024)], "xla_oom")
    set_truth(run, list(run.nodes), "training", F)
    jobwide_end(run, t)


def f_host_oom(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    run.emit(cn, t + 0.5, S.oom_kill_line(cn, t), ("indicators", "slurm_oom_kill"))
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "crash", [(l, -9)], sig="oom", seq=seq_of(run, F))


def f_shm_bus(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    pre = [(lambda n, ll: S.X(n, ll, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."), "dataloader_bus_error")]
    culprit_exc(run, cn, l, t, S.frames_data() + [(S.site + "/torch/utils/data/_utils/signal_handling.py" if S.name != T else "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/signal_handling.py", 73, "handler", "_error_if_any_worker_fails()")],
                ["RuntimeError: DataLoader worker (pid %d) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit." % (S.pid(cn, l) + 900)],
                "dataloader_worker_killed", pre=pre)
    set_truth(run, [cn], "data_loading", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_missing_shard(run, t):
    S = run.S
    shard = run.rng.randrange(0, run.P["n_shards"])
    t = trim(run, "data")
    if S.name == MS:
        fin = ["FileNotFoundError: [Errno 2] No such file or directory: '%s/pretrain_text_document.idx'" % run.P["data_path"]]
    elif S.name == MX:
        fin = ["tensorflow.python.framework.errors_impl.NotFoundError: %s/en/3.0.1/c4-train.tfrecord-%05d-of-%05d; No such file or directory" % (run.P["data_path"], shard, run.P["n_shards"])]
    else:
        fin = ["FileNotFoundError: Unable to find '%s/en/c4-train.%05d-of-%05d.json.gz'" % (run.P["data_path"], shard, run.P["n_shards"])]
    fr = S.frames_data()
    if S.name == T:
        site = "/opt/venv/lib/python3.11/site-packages"
        fr = S.frames_init()[:1] + [("/workspace/torchtitan/torchtitan/train.py", 183, "__init__", "self.dataloader = self.train_spec.build_dataloader_fn("),
                                    ("/workspace/torchtitan/torchtitan/datasets/hf_datasets.py", 92, "__init__", "ds = dataset_loader(path)"),
                                    (site + "/datasets/load.py", 2594, "load_dataset", "builder_instance = load_dataset_builder("),
                                    (site + "/datasets/data_files.py", 385, "resolve_pattern", "raise FileNotFoundError(error_msg)")]
    for n in run.nodes:
        for l in (S.vis(n) if S.name != MS else range(run.P["rpn"])):
            S.exc(n, l, t + 0.3 + 0.01 * l, fr, fin, "missing_data_file")
    set_truth(run, list(run.nodes), "data_loading")
    jobwide_end(run, t + 0.5)


def f_corrupt_shard(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    S = run.S
    if S.name == MX:
        fin = ["tensorflow.python.framework.errors_impl.DataLossError: corrupted record at %d [Op:IteratorGetNext] name: " % (run.rng.randrange(10**8, 10**9))]
    else:
        fin = ["pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file."]
    culprit_exc(run, cn, l, t, S.frames_data(), fin, "corrupt_data_file")
    set_truth(run, [cn], "data_loading", F)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))


def f_parallel_cfg(run, t):
    S = run.S
    P = run.P
    w = P["world"]
    t = trim(run, "init") + 30.5
    if S.name == T:
        tp = 3
        fin = ["AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard(%d) * cp(1) * tp(%d) * pp(1) != WORLD_SIZE(%d)" % (max(1, w // 4), tp, w)]
    elif S.name == MS:
        fin = ["AssertionError: world size (%d) is not divisible by tensor model parallel size (%d) times pipeline model parallel size (%d)" % (w, 3, 1)]
    else:
        fin = ["AssertionError: Number of devices %d does not match the product of the parallelism %d" % (w, w * 3 // 2)]
    for n in run.nodes:
        ranks = S.vis(n) if S.name != MS else [0] if n.idx == 0 else []
        for l in ranks:
            S.exc(n, l, t - 30 + 0.01 * l, S.frames_init(), fin, "config_assertion")
    set_truth(run, list(run.nodes) if S.name != MS else [run.nodes[0]], "initialization")
    if S.name == MS:
        # Megatron validates args on every rank; only rank 0's traceback is printed untangled
        for n in run.nodes[1:]:
            S.exc(n, 0, t - 30, S.frames_init(), fin, "config_assertion")
        run.truth["culprits"] = list(run.nodes)
    jobwide_end(run, t - 29)


def f_unknown_arch(run, t):
    S = run.S
    fin = ["ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers does not recognize this architecture. This could be because of an issue with the checkpoint, or because your version of Transformers is out of date."]
    t = trim(run, "model") + 15
    fr = S.frames_init()[:1] + [(S.site + "/transformers/models/auto/configuration_auto.py", 1038, "from_pretrained", 'raise ValueError(')]
    for n in run.nodes:
        for l in range(run.P["rpn"]):
            S.exc(n, l, t - 15 + 0.01 * l, fr, fin, "unknown_model_type")
    set_truth(run, list(run.nodes), "model_loading")
    jobwide_end(run, t - 14)


def f_ckpt_corrupt(run, t):
    S = run.S
    P = run.P
    if S.name == MX:
        fin = ["ValueError: NOT_FOUND: Error opening \"zarr3\" driver: Error reading local file \"%s/%d/items/params/d/3f2a9c1e0b7d\": Failed to open \"%s/%d/items/params/d/3f2a9c1e0b7d\" [tensorstore_spec='{\\\"driver\\\":\\\"zarr3\\\"}']" % (P["ckpt_dir"], P["start"], P["ckpt_dir"], P["start"])]
        fr = S.frames_train()[:3] + [(S.site + "/orbax/checkpoint/checkpoint_manager.py", 1412, "restore", "restored = self._checkpointer.restore(restore_directory, args=args)")]
    else:
        fin = ["RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"]
        fr = S.frames_init()[:1] + [(S.site + "/torch/serialization.py", 1072, "load", "with _open_zipfile_reader(opened_file) as opened_zipfile:"),
                                    (S.site + "/torch/serialization.py", 480, "__init__", "super().__init__(torch._C.PyTorchFileReader(name_or_buffer))")]
    ranks = lambda n: S.vis(n) if S.name in (T, MX) else range(P["rpn"])
    t = trim(run, "model") + P["ckpt_load_s"] - 2
    for n in run.nodes:
        for l in ranks(n):
            S.exc(n, l, t - P["ckpt_load_s"] + 2 + 0.01 * l, fr, fin, "checkpoint_corrupt")
    set_truth(run, list(run.nodes), "model_loading")
    jobwide_end(run, t - P["ckpt_load_s"] + 3)


def _ckpt_begin(run, t):
    K = event_step(run, run.P["ckpt_every"])
    t = run.train_to(K, t, skip_last_events=True)
    for n in run.nodes:
        run.S.ckpt_begin(n, t, K)
    return t + run.P["ckpt_s"] * run.rng.uniform(0.2, 0.8), K


def _os_err(run, t, errno, msg, jobwide, cat_kind):
    t, K = _ckpt_begin(run, t)
    S = run.S
    P = run.P
    path = "%s/step-%d/__%d_0.distcp" if S.name == T else ("%s/iter_%07d/mp_rank_%02d/model_optim_rng.pt" if S.name == MS else "%s/step_%d.pt")
    nodes = list(run.nodes) if jobwide else pick_culprit(run)
    if S.name == HV:
        nodes = [run.nodes[0]]
    for n in nodes:
        ranks = S.vis(n) if S.name in (T, MX) else (range(P["rpn"]) if S.name != HV else [0])
        if S.name == DT and jobwide:
            ranks = [0] if n.idx == 0 else []
        for l in ranks:
            g = S.g(n, l)
            if S.name == T:
                p = "%s/step-%d/__%d_0.distcp" % (P["ckpt_dir"], K, g)
            elif S.name == MS:
                p = "%s/iter_%07d/mp_rank_%02d/model_optim_rng.pt" % (P["ckpt_dir"], K, g % P["tp"])
            elif S.name == MX:
                p = "%s/%d.orbax-checkpoint-tmp-%d/items/params" % (P["ckpt_dir"], K, int(t) * 1000)
            elif S.name == DT:
                p = "/run/determined/checkpoints/%s/pytorch_model-%05d-of-%05d.safetensors" % (run.uuid("ck%d" % K), l + 1, P["rpn"])
            else:
                p = "%s/step_%d.pt" % (P["ckpt_dir"], K)
            S.exc(n, l, t + 0.01 * l, S.frames_ckpt(), ["OSError: [Errno %d] %s: '%s'" % (errno, msg, p)], cat_kind)
    if S.name == DT and jobwide:
        nodes = [run.nodes[0]]
    set_truth(run, nodes, "checkpointing", K, exact=K)
    if jobwide and S.name != HV and S.name != DT:
        jobwide_end(run, t)
    else:
        run.culprit_l = 0
        propagate(run, t, nodes, "crash", [(S.vis(nodes[0])[0], 1)], seq=seq_of(run, K) + 5)


def f_enospc(run, t):
    _os_err(run, t, 28, "No space left on device", True, "enospc")


def f_edquot(run, t):
    _os_err(run, t, 122, "Disk quota exceeded", True, "edquot")


def f_estale(run, t):
    _os_err(run, t, 116, "Stale file handle", False, "estale")


def f_eval_crash(run, t):
    S = run.S
    K = event_step(run, run.P["eval_every"])
    t = run.train_to(K, t, skip_last_events=True)
    t += run.P["eval_s"] * run.rng.uniform(0.3, 0.9)
    if S.name == MX:
        for n in run.nodes:
            S.exc(n, 0, t + 0.01 * n.idx, S.frames_train()[:3] + [("/deps/MaxText/train.py", 990, "train_loop", "eval_metrics = p_eval_step(state, eval_batch, nextrng)"),
                                                                 ("/deps/MaxText/train.py", 512, "eval_step", "loss, aux = loss_fn(model, config, data, dropout_rng, params, is_train=False)"),
                                                                 ("/deps/MaxText/train.py", 401, "loss_fn", 'data["targets_segmentation"] != 0')],
                  ["KeyError: 'targets_segmentation'"], "eval_keyerror")
        set_truth(run, list(run.nodes), "evaluation", K, exact=K)
        jobwide_end(run, t)
        return
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    ev = {MS: [("/home/work/MindSpeed-LLM/megatron/training/training.py", 1120, "evaluate", "loss_dicts = forward_backward_func("),
               ("/home/work/MindSpeed-LLM/pretrain_gpt.py", 88, "loss_func", "losses = output_tensor.float()")],
          HV: [("/workspace/train_hvd.py", 399, "main", "val_loss = evaluate(model, val_loader)"), ("/workspace/train_hvd.py", 160, "evaluate", "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))")],
          DT: [("/run/determined/workdir/train.py", 270, "main", "val = evaluate(model, val_loader)"), ("/run/determined/workdir/train.py", 198, "evaluate", "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))")],
          T: [("/workspace/torchtitan/torchtitan/components/validate.py", 112, "validate", "loss = self.loss_fn(predictions, labels)")]}[S.name]
    bs = run.P["lbs"] * run.P["seq"]
    culprit_exc(run, cn, l, t, S.frames_train()[:1] + ev, ["ValueError: Expected input batch_size (%d) to match target batch_size (%d)." % (bs, bs - run.P["seq"] // 2)], "eval_shape_error")
    set_truth(run, [cn], "evaluation", K, exact=K)
    propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, K) + 9)


def _train_all(run, t):
    P = run.P
    t = run.train_to(P["total"], t, skip_last_events=True)
    return t


def f_final_denied(run, t):
    S = run.S
    t = _train_all(run, t)
    K = run.P["total"]
    cn = run.nodes[0]
    run.culprit_l = 0
    S.ckpt_begin(cn, t, K)
    t += 5
    S.exc(cn, 0, t, S.frames_ckpt() + [(S.site + "/determined/common/storage/s3.py", 98, "upload", "self.client.upload_file(str(src_path), self.bucket, key)"),
                                       (S.site + "/boto3/s3/transfer.py", 378, "upload_file", "raise S3UploadFailedError(")],
          ["boto3.exceptions.S3UploadFailedError: Failed to upload /run/determined/checkpoints/%s/model.safetensors to det-ckpts/%s/model.safetensors: An error occurred (AccessDenied) when calling the PutObject operation: Access Denied" % (run.uuid("final"), run.uuid("final"))],
          "s3_access_denied")
    set_truth(run, [cn], "finalization", K, exact=K)
    propagate(run, t, [cn], "crash", [(0, 1)], seq=seq_of(run, K) + 3)


def f_final_quota(run, t):
    S = run.S
    t = _train_all(run, t)
    K = run.P["total"]
    nodes = list(run.nodes)
    for n in nodes:
        S.ckpt_begin(n, t, K)
    t += 3
    P = run.P
    for n in nodes:
        for l in (S.vis(n) if S.name in (T, MX) else range(P["rpn"])):
            p = ("%s/step-%d/__%d_0.distcp" % (P["ckpt_dir"], K, S.g(n, l)) if S.name == T else
                 "%s/iter_%07d/mp_rank_%02d/model_optim_rng.pt" % (P["ckpt_dir"], K, S.g(n, l) % P["tp"]) if S.name == MS else
                 "%s/%d.orbax-checkpoint-tmp-%d/items/opt_state" % (P["ckpt_dir"], K, int(t) * 1000))
            S.exc(n, l, t + 0.01 * l, S.frames_ckpt(), ["OSError: [Errno 122] Disk quota exceeded: '%s'" % p], "edquot_final")
    set_truth(run, nodes, "finalization", K, exact=K)
    jobwide_end(run, t)


def f_segv_exit(run, t):
    S = run.S
    t = _train_all(run, t)
    K = run.P["total"]
    for n in run.nodes:
        S.ckpt_begin(n, t, K)
        S.ckpt_end(n, t + run.P["ckpt_s"], K, run.P["ckpt_s"])
    t += run.P["ckpt_s"] + 1
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    tf = t + 3
    for n in run.nodes:
        if n is not cn and S.name != HV:
            S.finish(n, t)
    if S.name == HV:
        S.finish(run.nodes[0], t)
    X = (lambda m: S.X(cn, l, m)) if S.name != MS else (lambda m: m)
    if S.name == DT:
        run.cur_t = tf
    run.emit(cn, tf, X("Fatal Python error: Segmentation fault"), ("indicators", "segfault"))
    run.emit(cn, tf, X(""))
    run.emit(cn, tf, X("Thread 0x%016x (most recent call first):" % (0x7f0000000000 + cn.pid0 * 4096)))
    run.emit(cn, tf, X('  File "%s/torch/distributed/distributed_c10d.py", line 1904 in destroy_process_group' % (S.site if S.name != T else "/opt/venv/lib/python3.11/site-packages")))
    run.emit(cn, tf, X("  <no Python frame>"))
    set_truth(run, [cn], "finalization", K, exact=K)
    if S.name == HV:
        S.mpirun_box(tf + 1, S.g(cn, l), None, sig=(11, "Segmentation fault"))
        return
    S.teardown(cn, tf + 1, [(l, -11)])
    if S.name == T:
        S.job_end(tf + 3, [(cn, 1)])
    elif S.name == DT:
        S.job_end(tf + 3, [])


def f_power(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run, avoid_head=True)[0]
    run.culprit_l = 0
    cn.cut_at = (t, run.rng.uniform(0.2, 0.9) if run.rng.random() < 0.6 else 1.0)
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "power", None, seq=seq_of(run, F))


def f_hang(run, t):
    t, F = to_fault_step(run, t)
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    run.silent.add((cn.name, l))
    if run.S.name == MX:
        run.silent.add((cn.name, 0))
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "hang", None, seq=seq_of(run, F))


def f_straggler(run, t):
    P = run.P
    F = fault_step(run)
    slow_from = max(P["start"] + 1, F - run.rng.randint(3, 8) * P["k"])
    t = run.train_to(F - 1, t, slow=(slow_from, run.rng.uniform(1.5, 4.0)))
    t += P["dt"] * 4
    cn = pick_culprit(run)[0]
    l = pick_l(run, cn)
    run.silent.add((cn.name, l))
    if run.S.name == MX:
        run.silent.add((cn.name, 0))
    set_truth(run, [cn], "training", F)
    propagate(run, t, [cn], "hang", None, seq=seq_of(run, F))


def trim(run, key):
    """drop everything printed after the point where a pre-loop fault happens; return fault time."""
    ms = [n.marks[key] for n in run.nodes if key in n.marks]
    tmax = max(ms) if ms else run.P["t0"] + 3
    for n in run.nodes:
        tc = n.marks.get(key, tmax)
        n.lines = [x for x in n.lines if x[0] <= tc]
    return tmax + 0.5


def _init_fail(run, t, fin, kind, pre=(), frames=None):
    S = run.S
    t = trim(run, "init") + 40 + run.rng.uniform(0, 5)
    cn = pick_culprit(run, avoid_head=True)[0]
    l = pick_l(run, cn) if S.name != MX else 0
    run.culprit_l = l
    tf = t - 40
    ranks = S.vis(cn) if S.name in (T, MX) else range(run.P["rpn"])
    for ll in ranks:
        for (txt, k) in pre:
            run.emit(cn, tf, txt(cn, ll), ("indicators", k))
        S.exc(cn, ll, tf + 0.01 * ll, frames or S.frames_init(), fin, kind)
    set_truth(run, [cn], "initialization")
    if S.name == HV:
        S.mpirun_box(tf + 1, S.g(cn, l), 1)
        return
    if S.name in (T, MS, DT):
        S.teardown(cn, tf + 1, [(ll, 1) for ll in range(run.P["rpn"])])
    if S.name in (T, MX):
        S.job_end(tf + 2, [(cn, 1)])
    ends = []
    for n in run.nodes:
        if n is cn:
            continue
        te = S.init_wait_fail(n, tf, [cn])
        ends.append((n, te))
        if S.name in (T, MS, DT):
            S.teardown(n, te, [(ll, 1) for ll in range(run.P["rpn"])])
    tend = max(te for _, te in ends) + 2
    if S.name == T:
        S.job_end(tend, [(n, 1) for n, _ in ends])
    elif S.name == MX:
        S.job_end(tend, [(run.nodes[0], 1)])
        for n, _ in ends[1:]:
            S.sched_cancel(n, tend + 1, "")
    elif S.name == DT:
        S.job_end(tend, [])


def f_driver_old(run, t):
    S = run.S
    fr = S.frames_init()[:1] + [((S.site if S.name != T else "/opt/venv/lib/python3.11/site-packages") + "/torch/cuda/__init__.py", 314, "_lazy_init", "torch._C._cuda_init()")]
    _init_fail(run, t, ["RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver."],
               "nvidia_driver_too_old", frames=fr)


def f_cuda_init(run, t):
    S = run.S
    fr = S.frames_init()[:1] + [((S.site if S.name != T else "/opt/venv/lib/python3.11/site-packages") + "/torch/cuda/__init__.py", 319, "_lazy_init", "torch._C._cuda_init()")]
    _init_fail(run, t, ["RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero."],
               "cuda_init_failed", frames=fr)


def f_store_connect(run, t):
    S = run.S
    m = run.nodes[0].name
    _init_fail(run, t, ["torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (%s, 29500)." % m], "store_connect_timeout",
               frames=S.frames_init() + [((S.site if S.name != T else "/opt/venv/lib/python3.11/site-packages") + "/torch/distributed/rendezvous.py", 189, "_create_c10d_store", "return TCPStore(")])


def f_npu_setdevice(run, t):
    S = run.S
    _init_fail(run, t, ["RuntimeError: Initialize:torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp:218 NPU function error: c10_npu::SetDevice(device_id_), error code is 507033",
                        "[ERROR] %s (PID:%d, Device:%d, RankID:-1) ERR00100 PTA call acl api failed" % (dt_of(t - 50).strftime("%Y-%m-%d-%H:%M:%S"), 1, 0),
                        "[Error]: The device fails to be opened. ",
                        "        Rectify the fault based on the error information in the ascend log."],
               "npu_set_device_failed", frames=S.frames_init()[:1] + [(S.site + "/torch_npu/npu/utils.py", 58, "set_device", "torch_npu._C._npu_setDevice(device_id)")],
               pre=[(lambda n, ll: "EL0003: [PID: %d] %s The argument is invalid." % (S.pid(n, ll), __import__("styles").cann_ts(t - 50 + n.skew)), "cann_EL0003")])


def f_jax_missing_task(run, t):
    S = run.S
    cn = pick_culprit(run, avoid_head=True)[0]
    run.culprit_l = 0
    for ln in list(cn.lines):
        pass
    cn.lines = []  # the task never started python
    tf = run.P["t0"] + 1
    run.emit(cn, tf, "slurmstepd: error: couldn't chdir to `/lustre/fsw/maxtext': No such file or directory: going to /tmp instead", ("indicators", "chdir_failed"))
    run.emit(cn, tf + 0.2, "/usr/bin/python3: can't open file '/tmp/MaxText/train.py': [Errno 2] No such file or directory", ("indicators", "script_not_found"))
    S.job_end(tf + 1, [(cn, 2)])
    set_truth(run, [cn], "initialization")
    t0 = run.t_train
    for n in run.nodes:
        if n is cn:
            continue
        # peers never get past jax.distributed.initialize
        n.lines = [x for x in n.lines if x[0] <= run.P["t0"] + 6]
    te = S.init_wait_fail(run.nodes[0], run.P["t0"] + 6, [cn])
    S.job_end(te + 1, [(run.nodes[0], 1)])
    for n in run.nodes[1:]:
        if n is not cn:
            S.sched_cancel(n, te + 2, "")


def f_jax_version(run, t):
    S = run.S
    j = run.P["jax"]
    maj = j.rsplit(".", 1)
    newer = "%s.%d" % (maj[0], int(maj[1]) + 1)
    for n in run.nodes:
        n.lines = [x for x in n.lines if x[0] <= run.P["t0"] + 0.5]
        S.exc(n, 0, run.P["t0"] + 2, [("/deps/MaxText/train.py", 31, "<module>", "import jax"), (S.site + "/jax/__init__.py", 39, "<module>", "from jax import version as _version"),
                                      (S.site + "/jax/_src/lib/__init__.py", 87, "<module>", "version = check_jaxlib_version(")],
              ["RuntimeError: jaxlib version %s is newer than and incompatible with jax version %s. Please update your jax and/or jaxlib packages." % (newer, j)], "jaxlib_version_mismatch")
    set_truth(run, list(run.nodes), "initialization")
    S.job_end(run.P["t0"] + 3, [(n, 1) for n in run.nodes])


def f_sched(reason, kind):
    def fn(run, t):
        t, F = to_fault_step(run, t)
        S = run.S
        for n in run.nodes:
            S.sched_cancel(n, t + n.idx * 0.001, reason, ("indicators", kind))
        for n in run.nodes:
            if S.name == T:
                for l in S.vis(n):
                    run.emit(n, t + 0.2, S.A(n, t + 0.2, "W", "torch/distributed/elastic/agent/server/api.py:704", "Received Signals.SIGTERM death signal, shutting down workers"))
                    break
                run.emit(n, t + 0.3, S.A(n, t + 0.3, "W", "torch/distributed/elastic/multiprocessing/api.py:897", "Sending process %d closing signal SIGTERM" % S.pid(n, 0)))
                run.emit(n, t + 1, "torch.distributed.elastic.multiprocessing.api.SignalException: Process %d got signal: 15" % n.pid0, ("symptoms", "torchrun_signal_exception"))
        S.job_end(t + 1.5, [(n, "term") for n in run.nodes], cancel=True)
        set_truth(run, list(run.nodes), "training", F)
    return fn


def f_inductor(run, t):
    S = run.S
    F = run.P["start"] + 1
    t += 40
    for n in run.nodes:
        for l in S.vis(n):
            S.exc(n, l, t + 0.01 * l, S.frames_train() + [("/opt/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", 574, "_fn", "return fn(*args, **kwargs)"),
                                                         ("/opt/venv/lib/python3.11/site-packages/torch/_dynamo/output_graph.py", 1465, "call_user_compiler", "raise BackendCompilerFailed(self.compiler_fn, e) from e")],
                  ["torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
                   "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"], "inductor_compile_failed")
    set_truth(run, list(run.nodes), "training", F)
    jobwide_end(run, t)


def f_nan(run, t):
    S = run.S
    t, F = to_fault_step(run, t)
    if S.name == MS:
        cn = pick_culprit(run)[0]
        l = pick_l(run, cn)
        culprit_exc(run, cn, l, t, S.frames_train() + [("/home/work/MindSpeed-LLM/megatron/core/distributed/param_and_grad_buffer.py", 226, "start_grad_sync", "assert not norm.isnan(), (")],
                    ["AssertionError: Rank %d: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: %d, node: %s" % (S.g(cn, l), l, cn.name)],
                    "nan_grad_norm")
        set_truth(run, [cn], "training", F)
        propagate(run, t, [cn], "crash", [(l, 1)], seq=seq_of(run, F))
        return
    # user code raises on non-finite loss on every rank (loss is all-reduced)
    for n in S.loggers():
        S.step_line(n, t - 0.1, _it(run, F) if _it(run, F) == F else F, float("nan"), run.P["dt"])
    for n in run.nodes:
        for l in range(run.P["rpn"]):
            S.exc(n, l, t + 0.01 * l, S.frames_train()[:2] + [("/workspace/train_hvd.py" if S.name == HV else "/run/determined/workdir/train.py", 252, "check_finite", 'raise FloatingPointError(f"Loss is {loss.item()} at step {step}, stopping training")')],
                  ["FloatingPointError: Loss is nan at step %d, stopping training" % F], "nan_loss")
    set_truth(run, list(run.nodes), "training", F)
    jobwide_end(run, t)


def healthy(run, t):
    S = run.S
    P = run.P
    is_silent_factory(run)
    t = run.train_to(P["total"], t, skip_last_events=True)
    run.ckpt(t, P["total"])
    t += P["ckpt_s"] + 1
    for n in run.nodes:
        S.finish(n, t)


def inject(fault, run, t):
    is_silent_factory(run)
    fault["fn"](run, t)


SRC = {
    "nccl": "https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
    "elastic": "https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/multiprocessing/errors/__init__.py",
    "titan": "https://github.com/pytorch/torchtitan/blob/main/torchtitan/train.py",
    "xid": "https://docs.nvidia.com/deploy/xid-errors/index.html",
    "jaxhb": "https://github.com/jax-ml/jax/issues/23599",
    "jaxbar": "https://github.com/AI-Hypercomputer/gpu-recipes/issues/2",
    "ei0002": "https://www.hiascend.com/document/detail/zh/canncommercial/80RC3/developmentguide/maintenref/troubleshooting/atlaserrorcode_15_0242.html",
    "hvd": "https://github.com/horovod/horovod/issues/410",
    "det": "https://github.com/determined-ai/determined/issues/8915",
    "maxtext": "https://github.com/AI-Hypercomputer/maxtext/pull/2232",
    "slurm": "https://slurm.schedmd.com/srun.html",
    "cannerr": "https://github.com/mindspore-ai/docs/blob/master/tutorials/source_en/debug/error_analysis/cann_error_cases.md",
    "ompi": "https://github.com/open-mpi/ompi/blob/v4.1.x/orte/mca/errmgr/default_hnp/help-errmgr-default-hnp.txt",
    "megatron": "https://github.com/NVIDIA/Megatron-LLM/blob/main/megatron/arguments.py",
}

CATALOGUE = [
    dict(id="gpu_xid79_fell_off_bus", cat="hardware", stage="training", styles=[T, HV, DT, MX], fn=f_xid79,
         root="GPU fell off the PCIe bus (Xid 79) on one node; its rank dies with a CUDA launch failure, peers time out in the next collective",
         src=[SRC["xid"], SRC["nccl"]]),
    dict(id="gpu_ecc_dbe", cat="hardware", stage="training", styles=[T, HV, DT, MX], fn=f_ecc,
         root="uncorrectable double-bit ECC error in GPU HBM (Xid 48) kills one rank",
         src=[SRC["xid"], "https://github.com/pytorch/pytorch/issues/93844"]),
    dict(id="ib_port_error", cat="hardware", stage="training", styles=[T, HV, DT], fn=f_ib_port,
         root="InfiniBand port/cable failure on one node (mlx5 link down); NCCL on that node reports a port error and a system error",
         src=["https://github.com/NVIDIA/nccl/issues/1013", SRC["nccl"]]),
    dict(id="npu_aicore_exception", cat="framework", stage="training", styles=[MS], fn=f_aicore,
         root="CANN fused-attention backward kernel hits an AI vector core exception (EZ9999) on one NPU; peers fail HCCL with EI0002 naming that remote rank",
         src=[SRC["cannerr"], SRC["ei0002"]]),
    dict(id="npu_hbm_oom", cat="user", stage="training", styles=[MS], fn=f_npu_oom,
         root="NPU out of memory on one rank (micro-batch/sequence too large for 64 GB HBM)",
         src=["https://github.com/Ascend/pytorch", SRC["ei0002"]]),
    dict(id="cuda_oom_rank", cat="user", stage="training", styles=[T, HV, DT], fn=f_cuda_oom,
         root="CUDA out of memory on one rank (long-sequence batch exceeds activation budget)",
         src=["https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDACachingAllocator.cpp", SRC["nccl"]]),
    dict(id="xla_oom", cat="user", stage="training", styles=[MX], fn=f_xla_oom,
         root="per_device_batch_size too large: every host's XLA program OOMs on the first step",
         src=["https://github.com/jax-ml/jax/discussions/19014", SRC["maxtext"]]),
    dict(id="host_oom_killed", cat="user", stage="training", styles=[T, MX], fn=f_host_oom,
         root="host RAM exhausted on one node (too many dataloader workers / pinned buffers); the kernel OOM killer SIGKILLs a rank",
         src=["https://slurm.schedmd.com/cgroup.conf.html", SRC["elastic"]]),
    dict(id="dataloader_shm_bus_error", cat="platform", stage="data_loading", styles=[T, HV, DT], fn=f_shm_bus,
         root="container /dev/shm too small on a node: DataLoader worker dies with SIGBUS",
         src=["https://github.com/pytorch/pytorch/blob/main/torch/utils/data/_utils/signal_handling.py", "https://github.com/pytorch/pytorch/issues/5040"]),
    dict(id="dataset_file_missing", cat="user", stage="data_loading", styles=[T, MS, MX], fn=f_missing_shard,
         root="dataset path/prefix wrong: every rank fails to open a data file while building the dataset",
         src=["https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/datasets/indexed_dataset.py", "https://github.com/huggingface/datasets/blob/main/src/datasets/data_files.py"]),
    dict(id="corrupt_data_shard", cat="user", stage="data_loading", styles=[T, HV, DT, MX], fn=f_corrupt_shard,
         root="one data shard is truncated/corrupt; the rank that reads it fails mid-run",
         src=["https://github.com/apache/arrow/blob/main/cpp/src/parquet/file_reader.cc", "https://github.com/tensorflow/tensorflow/issues/13463"]),
    dict(id="parallelism_config_invalid", cat="user", stage="initialization", styles=[T, MS, MX], fn=f_parallel_cfg,
         root="parallelism degrees in the config do not divide the world size; every rank asserts at start-up",
         src=["https://github.com/pytorch/torchtitan/blob/main/torchtitan/distributed/parallel_dims.py", SRC["megatron"]]),
    dict(id="unknown_model_architecture", cat="user", stage="model_loading", styles=[HV, DT], fn=f_unknown_arch,
         root="image's transformers is too old for the checkpoint's model_type; every rank fails in from_pretrained",
         src=["https://github.com/huggingface/transformers/blob/main/src/transformers/models/auto/configuration_auto.py"]),
    dict(id="resume_checkpoint_corrupt", cat="user", stage="model_loading", styles=[MS, DT, MX], fn=f_ckpt_corrupt, needs_resume=True,
         root="resume points at a checkpoint left incomplete by an earlier run; every rank fails to read it",
         src=["https://github.com/pytorch/pytorch/issues/31620", "https://github.com/google/orbax/issues/1012"]),
    dict(id="ckpt_enospc", cat="platform", stage="checkpointing", styles=[T, MS, MX, HV], fn=f_enospc,
         root="shared checkpoint filesystem full (ENOSPC) during a periodic save",
         src=["https://man7.org/linux/man-pages/man3/errno.3.html", SRC["titan"]]),
    dict(id="ckpt_edquot", cat="user", stage="checkpointing", styles=[T, MS, DT], fn=f_edquot,
         root="user/project quota exceeded (EDQUOT) during a periodic save",
         src=["https://man7.org/linux/man-pages/man3/errno.3.html"]),
    dict(id="ckpt_estale_nfs", cat="platform", stage="checkpointing", styles=[T, MS, MX, DT], fn=f_estale,
         root="NFS client on one node holds a stale handle to the checkpoint directory (ESTALE)",
         src=["https://man7.org/linux/man-pages/man3/errno.3.html", "https://access.redhat.com/solutions/2674"]),
    dict(id="eval_batch_mismatch", cat="user", stage="evaluation", styles=[MS, HV, DT, T, MX], fn=f_eval_crash,
         root="evaluation code/data bug (last partial eval batch mismatched, or eval data lacks packed fields) crashes during evaluation",
         src=["https://github.com/pytorch/pytorch/blob/main/torch/nn/functional.py", SRC["maxtext"]]),
    dict(id="final_upload_access_denied", cat="user", stage="finalization", styles=[DT], fn=f_final_denied,
         root="final checkpoint upload to S3 denied (bucket policy/credentials) after training finished",
         src=["https://github.com/boto/boto3/blob/develop/boto3/s3/transfer.py", SRC["det"]]),
    dict(id="final_save_quota", cat="user", stage="finalization", styles=[T, MS, MX], fn=f_final_quota,
         root="final save after the last step exceeds the filesystem quota on every writer",
         src=["https://man7.org/linux/man-pages/man3/errno.3.html"]),
    dict(id="segfault_at_exit", cat="framework", stage="finalization", styles=[T, MS, DT, HV], fn=f_segv_exit,
         root="process segfaults in destroy_process_group/atexit teardown after training completed",
         src=["https://github.com/pytorch/pytorch/issues/115388", SRC["elastic"]]),
    dict(id="node_power_loss", cat="hardware", stage="training", styles=[T, MS, HV, MX, DT], fn=f_power,
         root="node lost power/crashed: its log stops (possibly mid-line); peers see the loss only as timeouts/connection errors",
         src=["https://slurm.schedmd.com/slurm.conf.html", SRC["ompi"], SRC["jaxhb"]]),
    dict(id="silent_device_hang", cat="hardware", stage="training", styles=[T, MS, HV, DT, MX], fn=f_hang,
         root="one accelerator wedges silently; the rest time out in the collective (JAX: hangs until the time limit)",
         src=[SRC["nccl"], SRC["ei0002"], "https://github.com/openxla/xla/pull/44429"]),
    dict(id="straggler_then_stall", cat="hardware", stage="training", styles=[T, MS, HV, DT, MX], fn=f_straggler,
         root="degrading node (thermal/PCIe throttling) slows every step, then stalls; collectives time out",
         src=[SRC["nccl"], "https://github.com/pytorch/pytorch/issues/108211"]),
    dict(id="gpu_driver_too_old", cat="platform", stage="initialization", styles=[T, HV, DT], fn=f_driver_old,
         root="one node runs an older NVIDIA driver than the image's CUDA needs; its ranks fail CUDA init and the rest wait on the store",
         src=["https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDAFunctions.cpp"]),
    dict(id="cuda_init_unknown_error", cat="hardware", stage="initialization", styles=[T, HV, DT], fn=f_cuda_init,
         root="GPU on one node in a bad state after a previous fault: CUDA init fails with 'CUDA unknown error'",
         src=["https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDAFunctions.cpp", "https://github.com/pytorch/pytorch/issues/49081"]),
    dict(id="store_connect_blocked", cat="platform", stage="initialization", styles=[T, DT], fn=f_store_connect,
         root="firewall/security group on one node blocks the rendezvous TCPStore port; that node times out connecting, others wait for it",
         src=["https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/TCPStore.cpp", SRC["elastic"]]),
    dict(id="npu_set_device_failed", cat="hardware", stage="initialization", styles=[MS], fn=f_npu_setdevice,
         root="NPU on one node cannot be opened (SetDevice error 507033); peers fail HCCL connect with EI0006",
         src=[SRC["cannerr"], "https://www.hiascend.com/document/detail/zh/canncommercial/80RC3/developmentguide/maintenref/troubleshooting/atlaserrorcode_15_0246.html"]),
    dict(id="jax_task_never_started", cat="platform", stage="initialization", styles=[MX], fn=f_jax_missing_task,
         root="shared filesystem not mounted on one node: its task cannot open train.py; the coordinator's start-up barrier times out naming that task",
         src=[SRC["jaxbar"], "https://github.com/marin-community/levanter/issues/432"]),
    dict(id="jaxlib_version_mismatch", cat="platform", stage="initialization", styles=[MX], fn=f_jax_version,
         root="container ships a jaxlib newer than jax; import fails on every host",
         src=["https://github.com/jax-ml/jax/blob/main/jax/_src/lib/__init__.py"]),
    dict(id="slurm_time_limit", cat="user", stage="training", styles=[T, MX], fn=f_sched("TIME LIMIT", "slurm_time_limit"),
         root="job requested too little wall time; Slurm cancels the step mid-training",
         src=[SRC["slurm"], "https://slurm.schedmd.com/sbatch.html"]),
    dict(id="slurm_preempted", cat="platform", stage="training", styles=[T, MX], fn=f_sched("PREEMPTION", "slurm_preemption"),
         root="higher-priority job preempted the allocation; Slurm cancels the step",
         src=[SRC["slurm"], "https://slurm.schedmd.com/preempt.html"]),
    dict(id="inductor_compile_failure", cat="framework", stage="training", styles=[T], fn=f_inductor,
         root="torch.compile (inductor/Triton) produces an invalid kernel image on the first compiled step on every rank",
         src=["https://github.com/pytorch/pytorch/blob/main/torch/_dynamo/exc.py", "https://github.com/triton-lang/triton/issues/1955"]),
    dict(id="loss_nan", cat="user", stage="training", styles=[MS, HV, DT], fn=f_nan,
         root="training diverges (lr too high / bad batch): NaN gradient norm or NaN loss aborts the run",
         src=["https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/distributed/param_and_grad_buffer.py"]),
]
BY_ID = {f["id"]: f for f in CATALOGUE}
