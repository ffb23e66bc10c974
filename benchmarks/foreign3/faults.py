"""Fault catalogue.  Every fault is a function fire(F, t, step) that writes the
culprit's lines, the peers' propagated errors and the launcher teardown, and
returns the culprit node indices."""
from __future__ import annotations

from engine import hexaddr, ind, py_traceback, sym
from styles import c10, elastic_log, nccl_info, tver

PT = "https://github.com/pytorch/pytorch/blob/main/"
NCCL = "https://github.com/NVIDIA/nccl/blob/master/"


class F:
    """Fault context handed to fire()."""

    def __init__(self, job, spec):
        self.job, self.spec = job, spec
        self.style = job.style
        self.cfg = job.cfg
        self.rng = job.rng
        self.site = job.cfg["site"]
        self.failed_codes = {}  # node idx -> list[(lr, code)]
        self.exit_times = []     # when processes exited (mpirun aborts the job at the first one)

    # ------------------------------------------------------------ helpers
    def pick_node(self, allow0=True):
        n = len(self.job.nodes)
        return self.rng.randrange(0 if allow0 else 1, n) if n > 1 else 0

    def exc(self, node, lr, t, frames, final, kind, pre=(), role="indicator"):
        tagf = ind if role == "indicator" else sym
        job = self.job
        tt = t
        for text, k in pre:
            job.proc(node, lr, tt, text, tagf(k, node.name))
            tt += 0.0002
        for text, k in py_traceback(frames, final):
            kk = kind if k == "key" else ("traceback:context" if text.startswith(("Traceback", "  File", "    ")) else kind + ":context")
            job.proc(node, lr, tt, text, tagf(kk, node.name))
            tt += 0.0002
        self.cfg["last_error"] = (final if isinstance(final, str) else final[0])[:200]
        self.exit_times.append(tt)
        return tt

    def user_frames(self, where="train"):
        s = self.cfg["script_path"]
        if where == "train":
            return [(s, 412, "<module>", "main()"), (s, 388, "main", "train(cfg, model, loader)"),
                    (s, 301, "train", "loss = train_step(model, batch)")]
        return [(s, 412, "<module>", "main()"), (s, 360, "main", f"{where}")]

    def hf_frames(self, fn="training_step"):
        s = self.site
        sp = self.cfg["script_path"]
        if self.cfg.get("flavour") == "swift":
            entry = [(sp, 5, "<module>", "sft_main()"), (f"{s}/swift/llm/train/sft.py", 281, "sft_main", "return SwiftSft(args).main()"),
                     (f"{s}/swift/llm/base.py", 47, "main", "result = self.run()")]
            train = entry + [(f"{s}/swift/llm/train/sft.py", 134, "run", "return self.train(trainer)"),
                             (f"{s}/swift/llm/train/sft.py", 195, "train", "trainer.train(trainer.args.resume_from_checkpoint)"),
                             (f"{s}/swift/trainers/mixin.py", 328, "train", "res = super().train(*args, **kwargs)")]
        else:
            entry = [(sp, 28, "<module>", "main()"), (sp, 19, "main", "run_exp()"),
                     (f"{s}/llamafactory/train/tuner.py", 93, "run_exp", '_training_function(config={"args": args, "callbacks": callbacks})'),
                     (f"{s}/llamafactory/train/tuner.py", 67, "_training_function", "run_sft(model_args, data_args, training_args, finetuning_args, generating_args, callbacks)")]
            train = entry + [(f"{s}/llamafactory/train/sft/workflow.py", 96, "run_sft", "train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)")]
        train = train + [(f"{s}/transformers/trainer.py", 2052, "train", "return inner_training_loop(")]
        if fn == "training_step":
            return train + [(f"{s}/transformers/trainer.py", 2388, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs)"),
                            (f"{s}/transformers/trainer.py", 3518, "training_step", "self.accelerator.backward(loss, **kwargs)")]
        if fn == "loop":
            return train + [(f"{s}/transformers/trainer.py", 2341, "_inner_training_loop", "for step, inputs in enumerate(epoch_iterator):"),
                            (f"{s}/accelerate/data_loader.py", 550, "__iter__", "current_batch = next(dataloader_iter)")]
        if fn == "train":
            return train
        return entry

    def is_hf(self):
        return self.style.name in ("accelerate", "sagemaker-mpi")

    def dist_frames(self):
        s = self.site
        return [(f"{s}/torch/distributed/c10d_logger.py", 79, "wrapper", "return func(*args, **kwargs)"),
                (f"{s}/torch/distributed/distributed_c10d.py", 2288, "all_reduce", "work = group.allreduce([tensor], opts)")]

    # ------------------------------------------------------------ propagation
    def peers_timeout(self, culprits, t, op="ALLREDUCE", seq=None, exclude_self=True, numel=None):
        job = self.job
        to = self.cfg["nccl_timeout_s"]
        seq = seq or self.cfg["seq_base"]
        numel = numel or self.rng.choice([1, 25427968, 466119168, 131072000])
        tend = t
        for node in job.nodes:
            if node.idx in culprits or node.idx in job.dead:
                continue
            tt = t + to + self.rng.random() * 2.5
            codes = []
            for lr in range(node.rpn):
                ms = int(to * 1000 + 3 + self.rng.random() * 40)
                def S(text, k, _lr=lr, _tt=tt, _node=node):
                    return job.proc(_node, _lr, _tt, text, sym(k))
                work = f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={to*1000})"
                g = node.grank(lr)
                if tver(job) >= (2, 3):
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:632", f"[Rank {g}] Watchdog caught collective operation timeout: {work} ran for {ms} milliseconds before timing out."), "nccl_watchdog_timeout")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:2271", f"[PG 0 (default_pg) Rank {g}] failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq-1}"), "nccl_watchdog_timeout:context")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:670", "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value."), "nccl_watchdog_timeout:context")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:684", f"[Rank {g}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."), "nccl_watchdog_timeout:context")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:690", f"[Rank {g}] To avoid data inconsistency, we are taking the entire process down."), "nccl_watchdog_timeout:context")
                    S("terminate called after throwing an instance of 'c10::DistBackendError'", "abort")
                    S(f"  what():  [PG 0 (default_pg) Rank {g}] Process group watchdog thread terminated with exception: [Rank {g}] Watchdog caught collective operation timeout: {work} ran for {ms} milliseconds before timing out.", "nccl_watchdog_timeout")
                    S("Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):", "nccl_watchdog_timeout:context")
                    S(f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 ({hexaddr(self.rng)} in {self.site}/torch/lib/libc10.so)", "nccl_watchdog_timeout:context")
                else:
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:475", f"[Rank {g}] Watchdog caught collective operation timeout: {work} ran for {ms} milliseconds before timing out."), "nccl_watchdog_timeout")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:489", "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."), "nccl_watchdog_timeout:context")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:495", "To avoid data inconsistency, we are taking the entire process down."), "nccl_watchdog_timeout:context")
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:916", f"[Rank {g}] NCCL watchdog thread terminated with exception: [Rank {g}] Watchdog caught collective operation timeout: {work} ran for {ms} milliseconds before timing out."), "nccl_watchdog_timeout")
                codes.append((lr, -6))
                tt += 0.003
            self.failed_codes[node.idx] = codes
            self.exit_times.append(tt)
            tend = max(tend, tt)
        return tend

    def peers_reset(self, culprits, t, culprit_ip, label="Connection reset by peer", ib=None):
        job = self.job
        ib = self.cfg["ib"] if ib is None else ib
        tend = t
        for node in job.nodes:
            if node.idx in culprits or node.idx in job.dead:
                continue
            tt = t + 0.3 + self.rng.random() * 2.0
            codes = []
            port = self.rng.randrange(32768, 60999)
            for lr in range(node.rpn):
                g = node.grank(lr)
                def S(text, k, _lr=lr, _tt=tt, _node=node):
                    return job.proc(_node, _lr, _tt, text, sym(k))
                if ib:
                    last = f"NET/IB : Got completion from peer {culprit_ip}<{port}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{node.ip} remoteGidsfe80::{self.rng.randrange(4096,65535):x}:{self.rng.randrange(4096,65535):x}"
                else:
                    last = f"socketProgressOpt: Call to recv from {culprit_ip}<{port}> failed : {label}"
                S(nccl_info(job, node, lr, last, lvl="WARN"), "nccl_remote_error")
                S(nccl_info(job, node, lr, f"{'transport/net.cc:1129' if ib else 'proxy.cc:1520'} -> 6", lvl="INFO"), "nccl_remote_error:context")
                if tver(job) >= (2, 3):
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:1592", f"[PG 0 (default_pg) Rank {g}] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version {self.cfg['nccl'].split('+')[0]}"), "nccl_remote_error")
                else:
                    S(c10(job, node, lr, tt, "E", "ProcessGroupNCCL.cpp:916", f"[Rank {g}] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version {self.cfg['nccl'].split('+')[0]}"), "nccl_remote_error")
                S("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.", "nccl_remote_error:context")
                S("Last error:", "nccl_remote_error:context")
                S(last, "nccl_remote_error")
                S("terminate called after throwing an instance of 'c10::DistBackendError'", "abort")
                codes.append((lr, -6))
                tt += 0.002
            self.failed_codes[node.idx] = codes
            self.exit_times.append(tt)
            tend = max(tend, tt)
        return tend

    def propagate(self, culprits, t, mode=None, op="ALLREDUCE"):
        mode = mode or self.rng.choice(["reset", "timeout"])
        c = self.job.nodes[culprits[0]]
        if mode == "reset":
            return self.peers_reset(culprits, t, c.ip)
        return self.peers_timeout(culprits, t, op=op)

    def teardown_all(self, t, first_fail=None, sky_code=1):
        """Every node with recorded failures runs its launcher teardown; nodes without
        failures get SIGTERM'd (all ranks exit -15)."""
        job = self.job
        tend = t
        codes_for_sky = []
        for node in job.nodes:
            if node.idx in job.dead:
                codes_for_sky.append(137)
                continue
            fl = self.failed_codes.get(node.idx)
            if fl:
                te = self.style.teardown(job, node, t + 0.5 + self.rng.random(), fl)
                codes_for_sky.append(1 if fl[0][1] > 0 else 128 - fl[0][1] if fl[0][1] != -6 else 134)
            else:
                codes_for_sky.append(137)
                te = t
            tend = max(tend, te)
        st = self.style
        if st.name == "sagemaker-mpi":
            # orte_abort_on_non_zero_status=1: mpirun kills every rank at the first non-zero exit
            t_abort = min(self.exit_times) + 1.0 if self.exit_times else tend
            for idx in job.chunks:
                job.chunks[idx] = [c for c in job.chunks[idx] if c.t <= t_abort and not (c.tag and c.tag[1] == "orted_exit")]
            for node in job.nodes[1:]:
                if node.idx not in job.dead:
                    job.line(node.idx, t_abort + 1, st.tk(job, node, t_abort + 1, "INFO", "Orted process exited"), sym("orted_exit"))
            tend = t_abort
            nd = first_fail or job.nodes[0]
            code = (self.failed_codes.get(nd.idx) or [(0, 1)])[0]
            st.job_failed_epilogue(job, tend + 0.5, (nd, code[0], code[1]))
        elif st.name == "skypilot-ray":
            st.job_failed_epilogue(job, tend + 1, (codes_for_sky, sky_code))
        elif st.name == "kubeflow-pytorchjob":
            nd = first_fail or job.nodes[0]
            kind = "Master" if nd.idx == 0 else "Worker"
            msg = self.cfg.get("kf_fail_msg") or f"PyTorchJob {self.cfg['jobname']} is failed because 1 {kind} replica(s) failed."
            st.job_failed_epilogue(job, tend + 2, (nd, msg))
        return tend

    def dmesg(self, node, t, lines):
        """Job epilogue script dumps kernel messages on the failing node."""
        st = self.style
        st.agent(self.job, node, t, "+ dmesg -T | grep -iE 'xid|nvrm|amdgpu|mlx5|oom' | tail -n 20")
        for i, (text, k) in enumerate(lines):
            d = self.job.wall(node, t - 5 + i * 0.01)
            st.agent(self.job, node, t + 0.001 * (i + 1), f"[{d:%a %b} {d.day:2d} {d:%H:%M:%S %Y}] {text}", ind(k, node.name) if k else None)


# =========================================================================== faults
def gpu_ecc(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    msg = "uncorrectable ECC error encountered"
    pre = [(nccl_info(job, node, lr, f"NCCL WARN Cuda failure '{msg}'", lvl="WARN"), "nccl_cuda_failure")]
    final = [f"RuntimeError: CUDA error: {msg}",
             "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]
    fr = F.hf_frames() if F.is_hf() else F.user_frames()
    tt = F.exc(node, lr, t, fr, final, "cuda_ecc", pre)
    if F.style.name in ("torchrun-tee", "skypilot-ray"):
        F.dmesg(node, tt + 3, [(f"NVRM: Xid (PCI:0000:{['1b','3b','5d','7e','9a','bc','cd','e1'][lr%8]}:00): 48, pid={node.pids[lr]}, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.", "xid"),
                                (f"NVRM: Xid (PCI:0000:{['1b','3b','5d','7e','9a','bc','cd','e1'][lr%8]}:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.", "xid")])
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + F.cfg["nccl_timeout_s"] * 0 + 2, node)
    return [ci]


def gpu_ecc_init(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    s = F.site
    fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 22, "main", "torch.cuda.set_device(local_rank)"),
          (f"{s}/torch/cuda/__init__.py", 399, "set_device", "torch._C._cuda_setDevice(device)")]
    final = ["RuntimeError: CUDA error: uncorrectable ECC error encountered",
             "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]
    tt = F.exc(node, lr, t, fr, final, "cuda_ecc")
    F.failed_codes[ci] = [(lr, 1)]
    _store_wait(F, [ci], tt)
    F.teardown_all(tt + 2, node)
    return [ci]


def _store_wait(F, culprits, t):
    """Peers stuck in init_process_group / rendezvous: TCPStore wait timeout."""
    job = F.job
    to = F.cfg["store_timeout_s"]
    joined = job.world - sum(job.nodes[c].rpn for c in culprits)
    s = F.site
    for node in job.nodes:
        if node.idx in culprits:
            continue
        codes = []
        for lr in range(node.rpn):
            tt = t + to + F.rng.random() * 3
            fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 25, "main", 'dist.init_process_group(backend="nccl")'),
                  (f"{s}/torch/distributed/distributed_c10d.py", 1520, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
                  (f"{s}/torch/distributed/rendezvous.py", 269, "_env_rendezvous_handler", "store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)"),
                  (f"{s}/torch/distributed/rendezvous.py", 189, "_create_c10d_store", "return TCPStore(")]
            if node.idx == 0:
                final = f"torch.distributed.DistStoreError: Timed out after {to + 1} seconds waiting for clients. {joined}/{job.world} clients joined."
            else:
                final = f"torch.distributed.DistStoreError: Timed out after {to + 1} seconds waiting for clients. {joined}/{job.world} clients joined."
            if lr == 0 or node.idx == 0:
                for text, k in py_traceback(fr, final):
                    job.proc(node, lr, tt, text, sym("store_timeout" if k == "key" else "traceback:context"))
                    tt += 0.0002
                codes.append((lr, 1))
        F.failed_codes[node.idx] = codes


def xid79(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    bus = ['1b', '3b', '5d', '7e', '9a', 'bc', 'cd', 'e1'][lr % 8]
    pre = [(nccl_info(job, node, lr, "NCCL WARN Cuda failure 'unspecified launch failure'", lvl="WARN"), "nccl_cuda_failure")]
    final = ["RuntimeError: CUDA error: unspecified launch failure",
             "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"]
    tt = F.exc(node, lr, t, F.hf_frames() if F.is_hf() else F.user_frames(), final, "cuda_launch_failure", pre)
    F.dmesg(node, tt + 2, [(f"NVRM: GPU at PCI:0000:{bus}:00: GPU-{F.rng.randrange(16**8):08x}-{F.rng.randrange(16**4):04x}-{F.rng.randrange(16**4):04x}", None),
                           (f"NVRM: GPU Board Serial Number: 1{F.rng.randrange(10**12):012d}", None),
                           (f"NVRM: Xid (PCI:0000:{bus}:00): 79, pid={node.pids[lr]}, name=python3, GPU has fallen off the bus.", "xid79"),
                           (f"NVRM: GPU 0000:{bus}:00.0: GPU has fallen off the bus.", "xid79")])
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + 5, node)
    return [ci]


def ib_link_flap(F, t, step):
    job = F.job
    ci = F.cfg["_flap_node"]
    node = job.nodes[ci]
    hca = F.cfg["_flap_hca"]
    # final port error on culprit (its own WARN), then completion errors on peers naming its IP
    for lr in range(node.rpn):
        job.proc(node, lr, t, nccl_info(job, node, lr, f"NET/IB : {hca}:1 Got async event : port error", lvl="WARN"), ind("ib_port_error", node.name))
    F.failed_codes[ci] = [(lr, -6) for lr in range(node.rpn)]
    # culprit's own ranks also abort with the remote error
    for lr in range(node.rpn):
        job.proc(node, lr, t + 8, nccl_info(job, node, lr, f"NCCL WARN NET/IB : Got completion from peer {job.nodes[(ci+1) % len(job.nodes)].ip}<{F.rng.randrange(32768,60999)}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{node.ip}", lvl="WARN"), ind("ib_completion_error", node.name))
    tt = F.peers_reset([ci], t + 7, node.ip, ib=True)
    F.teardown_all(tt + 2, node)
    return [ci]


def ib_flap_pre(F, step, t):
    """intermittent port error/active pairs before the final failure (on_step hook)."""
    job = F.job
    if step in F.cfg["_flap_steps"]:
        node = job.nodes[F.cfg["_flap_node"]]
        lr = 0
        job.proc(node, lr, t, nccl_info(job, node, lr, f"NET/IB : {F.cfg['_flap_hca']}:1 Got async event : port error", lvl="WARN"), ind("ib_port_error", node.name))
        job.proc(node, lr, t + 2.5, nccl_info(job, node, lr, f"NET/IB : {F.cfg['_flap_hca']}:1 Got async event : port active", lvl="WARN"), ind("ib_port_flap:context", node.name))


def power_loss(F, t, step):
    job = F.job
    ci = F.pick_node(allow0=False)
    node = job.nodes[ci]
    # the node's file just stops, possibly mid-line
    if F.cfg.get("per_node_stats") or F.rng.random() < 0.4:
        if F.style.name == "torchrun-tee":
            partial = "[default0]:" + F.style.log(job, node, 0, t, "INFO", ("__main__", "train", 219), f"[step {step}] node {node.name} fwd_bwd=")
        elif F.style.name == "kubeflow-pytorchjob":
            partial = F.style.log(job, node, 0, t, "INFO", "train.perf", f"global_step={step} node {node.name} fwd_bwd=")
        elif F.cfg["nccl_debug"]:
            g = node.grank(0)
            partial = (F.style.tag_for(node) + " " if F.style.name == "skypilot-ray" else "") + \
                nccl_info(job, node, 0, f"Channel 02/0 : {g}[0] -> {(g + node.rpn) % job.world}[0] [send] via NET/{'IB/0/GDRDMA' if F.cfg['ib'] else 'Socket/0'}")
        else:
            partial = ""
        cut = F.rng.randrange(len(partial) // 3, len(partial) - 2) if partial else 0
        if F.style.name != "sagemaker-mpi" and partial:
            job.raw(ci, t, partial[:cut])
    job.dead.add(ci)
    F.failed_codes.pop(ci, None)
    if F.style.name == "sagemaker-mpi":
        bar = "-" * 74
        rows = [bar, "ORTE has lost communication with a remote daemon.", "",
                f"  HNP daemon   : [[{F.cfg['mpi_jobid']},0],0] on node {job.nodes[0].name}",
                f"  Remote daemon: [[{F.cfg['mpi_jobid']},0],{ci}] on node {node.name}", "",
                "This is usually due to either a failure of the TCP network",
                "connection to the node, or possibly an internal failure of",
                "the daemon itself. We cannot recover from this failure, and",
                "therefore will terminate the job.", bar]
        for i, r in enumerate(rows):
            job.line(0, t + 8 + i * 0.0001, r, sym("orte_lost_daemon" if ("lost" in r or "Remote daemon" in r) else "mpirun:context"))
        F.exit_times.append(t + 8.5)
        F.teardown_all(t + 9, job.nodes[0])
        return [ci]
    if F.cfg["ib"]:
        tt = F.peers_reset([ci], t + 14, node.ip, ib=True)
    else:
        tt = F.peers_timeout([ci], t)
    F.teardown_all(tt + 1, job.nodes[0])
    return [ci]


def hung_gpu(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    tt = F.peers_timeout([ci], t)
    # the culprit's ranks also time out, but only after the others have already aborted
    F.failed_codes[ci] = [(lr, -15) for lr in range(node.rpn)]
    F.teardown_all(tt + 2, job.nodes[(ci + 1) % len(job.nodes)])
    return [ci]


def straggler(F, t, step):
    job = F.job
    ci = F.cfg["_slow_node"]
    tt = F.peers_timeout([ci], t)
    F.failed_codes[ci] = [(lr, -15) for lr in range(job.nodes[ci].rpn)]
    F.teardown_all(tt + 2, job.nodes[(ci + 1) % len(job.nodes)])
    return [ci]


def gpu_oom_rank(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    tot = F.cfg["gpu_mem"]
    free = round(F.rng.uniform(0.2, 1.9), 2)
    ask = round(F.rng.uniform(1.0, 8.0), 2)
    used = round(tot - free - 0.5, 2)
    alloc = round(used - F.rng.uniform(1, 6), 2)
    final = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {ask:.2f} GiB. GPU {lr} has a total capacity of {tot:.2f} GiB of which {free:.2f} GiB is free. "
             f"Process {node.pids[lr]} has {used:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by PyTorch, and {used-alloc-0.3:.2f} GiB is reserved by PyTorch but unallocated. "
             "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    if tver(job) < (2, 3):
        final = final.replace("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError")
    fr = (F.hf_frames() if F.is_hf() else F.user_frames()) + [(f"{F.site}/torch/autograd/graph.py", 768, "_engine_run_backward", "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass")]
    tt = F.exc(node, lr, t, fr, final, "cuda_oom")
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + 2, node)
    return [ci]


def dataloader_host_oom(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    wpid = node.pids[lr] + 1000 + F.rng.randrange(300)
    s = F.site
    fr = (F.hf_frames("loop") if F.is_hf() else F.user_frames()[:2]) + [
        (f"{s}/torch/utils/data/dataloader.py", 631, "__next__", "data = self._next_data()"),
        (f"{s}/torch/utils/data/dataloader.py", 1329, "_next_data", "idx, data = self._get_data()"),
        (f"{s}/torch/utils/data/dataloader.py", 1133, "_try_get_data", "raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e")]
    final = f"RuntimeError: DataLoader worker (pid {wpid}) is killed by signal: Killed. "
    tt = F.exc(node, lr, t, fr, final, "dataloader_killed")
    if F.style.name in ("torchrun-tee", "skypilot-ray"):
        F.dmesg(node, tt + 1, [(f"Out of memory: Killed process {wpid} (pt_data_worker) total-vm:{F.rng.randrange(90,200)*1048576}kB, anon-rss:{F.rng.randrange(60,120)*1048576}kB, file-rss:0kB, shmem-rss:{F.rng.randrange(1,9)*1048576}kB, UID:0 pgtables:{F.rng.randrange(100000,400000)}kB oom_score_adj:0", "oom_kill")])
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + 2, node)
    return [ci]


def loss_scale_min(F, t, step):
    """fp16 divergence: DeepSpeed loss scaler hits its floor on every rank (job-wide)."""
    job = F.job
    s = F.site
    fr = F.hf_frames() + [(f"{s}/deepspeed/runtime/engine.py", 2213, "step", "self._take_model_step(lr_kwargs)"),
                          (f"{s}/deepspeed/runtime/fp16/loss_scaler.py", 183, "update_scale", 'raise Exception(')] if F.is_hf() else \
        F.user_frames() + [(f"{s}/deepspeed/runtime/fp16/loss_scaler.py", 183, "update_scale", 'raise Exception(')]
    for node in job.nodes:
        codes = []
        for lr in range(node.rpn):
            g = node.grank(lr)
            tt = t + F.rng.random() * 0.3
            d = job.wall(node, tt)
            if lr == 0:
                for k, sc in enumerate([4, 2, 1]):
                    job.proc(node, lr, tt - 3 + k, f"[{d:%Y-%m-%d %H:%M:%S},{k*111:03d}] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank {g} Skipping step. Attempted loss scale: {sc}, reducing to {max(sc//2,1)}", ind("ds_overflow:context", node.name))
            F.exc(node, lr, tt, fr, "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "loss_scale_min")
            codes.append((lr, 1))
        F.failed_codes[node.idx] = codes
    F.teardown_all(t + 3, job.nodes[0])
    return list(range(len(job.nodes)))


def device_assert(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    pre = []
    for k in range(F.rng.randrange(2, 5)):
        pre.append((f"../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [{F.rng.randrange(900)},0,0], thread: [{32*k+F.rng.randrange(32)},0,0] Assertion `srcIndex < srcSelectDimSize` failed.", "device_assert"))
    final = ["RuntimeError: CUDA error: device-side assert triggered",
             "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]
    tt = F.exc(node, lr, t, F.hf_frames() if F.is_hf() else F.user_frames(), final, "device_assert", pre)
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + 2, node)
    return [ci]


def _all_nodes_raise(F, t, fr, final, kind, pre=(), only_lr0=False):
    job = F.job
    for node in job.nodes:
        codes = []
        for lr in range(node.rpn if not only_lr0 else 1):
            F.exc(node, lr, t + F.rng.random() * 0.5 + node.skew * 0, fr, final, kind, pre)
            codes.append((lr, 1))
        F.failed_codes[node.idx] = codes
    F.teardown_all(t + 2, job.nodes[0])
    return list(range(len(job.nodes)))


def dataset_missing(F, t, step):
    s = F.site
    if F.cfg.get("flavour") == "lf" and F.is_hf():
        fr = F.hf_frames("x") + [(f"{s}/llamafactory/train/sft/workflow.py", 51, "run_sft", 'dataset_module = get_dataset(template, model_args, data_args, training_args, stage="sft", **tokenizer_module)'),
                                 (f"{s}/llamafactory/data/loader.py", 254, "get_dataset", "dataset = _get_merged_dataset(data_args.dataset, model_args, data_args, training_args, stage)"),
                                 (f"{s}/llamafactory/data/parser.py", 118, "get_dataset_list", 'raise ValueError(f"Undefined dataset {name} in {DATA_CONFIG}.")')]
        final = f"ValueError: Undefined dataset {F.cfg['dataset']} in dataset_info.json."
    else:
        fr = F.user_frames("loader = build_loader(cfg)") + [(f"{s}/datasets/load.py", 2074, "load_dataset", "builder_instance = load_dataset_builder("),
                                                           (f"{s}/datasets/data_files.py", 407, "resolve_pattern", "raise FileNotFoundError(error_msg)")]
        final = f"FileNotFoundError: Unable to find '{F.cfg['data_dir']}/train-*.jsonl'"
    return _all_nodes_raise(F, t, fr, final, "dataset_missing")


def data_corrupt_json(F, t, step):
    """Main process preprocesses first (others wait in a barrier): only node 0 raises."""
    job = F.job
    s = F.site
    node = job.nodes[0]
    row = F.rng.randrange(1000, 900000)
    pre_fr = [(f"{s}/datasets/packaged_modules/json/json.py", 137, "_generate_tables", "pa_table = paj.read_json("),
              ("pyarrow/_json.pyx", 308, "pyarrow._json.read_json", None), ("pyarrow/error.pxi", 92, "pyarrow.lib.check_status", None)]
    job.proc(node, 0, t, "Generating train split: 0 examples [00:03, ? examples/s]", ind("dataset_gen:context", node.name))
    tt = F.exc(node, 0, t + 0.01, pre_fr, f"pyarrow.lib.ArrowInvalid: JSON parse error: Missing a closing quotation mark in string. in row {row}", "json_parse_error")
    job.proc(node, 0, tt, "", None)
    job.proc(node, 0, tt, "The above exception was the direct cause of the following exception:", ind("traceback:context", node.name))
    job.proc(node, 0, tt, "", None)
    fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("loader = build_loader(cfg)")) + [(f"{s}/datasets/builder.py", 1997, "_prepare_split_single", 'raise DatasetGenerationError("An error occurred while generating the dataset") from e')]
    tt = F.exc(node, 0, tt + 0.001, fr, "datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset", "dataset_generation_error")
    F.failed_codes[0] = [(0, 1)]
    if len(job.nodes) > 1:
        F.peers_timeout([0], t, op="ALLREDUCE", numel=1)
    F.teardown_all(tt + 2, node)
    return list(range(len(job.nodes)))


def corrupt_ckpt(F, t, step):
    s = F.site
    F.cfg["resume_from"]
    if F.rng.random() < 0.5:
        fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("state = load_checkpoint(cfg.resume)")) + [
            (f"{s}/torch/serialization.py", 1360, "load", "with _open_zipfile_reader(opened_file) as opened_zipfile:"),
            (f"{s}/torch/serialization.py", 719, "__init__", "super().__init__(torch._C.PyTorchFileReader(name_or_buffer))")]
        final = "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
    else:
        fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("state = load_checkpoint(cfg.resume)")) + [
            (f"{s}/safetensors/torch.py", 311, "load_file", "with safe_open(filename, framework=\"pt\", device=device) as f:")]
        final = "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"
    return _all_nodes_raise(F, t, fr, final, "corrupt_checkpoint")


def ds_batch_config(F, t, step):
    s = F.site
    job = F.job
    mbs, gas = F.cfg["mbs"], F.cfg["gas"]
    tb = mbs * gas * job.world * 2
    fr = F.hf_frames("x") + [(f"{s}/deepspeed/runtime/config.py", 936, "_configure_train_batch_size", "self._batch_assertion()"),
                             (f"{s}/deepspeed/runtime/config.py", 884, "_batch_assertion", "assert train_batch == micro_batch * grad_acc * self.world_size, (")]
    final = f"AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size {tb} != {mbs} * {gas} * {job.world}"
    return _all_nodes_raise(F, t, fr, final, "ds_batch_assertion")


def eval_metrics_crash(F, t, step):
    s = F.site
    fr = (F.hf_frames("train") + [(f"{s}/transformers/trainer.py", 3046, "_maybe_log_save_evaluate", "metrics = self._evaluate(trial, ignore_keys_for_eval)"),
                              (f"{s}/transformers/trainer.py", 4205, "evaluation_loop", "metrics = self.compute_metrics(EvalPrediction(predictions=all_preds, label_ids=all_labels))"),
                              (F.cfg["script_path"].replace("train.py", "metrics.py"), 31, "compute_metrics", "preds = np.array(eval_preds.predictions)")]) if F.is_hf() else \
        F.user_frames("val = evaluate(model, val_loader)") + [(F.cfg["script_path"].replace("train.py", "metrics.py"), 31, "compute_metrics", "preds = np.array(preds)")]
    final = "ValueError: setting an array element with a sequence. The requested array has an inhomogeneous shape after 1 dimensions. The detected shape was (250,) + inhomogeneous part."
    return _all_nodes_raise(F, t + 6, fr, final, "eval_metrics_error")


def ckpt_disk_full(F, t, step):
    job = F.job
    node = job.nodes[0]
    s = F.site
    fr = (F.hf_frames("train") + [(f"{s}/transformers/trainer.py", 3160, "_save_checkpoint", "self._save_optimizer_and_scheduler(output_dir)")] if F.is_hf()
          else F.user_frames("save_checkpoint(model, optim, step)")) + [
        (f"{s}/torch/serialization.py", 652, "save", "with _open_zipfile_writer(f) as opened_zipfile:"),
        (f"{s}/torch/serialization.py", 499, "__exit__", "self.file_like.write_end_of_file()")]
    final = f"RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos {F.rng.randrange(10**9, 9*10**9)} vs {F.rng.randrange(10**9, 9*10**9)}"
    pre_fr = [(f"{s}/torch/serialization.py", 653, "save", "_save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)"),
              (f"{s}/torch/serialization.py", 887, "_save", "zip_file.write_record(name, storage, num_bytes)")]
    tt = F.exc(node, 0, t + 20, pre_fr, f"RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/{F.rng.randrange(40,900)}: file write failed", "ckpt_write_failed")
    job.proc(node, 0, tt, "")
    job.proc(node, 0, tt, "During handling of the above exception, another exception occurred:", ind("traceback:context", node.name))
    job.proc(node, 0, tt, "")
    tt = F.exc(node, 0, tt + 0.001, fr, final, "ckpt_write_failed")
    F.failed_codes[0] = [(0, 1)]
    if len(job.nodes) > 1:
        F.peers_timeout([0], t + 20, op="BARRIER" if F.rng.random() < 0.5 else "ALLREDUCE", numel=1)
    F.teardown_all(tt + 2, node)
    return [0]


def ckpt_stale_nfs(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    path = f"{F.cfg['ckpt_dir']}/step_{step:08d}" if not F.is_hf() else f"{F.cfg['out_dir']}/checkpoint-{step}"
    fr = (F.user_frames("save_checkpoint(model, optim, step)") + [(f"{F.site}/torch/distributed/checkpoint/filesystem.py", 478, "_write_files_from_queue", "with create_stream(file_name, \"wb\") as stream:")]) \
        if not F.is_hf() else F.hf_frames("train") + [(f"{F.site}/transformers/trainer.py", 3085, "_save_checkpoint", "self._save_rng_state(output_dir)")]
    final = f"OSError: [Errno 116] Stale file handle: '{path}/__{node.grank(0)}_0.distcp'" if not F.is_hf() else f"OSError: [Errno 116] Stale file handle: '{path}/rng_state_{node.grank(0)}.pth'"
    tt = F.exc(node, 0, t + 5, fr, final, "stale_file_handle")
    F.failed_codes[ci] = [(0, 1)]
    F.propagate([ci], t + 5)
    F.teardown_all(tt + 2, node)
    return [ci]


def final_save_quota(F, t, step):
    job = F.job
    node = job.nodes[0]
    out = F.cfg.get("out_dir") or F.cfg["ckpt_dir"]
    fr = (F.hf_frames("train") + [(f"{F.site}/transformers/trainer.py", 3410, "save_model", "self._save(output_dir, state_dict=state_dict)")]) if F.is_hf() else F.user_frames("save_final(model, cfg.out)")
    fr = fr + [(f"{F.site}/safetensors/torch.py", 286, "save_file", "serialize_file(_flatten(tensors), filename, metadata=metadata)")]
    tt = F.exc(node, 0, t + 3, fr, f"OSError: [Errno 122] Disk quota exceeded: '{out}/model-00003-of-0000{F.cfg['shards']}.safetensors'" if F.cfg["shards"] < 10 else "OSError: [Errno 122] Disk quota exceeded", "disk_quota")
    F.failed_codes[0] = [(0, 1)]
    if len(job.nodes) > 1:
        F.peers_timeout([0], t + 3, op="BARRIER", numel=1)
    F.teardown_all(tt + 2, node)
    return [0]


def driver_too_old(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    s = F.site
    fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 22, "main", "torch.cuda.set_device(local_rank)"),
          (f"{s}/torch/cuda/__init__.py", 399, "set_device", "torch._C._cuda_setDevice(device)"),
          (f"{s}/torch/cuda/__init__.py", 314, "_lazy_init", "torch._C._cuda_init()")]
    final = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: "
             "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.")
    for lr in range(node.rpn):
        F.exc(node, lr, t + lr * 0.01, fr, final, "driver_too_old")
    F.failed_codes[ci] = [(lr, 1) for lr in range(node.rpn)]
    _store_wait(F, [ci], t)
    F.teardown_all(t + 2, node)
    return [ci]


def fabric_manager(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    s = F.site
    fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 22, "main", "torch.cuda.set_device(local_rank)"),
          (f"{s}/torch/cuda/__init__.py", 314, "_lazy_init", "torch._C._cuda_init()")]
    final = ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? "
             "Error 802: system not yet initialized")
    for lr in range(node.rpn):
        F.exc(node, lr, t + lr * 0.01, fr, final, "cuda_802")
    F.failed_codes[ci] = [(lr, 1) for lr in range(node.rpn)]
    _store_wait(F, [ci], t)
    F.teardown_all(t + 2, node)
    return [ci]


def nccl_wrong_iface(F, t, step):
    """One node's NCCL picks docker0 (172.17.0.1): peers can't connect; culprit named only by that IP."""
    job = F.job
    ci = F.pick_node(allow0=False)
    node = job.nodes[ci]
    bad = "172.17.0.1"
    for lr in range(node.rpn):
        job.proc(node, lr, t - 1, nccl_info(job, node, lr, f"Bootstrap : Using docker0:{bad}<0>"), ind("nccl_iface:context", node.name))
        job.proc(node, lr, t - 0.9, nccl_info(job, node, lr, f"NET/Socket : Using [0]docker0:{bad}<0>"), ind("nccl_iface", node.name))
    for nd in job.nodes:
        if nd.idx == ci:
            continue
        codes = []
        for lr in range(nd.rpn):
            tt = t + 20 + F.rng.random() * 10
            port = F.rng.randrange(32768, 60999)
            last = f"socketStartConnect: Connect to {bad}<{port}> failed : Software caused connection abort"
            job.proc(nd, lr, tt, nccl_info(job, nd, lr, f"NCCL WARN {last}", lvl="WARN"), sym("nccl_connect_failed"))
            fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 31, "main", "dist.barrier()")] + F.dist_frames()[:1] + \
                 [(f"{F.site}/torch/distributed/distributed_c10d.py", 3936, "barrier", "work = default_pg.barrier(opts=opts)")]
            final = [f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version {F.cfg['nccl'].split('+')[0]}",
                     "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.", "Last error:", last]
            for text, k in py_traceback(fr, final):
                job.proc(nd, lr, tt, text, sym("nccl_dist_backend_error" if k == "key" else ("nccl_connect_failed" if text == last else "traceback:context")))
            codes.append((lr, 1))
        F.failed_codes[nd.idx] = codes
    F.failed_codes[ci] = [(lr, -15) for lr in range(node.rpn)]
    F.teardown_all(t + 35, job.nodes[0])
    return [ci]


def port_in_use(F, t, step):
    job = F.job
    node = job.nodes[0]
    port = F.cfg["port"]
    s = F.site
    fr = [(F.cfg["script_path"], 40, "<module>", "main()"), (F.cfg["script_path"], 25, "main", 'dist.init_process_group(backend="nccl")'),
          (f"{s}/torch/distributed/rendezvous.py", 189, "_create_c10d_store", "return TCPStore(")]
    final = (f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use")
    job.proc(node, 0, t - 0.01, f"[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:{port} (errno: 98 - Address already in use).", ind("eaddrinuse", node.name))
    job.proc(node, 0, t - 0.005, f"[W socket.cpp:464] [c10d] The server socket has failed to bind to 0.0.0.0:{port} (errno: 98 - Address already in use).", ind("eaddrinuse", node.name))
    tt = F.exc(node, 0, t, fr, final, "eaddrinuse")
    F.failed_codes[0] = [(0, 1)]
    for nd in job.nodes[1:]:
        codes = []
        for lr in range(nd.rpn):
            tt2 = t + F.cfg["store_timeout_s"] + F.rng.random()
            job.proc(nd, lr, tt2 - 60, f"[W socket.cpp:663] [c10d] The client socket has failed to connect to [{node.name}]:{port} (errno: 111 - Connection refused).")
            if lr == 0:
                fr2 = fr[:2] + [(f"{s}/torch/distributed/rendezvous.py", 189, "_create_c10d_store", "return TCPStore(")]
                for text, k in py_traceback(fr2, f"torch.distributed.DistNetworkError: The client socket has timed out after {F.cfg['store_timeout_s']}s while trying to connect to ({node.name}, {port})."):
                    job.proc(nd, lr, tt2, text, sym("store_connect_timeout" if k == "key" else "traceback:context"))
                codes.append((lr, 1))
        F.failed_codes[nd.idx] = codes or [(0, 1)]
    F.teardown_all(tt + 2, node)
    return [0]


def rdzv_dns(F, t, step):
    job = F.job
    ci = F.pick_node(allow0=False)
    node = job.nodes[ci]
    m = job.nodes[0].name
    port = F.cfg["port"]
    for k in range(6):
        job.line(ci, t + k * 10, f"[W socket.cpp:697] [c10d] The IPv4 network addresses of ({m}, {port}) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).", ind("dns_failure", node.name))
    s = F.site
    fr = [(F.cfg["torchrun_bin"], 8, "<module>", "sys.exit(main())"), (f"{s}/torch/distributed/run.py", 910, "run", "elastic_launch("),
          (f"{s}/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", 1135, "_create_handler", "return DynamicRendezvousHandler.from_backend("),
          (f"{s}/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", 163, "_create_tcp_store", "raise RendezvousConnectionError(")]
    tt = t + 61
    for text, k in py_traceback(fr, "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details."):
        job.line(ci, tt, F.style.agent_prefix_for(job, node) + text, ind("rdzv_connection_error" if k == "key" else "traceback:context", node.name))
        tt += 0.0002
    # peers wait for the missing node until the rendezvous timeout
    for nd in job.nodes:
        if nd.idx == ci:
            continue
        tt2 = t + F.cfg["store_timeout_s"]
        frr = fr[:2] + [(f"{s}/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", 1160, "next_rendezvous", "self._op_executor.run(join_op, deadline, self._get_deadline)"),
                        (f"{s}/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", 648, "run", "raise RendezvousTimeoutError()")]
        for text, k in py_traceback(frr, "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"):
            job.line(nd.idx, tt2, F.style.agent_prefix_for(job, nd) + text, sym("rdzv_timeout" if k == "key" else "traceback:context"))
            tt2 += 0.0002
    if F.style.name == "kubeflow-pytorchjob":
        F.cfg["kf_fail_msg"] = f"PyTorchJob {F.cfg['jobname']} is failed because 1 Worker replica(s) failed."
        F.style.job_failed_epilogue(job, t + F.cfg["store_timeout_s"] + 5, (node, F.cfg["kf_fail_msg"]))
    elif F.style.name == "skypilot-ray":
        F.style.job_failed_epilogue(job, t + F.cfg["store_timeout_s"] + 5, ([1] * len(job.nodes), 1))
    return [ci]


def hf_offline(F, t, step):
    job = F.job
    ci = F.pick_node(allow0=False) if len(job.nodes) > 1 else 0
    node = job.nodes[ci]
    s = F.site
    mid = F.cfg["hub_model"]
    fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("model = AutoModelForCausalLM.from_pretrained(cfg.model)")) + [
        (f"{s}/transformers/utils/hub.py", 441, "cached_file", "raise EnvironmentError(")]
    final = [f"OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like {mid} is not the path to a directory containing a file named config.json.",
             "Checkout your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'."]
    job.proc(node, 0, t - 10, f"'(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /{mid}/resolve/main/config.json (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at {hexaddr(F.rng)}>: Failed to establish a new connection: [Errno 101] Network is unreachable'))\"), '(Request ID: {F.rng.randrange(16**8):08x}-{F.rng.randrange(16**4):04x})')' thrown while requesting HEAD https://huggingface.co/{mid}/resolve/main/config.json", ind("hub_unreachable", node.name))
    for lr in range(node.rpn):
        F.exc(node, lr, t + lr * 0.02, fr, final, "hub_offline")
    F.failed_codes[ci] = [(lr, 1) for lr in range(node.rpn)]
    F.propagate([ci], t, op="BROADCAST")
    F.teardown_all(t + 3, node)
    return [ci]


def shm_bus_error(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    s = F.site
    wpid = node.pids[lr] + 800 + F.rng.randrange(100)
    job.proc(node, lr, t - 0.2, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", ind("shm_bus_error", node.name))
    fr = (F.hf_frames("loop") if F.is_hf() else F.user_frames()[:2]) + [
        (f"{s}/torch/utils/data/dataloader.py", 1133, "_try_get_data", "raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e")]
    final = f"RuntimeError: DataLoader worker (pid {wpid}) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
    tt = F.exc(node, lr, t, fr, final, "shm_bus_error")
    F.failed_codes[ci] = [(lr, 1)]
    F.propagate([ci], t)
    F.teardown_all(tt + 2, node)
    return [ci]


def datasets_filelock(F, t, step):
    job = F.job
    ci = F.pick_node(allow0=False) if len(job.nodes) > 1 else 0
    node = job.nodes[ci]
    lock = f"{F.cfg['hf_cache']}/datasets/_{F.cfg['hf_cache'].strip('/').replace('/', '_')}_datasets_json_default-{F.rng.randrange(16**16):016x}_0.0.0_{F.rng.randrange(16**16):016x}.lock"
    fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("loader = build_loader(cfg)")) + [(f"{F.site}/datasets/builder.py", 871, "download_and_prepare", "with FileLock(lock_path) if is_local else contextlib.nullcontext():"),
                                                                                        (f"{F.site}/filelock/_api.py", 332, "acquire", "raise Timeout(lock_filename)  # noqa: TRY301")]
    final = f"filelock._error.Timeout: The file lock '{lock}' could not be acquired."
    for lr in range(node.rpn):
        F.exc(node, lr, t + lr * 0.01, fr, final, "filelock_timeout")
    F.failed_codes[ci] = [(lr, 1) for lr in range(node.rpn)]
    F.propagate([ci], t, op="BROADCAST")
    F.teardown_all(t + 2, node)
    return [ci]


def eval_hang(F, t, step):
    job = F.job
    ci = F.pick_node()
    tt = F.peers_timeout([ci], t, op="ALLGATHER")
    F.failed_codes[ci] = [(lr, -15) for lr in range(job.nodes[ci].rpn)]
    F.teardown_all(tt + 2, job.nodes[(ci + 1) % len(job.nodes)])
    return [ci]


def flash_attn_abi(F, t, step):
    py = F.cfg["pyver"].replace(".", "")
    fr = [(F.cfg["script_path"], 5, "<module>", "from model import build_model" if not F.is_hf() else "from llamafactory.train.tuner import run_exp"),
          (f"{F.site}/flash_attn/__init__.py", 3, "<module>", "from flash_attn.flash_attn_interface import ("),
          (f"{F.site}/flash_attn/flash_attn_interface.py", 10, "<module>", "import flash_attn_2_cuda as flash_attn_cuda")]
    final = f"ImportError: {F.site}/flash_attn_2_cuda.cpython-{py}-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    return _all_nodes_raise(F, t, fr, final, "flash_attn_import")


def transformers_arch(F, t, step):
    s = F.site
    arch = F.cfg["arch_type"]
    fr = (F.hf_frames("x") if F.is_hf() else F.user_frames("model = AutoModelForCausalLM.from_pretrained(cfg.model)")) + [
        (f"{s}/transformers/models/auto/configuration_auto.py", 1040, "from_pretrained", "raise ValueError(")]
    final = (f"ValueError: The checkpoint you are trying to load has model type `{arch}` but Transformers does not recognize this architecture. "
             "This could be because of an issue with the checkpoint, or because your version of Transformers is out of date.")
    return _all_nodes_raise(F, t, fr, final, "unknown_model_type")


def torch_compile_fail(F, t, step):
    s = F.site
    fr = F.user_frames() + [(f"{s}/torch/_dynamo/eval_frame.py", 465, "_fn", "return fn(*args, **kwargs)"),
                            (f"{s}/torch/_dynamo/output_graph.py", 1446, "_call_user_compiler", "raise BackendCompilerFailed(self.compiler_fn, e).with_traceback(")]
    final = ["torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
             "AssertionError: cannot compute free_symbols of True",
             "",
             "Set TORCH_LOGS=\"+dynamo\" and TORCHDYNAMO_VERBOSE=1 for more information",
             "",
             "",
             "You can suppress this exception and fall back to eager by setting:",
             "    import torch._dynamo",
             "    torch._dynamo.config.suppress_errors = True"]
    return _all_nodes_raise(F, t, fr, final, "inductor_failed")


def safetensors_shared(F, t, step):
    job = F.job
    node = job.nodes[0]
    s = F.site
    fr = F.hf_frames("train") + [(f"{s}/transformers/trainer.py", 3160, "_save_checkpoint", "self.save_model(output_dir, _internal_call=True)"),
                             (f"{s}/safetensors/torch.py", 488, "_flatten", "raise RuntimeError(")]
    final = ("RuntimeError: Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: "
             "[{'lm_head.weight', 'model.embed_tokens.weight'}].")
    final = [final, "A potential way to correctly save your model is to use `save_model`.",
             "More information at https://huggingface.co/docs/safetensors/torch_shared_tensors"]
    tt = F.exc(node, 0, t + 2, fr, final, "safetensors_shared")
    F.failed_codes[0] = [(0, 1)]
    if len(job.nodes) > 1:
        F.peers_timeout([0], t + 2, op="BARRIER", numel=1)
    F.teardown_all(tt + 2, node)
    return [0]


def rocm_mem_fault(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    msg = f"Memory access fault by GPU node-{lr + 2} (Agent handle: {hexaddr(F.rng, 0x55)}) on address {hexaddr(F.rng)}. Reason: Page not present or supervisor privilege."
    job.proc(node, lr, t, msg, ind("hip_memory_fault", node.name))
    F.dmesg(node, t + 4, [(f"amdgpu 0000:{['0c','22','38','5c','9f','af','bf','df'][lr%8]}:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:169 vmid:{F.rng.randrange(1,15)} pasid:{F.rng.randrange(32768,33000)}, for process python pid {node.pids[lr]} thread python pid {node.pids[lr]})", "amdgpu_page_fault")])
    F.failed_codes[ci] = [(lr, -6)]
    F.propagate([ci], t)
    F.teardown_all(t + 6, node)
    return [ci]


def exit_segfault(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    lr = F.rng.randrange(node.rpn)
    rows = ["Fatal Python error: Segmentation fault", "",
            f"Thread 0x{F.rng.randrange(16**12):012x} (most recent call first):",
            f"  File \"{F.site}/torch/distributed/distributed_c10d.py\", line 1880 in destroy_process_group",
            f"  File \"{F.cfg['script_path']}\", line 418 in <module>", ""]
    for i, r in enumerate(rows):
        job.proc(node, lr, t + i * 0.0001, r, ind("segfault" if i == 0 else "segfault:context", node.name))
    F.failed_codes[ci] = [(lr, -11)]
    F.teardown_all(t + 1, node)
    return [ci]


# ------------------------------------------------------------------ Kubernetes-side
def _k8s_pod_killed(F, t, ci, reason, code, events, kind):
    job = F.job
    node = job.nodes[ci]
    job.dead.discard(ci)
    status = [("Status:         Failed", None),
              ("    State:          Terminated", None),
              (f"      Reason:       {reason}", ind(kind, node.name)),
              (f"      Exit Code:    {code}", ind(kind + ":context", node.name))]
    F.style.pod_events(job, node, t + 3, events, status)


def k8s_oomkilled(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    F.failed_codes.pop(ci, None)
    tt = F.propagate([ci], t)
    _k8s_pod_killed(F, t, ci, "OOMKilled", 137, [("Warning", "BackOff", "2m", "kubelet", "Back-off restarting failed container pytorch in pod " + f"{node.name}_{F.cfg['ns']}({F.rng.randrange(16**8):08x}-{F.rng.randrange(16**4):04x})", ind("k8s_backoff:context", node.name))], "oomkilled")
    F.cfg["kf_fail_msg"] = f"PyTorchJob {F.cfg['jobname']} is failed because 1 {'Master' if ci == 0 else 'Worker'} replica(s) failed."
    F.teardown_all(tt + 2, node)
    return [ci]


def k8s_evicted(F, t, step):
    job = F.job
    ci = F.pick_node()
    node = job.nodes[ci]
    job.line(ci, t + 0.5, elastic_log(job, node, t + 0.5, "WARNING", "torch.distributed.elastic.agent.server.api", 722, "Received Signals.SIGTERM death signal, shutting down workers"), sym("agent_sigterm"))
    F.failed_codes.pop(ci, None)
    tt = F.propagate([ci], t)
    avail = F.rng.randrange(40000, 99000)
    ev = [("Warning", "Evicted", "30s", "kubelet", f"The node was low on resource: memory. Threshold quantity: 100Mi, available: {avail}Ki. ", ind("k8s_evicted", node.name)),
          ("Normal", "Killing", "30s", "kubelet", "Stopping container pytorch", ind("k8s_evicted:context", node.name))]
    F.style.pod_events(job, node, t + 35, ev, [("Status:         Failed", None), ("Reason:         Evicted", ind("k8s_evicted", node.name)),
                                                (f"Message:        The node was low on resource: memory. Threshold quantity: 100Mi, available: {avail}Ki. ", ind("k8s_evicted", node.name))])
    F.teardown_all(tt + 2, node)
    return [ci]


def k8s_preempted(F, t, step):
    job = F.job
    uid = f"{F.rng.randrange(16**8):08x}-{F.rng.randrange(16**4):04x}-{F.rng.randrange(16**4):04x}-{F.rng.randrange(16**4):04x}-{F.rng.randrange(16**12):012x}"
    for node in job.nodes:
        tt = t + F.rng.random()
        job.line(node.idx, tt, elastic_log(job, node, tt, "WARNING", "torch.distributed.elastic.agent.server.api", 722, "Received Signals.SIGTERM death signal, shutting down workers"), ind("sigterm_received", node.name))
        for lr in range(node.rpn):
            job.line(node.idx, tt + 0.01, elastic_log(job, node, tt + 0.01, "WARNING", "torch.distributed.elastic.multiprocessing.api", 897, f"Sending process {node.pids[lr]} closing signal SIGTERM"), sym("agent_sigterm"))
        s = F.site
        fr = [(F.cfg["torchrun_bin"], 8, "<module>", "sys.exit(main())"), (f"{s}/torch/distributed/elastic/multiprocessing/api.py", 84, "_terminate_process_handler", "raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)")]
        for text, k in py_traceback(fr, f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {node.agent_pid} got signal: 15"):
            job.line(node.idx, tt + 0.5, text, sym("signal_exception" if k == "key" else "traceback:context"))
        F.style.pod_events(job, node, tt + 30, [("Warning", "Preempted", "31s", "default-scheduler", f"Preempted by pod {uid} on node {F.cfg['k8s_nodes'][node.idx]}", ind("k8s_preempted", node.name)),
                                                 ("Normal", "Killing", "31s", "kubelet", "Stopping container pytorch", ind("k8s_preempted:context", node.name))])
    F.style.job_failed_epilogue(job, t + 40, (job.nodes[0], f"PyTorchJob {F.cfg['jobname']} is failed because 1 Master replica(s) failed."))
    return list(range(len(job.nodes)))


def k8s_deadline(F, t, step):
    job = F.job
    for node in job.nodes:
        tt = t + F.rng.random()
        job.line(node.idx, tt, elastic_log(job, node, tt, "WARNING", "torch.distributed.elastic.agent.server.api", 722, "Received Signals.SIGTERM death signal, shutting down workers"), sym("sigterm_received"))
    job.line(0, t + 5, f"==== pytorchjob {F.cfg['jobname']} (namespace {F.cfg['ns']}) ====")
    job.line(0, t + 5.001, f"  {'Warning':<8} {'DeadlineExceeded':<17} {'3s':<6} {'pytorchjob-controller':<22} PyTorchJob {F.cfg['jobname']} has failed because it was active longer than specified deadline", ind("deadline_exceeded", job.nodes[0].name))
    return list(range(len(job.nodes)))


# =========================================================================== catalogue
ALL = ["accelerate", "torchrun-tee", "sagemaker-mpi", "kubeflow-pytorchjob", "skypilot-ray"]
HF = ["accelerate", "sagemaker-mpi"]
NONHF = ["torchrun-tee", "kubeflow-pytorchjob", "skypilot-ray"]

CATALOGUE = [
    dict(id="gpu_ecc_uncorrectable", category="hardware", stage="training", styles=ALL, fn=gpu_ecc,
         root_cause="Uncorrectable (double-bit) ECC error on one GPU kills its rank mid-step; peers time out or see the connection drop",
         source=[PT + "c10/cuda/CUDAException.cpp", "https://docs.nvidia.com/deploy/xid-errors/index.html", "https://github.com/pytorch/pytorch/issues/49630"]),
    dict(id="gpu_ecc_at_startup", category="hardware", stage="initialization", styles=ALL, fn=gpu_ecc_init,
         root_cause="A GPU with an uncorrectable ECC error fails at torch.cuda.set_device; other nodes wait in the TCPStore until timeout",
         source=[PT + "torch/csrc/distributed/c10d/TCPStore.cpp", PT + "c10/cuda/CUDAException.cpp"]),
    dict(id="gpu_fell_off_bus_xid79", category="hardware", stage="training", styles=["torchrun-tee", "skypilot-ray"], fn=xid79,
         root_cause="GPU fell off the PCIe bus (Xid 79); rank dies with 'unspecified launch failure', kernel log shows Xid 79",
         source=["https://docs.nvidia.com/deploy/xid-errors/index.html", "https://github.com/NVIDIA/nccl/issues/1204"]),
    dict(id="ib_link_flapping", category="hardware", stage="training", styles=["accelerate", "torchrun-tee", "skypilot-ray", "kubeflow-pytorchjob"], fn=ib_link_flap,
         root_cause="Flapping InfiniBand port on one node: intermittent 'port error'/'port active' async events, then IB completion errors (status 12, retry exceeded) kill the job",
         source=[NCCL + "src/transport/net_ib.cc", "https://github.com/NVIDIA/nccl/issues/1100"], needs={"ib": True}),
    dict(id="node_power_loss", category="hardware", stage="training", styles=ALL, fn=power_loss,
         root_cause="Node lost power: its log stops (possibly mid-line); peers report IB/socket errors naming its IP, or NCCL timeouts",
         source=[NCCL + "src/transport/net_ib.cc", "https://github.com/open-mpi/ompi/blob/main/orte/mca/errmgr/help-errmgr-base.txt"]),
    dict(id="gpu_hang_silent", category="hardware", stage="training", styles=ALL, fn=hung_gpu,
         root_cause="A GPU hangs without any error on its node; all other ranks hit the NCCL watchdog timeout",
         source=[PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "https://github.com/hiyouga/LlamaFactory/issues/7396"]),
    dict(id="straggler_node", category="hardware", stage="training", styles=ALL, fn=straggler,
         root_cause="One node's GPUs throttle (thermal/power): every step slows down for many intervals until a collective exceeds the NCCL timeout",
         source=[PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "https://github.com/modelscope/ms-swift/issues/4291"]),
    dict(id="cuda_oom_one_rank", category="user", stage="training", styles=ALL, fn=gpu_oom_rank,
         root_cause="CUDA out of memory on one rank (a long batch); peers fail afterwards",
         source=[PT + "c10/cuda/CUDACachingAllocator.cpp"]),
    dict(id="dataloader_host_oom", category="user", stage="training", styles=ALL, fn=dataloader_host_oom,
         root_cause="Too many / too heavy DataLoader workers exhaust host RAM; the kernel OOM killer kills a worker",
         source=[PT + "torch/utils/data/dataloader.py", PT + "torch/utils/data/_utils/signal_handling.py"]),
    dict(id="fp16_loss_scale_floor", category="user", stage="training", styles=HF + ["torchrun-tee"], fn=loss_scale_min,
         root_cause="Training diverges in fp16 (loss NaN/overflow every step); DeepSpeed's dynamic loss scaler reaches its minimum on every rank",
         source=["https://github.com/microsoft/DeepSpeed/blob/master/deepspeed/runtime/fp16/loss_scaler.py", "https://github.com/microsoft/DeepSpeed/issues/1773"]),
    dict(id="embedding_index_assert", category="user", stage="training", styles=ALL, fn=device_assert,
         root_cause="Token id outside the embedding table (tokenizer/vocab mismatch) triggers a device-side assert on one rank",
         source=[PT + "aten/src/ATen/native/cuda/Indexing.cu"]),
    dict(id="dataset_missing", category="user", stage="data_loading", styles=ALL, fn=dataset_missing,
         root_cause="Dataset name/path in the job config does not exist; every rank fails building the dataset",
         source=["https://github.com/hiyouga/LLaMA-Factory/blob/main/src/llamafactory/data/parser.py", "https://github.com/huggingface/datasets/blob/main/src/datasets/data_files.py"]),
    dict(id="dataset_corrupt_json", category="user", stage="data_loading", styles=ALL, fn=data_corrupt_json,
         root_cause="A malformed JSON line in the training data; the main process fails generating the dataset while the others wait in a collective",
         source=["https://github.com/huggingface/datasets/blob/main/src/datasets/builder.py", "https://github.com/huggingface/datasets/issues/5667"]),
    dict(id="corrupt_checkpoint_resume", category="user", stage="model_loading", styles=ALL, fn=corrupt_ckpt,
         root_cause="The checkpoint being resumed was truncated by a previous run killed mid-save; every rank fails reading it",
         source=["https://github.com/pytorch/pytorch/blob/main/caffe2/serialize/inline_container.cc", "https://github.com/huggingface/safetensors/issues/245"], needs={"resume": True}),
    dict(id="deepspeed_batch_mismatch", category="user", stage="initialization", styles=HF, fn=ds_batch_config,
         root_cause="DeepSpeed config train_batch_size inconsistent with micro batch x grad accumulation x world size",
         source=["https://github.com/microsoft/DeepSpeed/blob/master/deepspeed/runtime/config.py"]),
    dict(id="eval_compute_metrics_error", category="user", stage="evaluation", styles=ALL, fn=eval_metrics_crash,
         root_cause="User compute_metrics builds a ragged numpy array from variable-length predictions; every rank fails in the periodic evaluation",
         source=["https://github.com/huggingface/transformers/issues/22634", "https://github.com/numpy/numpy/blob/main/numpy/_core/src/multiarray/array_coercion.c"]),
    dict(id="checkpoint_disk_full", category="platform", stage="checkpointing", styles=ALL, fn=ckpt_disk_full,
         root_cause="Shared checkpoint filesystem full: torch.save on rank 0 fails; other ranks time out waiting",
         source=["https://github.com/pytorch/pytorch/blob/main/caffe2/serialize/inline_container.cc", "https://github.com/pytorch/pytorch/issues/29225"]),
    dict(id="checkpoint_stale_nfs_handle", category="platform", stage="checkpointing", styles=ALL, fn=ckpt_stale_nfs,
         root_cause="NFS server failover invalidates file handles on one node during a periodic save (ESTALE)",
         source=["https://man7.org/linux/man-pages/man3/errno.3.html", "https://github.com/pytorch/pytorch/blob/main/torch/distributed/checkpoint/filesystem.py"]),
    dict(id="final_save_quota", category="platform", stage="finalization", styles=ALL, fn=final_save_quota,
         root_cause="Storage quota exhausted while writing the final model after the last step",
         source=["https://man7.org/linux/man-pages/man3/errno.3.html", "https://github.com/huggingface/safetensors/blob/main/bindings/python/py_src/safetensors/torch.py"]),
    dict(id="nvidia_driver_too_old", category="platform", stage="initialization", styles=ALL, fn=driver_too_old,
         root_cause="One node has an older NVIDIA driver than the container's CUDA needs; its ranks fail CUDA init, others time out in the store",
         source=[PT + "aten/src/ATen/cuda/detail/CUDAHooks.cpp"]),
    dict(id="fabric_manager_down", category="platform", stage="initialization", styles=ALL, fn=fabric_manager,
         root_cause="nvidia-fabricmanager not running on an NVSwitch node: CUDA error 802 'system not yet initialized'",
         source=[PT + "c10/cuda/CUDAFunctions.cpp", "https://github.com/pytorch/pytorch/issues/35710"]),
    dict(id="nccl_wrong_interface", category="platform", stage="initialization", styles=["accelerate", "torchrun-tee", "skypilot-ray"], fn=nccl_wrong_iface,
         root_cause="One node's NCCL bootstraps over docker0 (172.17.0.1) because NCCL_SOCKET_IFNAME is not set there; peers cannot connect to that address",
         source=[NCCL + "src/misc/socket.cc", "https://github.com/NVIDIA/nccl/issues/290"], needs={"nccl_debug": True}),
    dict(id="master_port_in_use", category="platform", stage="initialization", styles=["accelerate", "torchrun-tee", "skypilot-ray"], fn=port_in_use,
         root_cause="A leftover process on the master node holds MASTER_PORT; the TCPStore server cannot bind and clients time out",
         source=[PT + "torch/csrc/distributed/c10d/socket.cpp"]),
    dict(id="rendezvous_dns_failure", category="platform", stage="initialization", styles=["kubeflow-pytorchjob", "skypilot-ray", "torchrun-tee"], fn=rdzv_dns,
         root_cause="DNS resolution of the master/rendezvous host fails on one node; its agent cannot reach the c10d store and the others hit the rendezvous timeout",
         source=[PT + "torch/csrc/distributed/c10d/socket.cpp", PT + "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py"]),
    dict(id="hf_hub_unreachable", category="platform", stage="model_loading", styles=ALL, fn=hf_offline,
         root_cause="One node has no egress to huggingface.co and no local cache; model loading fails there",
         source=["https://github.com/huggingface/transformers/blob/main/src/transformers/utils/hub.py"]),
    dict(id="dataloader_shm_bus_error", category="platform", stage="training", styles=ALL, fn=shm_bus_error,
         root_cause="Container /dev/shm too small: DataLoader worker dies with SIGBUS",
         source=[PT + "torch/utils/data/_utils/signal_handling.py", PT + "torch/csrc/DataLoader.cpp"]),
    dict(id="datasets_cache_lock_timeout", category="platform", stage="data_loading", styles=ALL, fn=datasets_filelock,
         root_cause="Shared (NFS) HF datasets cache: file locking does not work, one node times out acquiring the builder lock",
         source=["https://github.com/tox-dev/filelock/blob/main/src/filelock/_error.py", "https://github.com/huggingface/datasets/issues/6744"]),
    dict(id="eval_hang_storage", category="platform", stage="evaluation", styles=ALL, fn=eval_hang,
         root_cause="One node's evaluation DataLoader blocks on an unresponsive shared filesystem; the others time out in the evaluation all-gather",
         source=[PT + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "https://github.com/huggingface/accelerate/issues/2034"]),
    dict(id="k8s_pod_evicted", category="platform", stage="training", styles=["kubeflow-pytorchjob"], fn=k8s_evicted,
         root_cause="kubelet evicted one pod under node memory pressure (not caused by the job)",
         source=["https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/eviction/helpers.go", "https://github.com/kubeflow/trainer/issues/2044"]),
    dict(id="k8s_preempted", category="platform", stage="training", styles=["kubeflow-pytorchjob"], fn=k8s_preempted,
         root_cause="Scheduler preempted the job's pods for a higher-priority workload",
         source=["https://github.com/kubernetes/kubernetes/blob/master/pkg/scheduler/framework/preemption/preemption.go", PT + "torch/distributed/elastic/multiprocessing/api.py"]),
    dict(id="k8s_container_oomkilled", category="user", stage="training", styles=["kubeflow-pytorchjob"], fn=k8s_oomkilled,
         root_cause="Container exceeded its memory limit (resource request too small): pod OOMKilled (exit 137), log just ends",
         source=["https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/kuberuntime/kuberuntime_container.go", "https://github.com/kubeflow/trainer/issues/1749"]),
    dict(id="k8s_active_deadline", category="user", stage="training", styles=["kubeflow-pytorchjob"], fn=k8s_deadline,
         root_cause="PyTorchJob activeDeadlineSeconds (requested run time) too short: the operator terminates all pods",
         source=["https://github.com/kubeflow/trainer/blob/master/pkg/controller.v1/common/job.go"]),
    dict(id="flash_attn_abi_mismatch", category="framework", stage="initialization", styles=ALL, fn=flash_attn_abi,
         root_cause="flash-attn wheel built against another torch version: undefined C++ symbol on import",
         source=["https://github.com/Dao-AILab/flash-attention/issues/451"]),
    dict(id="transformers_unknown_arch", category="framework", stage="model_loading", styles=ALL, fn=transformers_arch,
         root_cause="Installed transformers too old for the checkpoint's model_type",
         source=["https://github.com/huggingface/transformers/blob/main/src/transformers/models/auto/configuration_auto.py"]),
    dict(id="inductor_compile_failure", category="framework", stage="training", styles=NONHF, fn=torch_compile_fail,
         root_cause="torch.compile (inductor) bug raises BackendCompilerFailed on the first compiled step",
         source=[PT + "torch/_dynamo/output_graph.py", "https://github.com/pytorch/pytorch/issues/122497"], needs={"first_step": True}),
    dict(id="safetensors_shared_tensors", category="framework", stage="checkpointing", styles=HF, fn=safetensors_shared,
         root_cause="safetensors refuses tied weights when the Trainer saves a checkpoint (library limitation/version combination)",
         source=["https://github.com/huggingface/safetensors/blob/main/bindings/python/py_src/safetensors/torch.py", "https://github.com/huggingface/transformers/issues/27293"]),
    dict(id="rocm_memory_access_fault", category="framework", stage="training", styles=["torchrun-tee"], fn=rocm_mem_fault,
         root_cause="ROCm runtime/RCCL bug: 'Memory access fault by GPU node-N' aborts one rank (SIGABRT)",
         source=["https://github.com/ROCm/ROCm/issues/2804", "https://github.com/ROCm/ROCR-Runtime/blob/master/src/core/runtime/runtime.cpp"], needs={"vendor": "amd"}),
    dict(id="segfault_at_exit", category="framework", stage="finalization", styles=NONHF, fn=exit_segfault,
         root_cause="Segmentation fault in destroy_process_group after the last step (NCCL/PyTorch teardown bug)",
         source=["https://github.com/pytorch/pytorch/issues/115388", "https://github.com/python/cpython/blob/main/Python/faulthandler.c"]),
]

HOOKS = {"ib_link_flapping": ib_flap_pre}
