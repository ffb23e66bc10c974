"""Log dialects (styles) for the foreign4 generator.

Every style renders the same abstract run (preamble, training steps, eval,
checkpoints, faults, teardown) in the dialect of one real stack.  All values
are synthetic; the message shapes follow the public sources cited in README.md.
"""
import datetime as _dt

UTC = _dt.UTC


def dt_of(t):
    return _dt.datetime.fromtimestamp(t, UTC)


def glog_ts(t):  # W0110 12:01:02.345678
    d = dt_of(t)
    return d.strftime("%m%d %H:%M:%S") + ".%06d" % d.microsecond


def py_ts(t):  # 2025-01-10 12:01:02,345
    d = dt_of(t)
    return d.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (d.microsecond // 1000)


def iso_ts(t):
    d = dt_of(t)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%06dZ" % d.microsecond


def sec_ts(t):
    return dt_of(t).strftime("%Y-%m-%d %H:%M:%S")


def cann_ts(t):  # 2025-01-10-12:01:02.345.678
    d = dt_of(t)
    return d.strftime("%Y-%m-%d-%H:%M:%S") + ".%03d.%03d" % (d.microsecond // 1000, d.microsecond % 1000)


def slurm_ts(t):
    return dt_of(t).strftime("%Y-%m-%dT%H:%M:%S")


def torchrun_box(run, node, t, failures, script, binpath, sitepk):
    """Lines of torch.distributed.elastic ChildFailedError report.
    failures: list of (local_rank, exitcode, pid); first one is root cause."""
    rpn = run.P["rpn"]
    out = ["Traceback (most recent call last):",
           '  File "%s", line 8, in <module>' % binpath,
           "    sys.exit(main())",
           '  File "%s/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper' % sitepk,
           "    return f(*args, **kwargs)",
           '  File "%s/torch/distributed/run.py", line 919, in main' % sitepk,
           "    run(args)",
           '  File "%s/torch/distributed/run.py", line 910, in run' % sitepk,
           "    elastic_launch(",
           '  File "%s/torch/distributed/launcher/api.py", line 138, in __call__' % sitepk,
           "    return launch_agent(self._config, self._entrypoint, list(args))",
           '  File "%s/torch/distributed/launcher/api.py", line 269, in launch_agent' % sitepk,
           "    raise ChildFailedError(",
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
           "============================================================",
           "%s FAILED" % script,
           "------------------------------------------------------------",
           "Failures:"]
    tstr = dt_of(t + node.skew).strftime("%Y-%m-%d_%H:%M:%S")

    def block(i, lr, code, pid):
        b = ["[%d]:" % i,
             "  time      : %s" % tstr,
             "  host      : %s" % node.name,
             "  rank      : %d (local_rank: %d)" % (node.idx * rpn + lr, lr),
             "  exitcode  : %d (pid: %d)" % (code, pid),
             "  error_file: <N/A>"]
        if code < 0:
            sig = {-6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV", -15: "SIGTERM", -7: "SIGBUS"}.get(code, "SIGABRT")
            b.append("  traceback : Signal %d (%s) received by PID %d" % (-code, sig, pid))
        else:
            b.append("  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        return b

    if len(failures) > 1:
        for i, (lr, code, pid) in enumerate(failures[1:], 1):
            out += block(i, lr, code, pid)
    else:
        out.append("  <NO_OTHER_FAILURES>")
    out += ["------------------------------------------------------------",
            "Root Cause (first observed failure):"]
    out += block(0, *failures[0])
    out.append("============================================================")
    return out


class Style:
    name = ""
    framework = ""
    launcher = ""
    fam = "cuda"
    coll_timeout = 600.0

    def __init__(self, run):
        self.r = run
        self.P = run.P

    # ---- helpers -----------------------------------------------------
    def g(self, node, l):
        return node.idx * self.P["rpn"] + l

    def pid(self, node, l):
        return node.pid0 + 1 + l

    def vis(self, node):
        return list(range(self.P["rpn"]))

    def loggers(self):
        return self.r.nodes

    def exc(self, node, l, t, frames, finals, kind, role="indicators"):
        """Python traceback; finals (exception line and continuation) get marked."""
        X = self.X
        self.r.emit(node, t, X(node, l, "Traceback (most recent call last):"))
        for (f, ln, fn, code) in frames:
            self.r.emit(node, t, X(node, l, '  File "%s", line %d, in %s' % (f, ln, fn)))
            if code:
                self.r.emit(node, t, X(node, l, "    " + code))
        for i, fl in enumerate(finals):
            self.r.emit(node, t, X(node, l, fl), (role, kind))

    def X(self, node, l, msg):
        return msg

    def benign_start(self, node, t):
        return t

    def benign_mid(self, node, t):
        pass

    def eval_lines(self, node, t, step, loss):
        pass

    def frames_train(self):
        return []


# ======================================================================
class Titan(Style):
    name = "titan-slurm"
    framework = "torchtitan"
    launcher = "slurm-srun+torchrun"
    fam = "cuda"
    coll_timeout = 100.0

    def __init__(self, run):
        super().__init__(run)
        self.site = "/opt/venv/lib/python3.11/site-packages"

    def vis(self, node):
        if self.P["log_all_ranks"]:
            return list(range(self.P["rpn"]))
        return [0]

    def L(self, node, l, t, level, msg):
        return "[rank%d]:[titan] %s - root - %s - %s" % (self.g(node, l), py_ts(t + node.skew), level, msg)

    def X(self, node, l, msg):
        return "[rank%d]: %s" % (self.g(node, l), msg)

    def C(self, node, l, t, lev, src, msg):
        d = dt_of(t + node.skew)
        return "[rank%d]:[%s%s %s.%06d%03d %s] %s" % (self.g(node, l), lev, d.strftime("%m%d"), d.strftime("%H:%M:%S"),
                                                     d.microsecond, (node.idx * 7 + l) % 1000, src, msg)

    def A(self, node, t, lev, src, msg):
        return "%s%s %d %s] %s" % (lev, glog_ts(t + node.skew), node.pid0, src, msg)

    def nccl(self, node, l, msg):
        return "[rank%d]:%s:%d:%d [%d] %s" % (self.g(node, l), node.name, self.pid(node, l), self.pid(node, l) + 40 + l, l, msg)

    def preamble(self, node, t):
        r, P = self.r, self.P
        e = r.emit
        for m in ["", "*****************************************",
                  "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                  "*****************************************"]:
            e(node, t, self.A(node, t, "W", "torch/distributed/run.py:793", m))
        t += 0.4
        if node.idx != 0 and P["noise_refused"]:
            for i in range(1 + (node.idx % 3)):
                d = dt_of(t + node.skew + i)
                e(node, t + i, "[W%s %s.%06d%03d socket.cpp:752] [c10d] The client socket has failed to connect to [%s]:29500 (errno: 111 - Connection refused)." % (
                    d.strftime("%m%d"), d.strftime("%H:%M:%S"), d.microsecond, 123, r.nodes[0].name))
            t += 3
        t += 2.0
        cnt = [0]

        def L(m, lev="INFO"):
            cnt[0] += 1
            tt = t + cnt[0] * 0.0137 + (0.9 if cnt[0] > 6 else 0) + (3.1 if cnt[0] > 9 else 0)
            e(node, tt, self.L(node, l, tt, lev, m))
            for key, pfx in (("init", "Starting job"), ("data", "Preparing"), ("model", "Checkpointing active")):
                if m.startswith(pfx):
                    node.marks[key] = max(node.marks.get(key, 0), tt + 0.001)
        for l in self.vis(node):
            cnt[0] = 0
            L("Starting job: %s training" % P["model_name"])
            if P["noise_warn"]:
                L("WARNING: Tokenizer %s does not have a BOS token; using <|begin_of_text|>" % P["tokenizer"], "WARNING")
            L("Building 1-D device mesh with ['dp_shard'], [%d]" % P["world"])
            L("[GC] Initial GC collection. 0.00 seconds.")
            L("Loading tokenizer from %s" % P["tokenizer"])
            L("Preparing %s dataset from %s" % (P["dataset"], P["data_path"]))
            L("Building %s with TransformerModelArgs(dim=%d, n_layers=%d, n_heads=%d, vocab_size=128256)" % (P["model_name"], P["dim"], P["layers"], P["heads"]))
            L("CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory")
            L("Model %s size: %s total parameters" % (P["model_name"], format(P["params"], ",")))
            L("Applied selective activation checkpointing to the model")
            L("Applied FSDP to the model")
            L("Peak FLOPS used for computing MFU: 9.890e+14")
            L("CUDA memory usage for model: %.2fGiB(%.2f%%)" % (P["mem0"], P["mem0"] / 79.11 * 100))
            L("Checkpointing active. Checkpoints will be loaded from and saved to %s" % P["ckpt_dir"])
            L("Trainer is initialized with local batch size %d, global batch size %d, gradient accumulation steps 1, sequence length %d, total steps %d (warmup %d)." % (
                P["lbs"], P["lbs"] * P["world"], P["seq"], P["total"], P["warmup"]))
        return t + 6

    def load_ckpt(self, node, t, step):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "Loading the checkpoint from %s/step-%d." % (self.P["ckpt_dir"], step)))
        t2 = t + self.P["ckpt_load_s"]
        for l in self.vis(node):
            self.r.emit(node, t2, self.L(node, l, t2, "INFO", "[GC] GC collection for checkpoint loading. 0.01 seconds."))
            self.r.emit(node, t2, self.L(node, l, t2, "INFO", "Finished loading the checkpoint in %.2f seconds." % self.P["ckpt_load_s"]))
        return t2

    def train_start(self, node, t, step):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "Training starts at step %d." % step))
        return t

    def step_line(self, node, t, step, loss, dt, first=False):
        P = self.P
        tps = int(P["lbs"] * P["seq"] / dt)
        mem = P["mem_peak"] + ((node.idx + step) % 7) * 0.01
        for l in self.vis(node):
            t = t + 0.0007 * l
            self.r.emit(node, t, self.L(node, l, t, "INFO", "step: %2d  loss: %7.4f  grad_norm: %7.4f  memory: %5.2fGiB(%.2f%%)  tps: %s  tflops: %.2f  mfu: %.2f%%" % (
                step, loss, 0.3 + (step % 13) * 0.011, mem, mem / 79.11 * 100, format(tps, ","), tps * P["flop_tok"] / 1e12, tps * P["flop_tok"] / 9.89e14 * 100)))
            if first:
                self.r.emit(node, t, self.L(node, l, t, "INFO", "Synchronizing and adjusting timeout for all ProcessGroups to 0:01:40"))

    def benign_mid(self, node, t):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "[GC] Peforming periodical GC collection 0.0%d seconds." % (3 + node.idx % 5)))

    def ckpt_begin(self, node, t, step):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "Saving the checkpoint (or staging if async is enabled)."))

    def ckpt_end(self, node, t, step, dur):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "[GC] GC collection invoked by checkpointer. 0.02 seconds."))
            self.r.emit(node, t, self.L(node, l, t, "INFO", "Finished saving the checkpoint (or staging if async is enabled)in %.2f seconds." % dur))

    def eval_lines(self, node, t, step, loss):
        for l in self.vis(node):
            self.r.emit(node, t, self.L(node, l, t, "INFO", "validate step: %2d  loss: %7.4f  memory: %5.2fGiB(%.2f%%)" % (step, loss + 0.05, self.P["mem_peak"] - 3, (self.P["mem_peak"] - 3) / 79.11 * 100)))

    def frames_train(self):
        return [("/workspace/torchtitan/torchtitan/train.py", 686, "<module>", "trainer.train()"),
                (self.site + "/torch/distributed/elastic/multiprocessing/errors/__init__.py", 355, "wrapper", "return f(*args, **kwargs)"),
                ("/workspace/torchtitan/torchtitan/train.py", 542, "train", "self.train_step(data_iterator)"),
                ("/workspace/torchtitan/torchtitan/train.py", 461, "train_step", "loss = self.forward_backward_step(input_dict, labels)")]

    def frames_data(self):
        return [("/workspace/torchtitan/torchtitan/train.py", 686, "<module>", "trainer.train()"),
                ("/workspace/torchtitan/torchtitan/train.py", 538, "train", "inputs, labels = self.next_batch(data_iterator)"),
                ("/workspace/torchtitan/torchtitan/train.py", 409, "next_batch", "batch = next(data_iterator)"),
                (self.site + "/torchdata/stateful_dataloader/stateful_dataloader.py", 450, "__next__", "return super().__next__()"),
                (self.site + "/torch/utils/data/dataloader.py", 708, "__next__", "data = self._next_data()")]

    def frames_ckpt(self):
        return [("/workspace/torchtitan/torchtitan/train.py", 556, "train", "self.checkpointer.save("),
                ("/workspace/torchtitan/torchtitan/components/checkpoint.py", 492, "save", "self.dcp_save("),
                (self.site + "/torch/distributed/checkpoint/state_dict_saver.py", 152, "save", "return _save_state_dict("),
                (self.site + "/torch/distributed/checkpoint/utils.py", 224, "all_reduce", "raise final_result")]

    def frames_init(self):
        return [("/workspace/torchtitan/torchtitan/train.py", 680, "<module>", "trainer = Trainer(config)"),
                ("/workspace/torchtitan/torchtitan/train.py", 96, "__init__", "self.parallel_dims = parallel_dims = self.init_distributed()")]

    # ---- propagation -------------------------------------------------
    def peer_fail(self, node, t, culprits, mode, seq):
        """peers' view when a remote rank died (mode=crash) or went silent (hang)."""
        r = self.r
        for l in self.vis(node):
            if r.is_silent(node, l):
                continue
            g = self.g(node, l)
            tt = t + 0.01 * l
            if mode == "crash" and culprits and r.rng.random() < 0.6:
                cn = culprits[0]
                r.emit(node, tt, self.nccl(node, l, "transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:%s remoteGid ::ffff:%s" % (
                    cn.ip, 40000 + cn.idx, node.ip, cn.ip)), ("symptoms", "nccl_ib_completion_error"))
                r.emit(node, tt, self.nccl(node, l, "NCCL INFO transport/net.cc:1298 -> 6"))
                r.emit(node, tt, self.X(node, l, "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.21.5"),
                       ("symptoms", "nccl_remote_error"))
                r.emit(node, tt, self.X(node, l, "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."), ("symptoms", "nccl_remote_error"))
                r.emit(node, tt, self.X(node, l, "Last error:"))
                r.emit(node, tt, self.X(node, l, "NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:%s remoteGid ::ffff:%s" % (
                    cn.ip, 40000 + cn.idx, node.ip, cn.ip)), ("symptoms", "nccl_ib_completion_error"))
                continue
            tt = t + self.coll_timeout + 0.02 * l
            C = lambda lev, src, m: self.C(node, l, tt, lev, src, m)
            r.emit(node, tt, C("E", "ProcessGroupNCCL.cpp:616", "[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, NumelIn=%d, NumelOut=%d, Timeout(ms)=100000) ran for %d milliseconds before timing out." % (
                g, seq, self.P["numel"], self.P["numel"], 100000 + 37 + l)), ("symptoms", "nccl_watchdog_timeout"))
            r.emit(node, tt, C("E", "ProcessGroupNCCL.cpp:1785", "[PG ID 0 PG GUID 0(default_pg) Rank %d] Exception (either an error or timeout) detected by watchdog at work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (g, seq, seq, seq - 1)))
            r.emit(node, tt, C("E", "ProcessGroupNCCL.cpp:630", "[Rank %d] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data." % g))
            r.emit(node, tt, C("E", "ProcessGroupNCCL.cpp:636", "[Rank %d] To avoid data inconsistency, we are taking the entire process down." % g))
            r.emit(node, tt, C("F", "ProcessGroupNCCL.cpp:1595", "[PG ID 0 PG GUID 0(default_pg) Rank %d] [PG ID 0 PG GUID 0(default_pg) Rank %d] Terminating the process after attempting to dump debug info, due to collective timeout or exception." % (g, g)))
        return t + (self.coll_timeout if mode != "crash" else 1.0) + 2

    def init_wait_fail(self, node, t, culprits):
        r = self.r
        P = self.P
        tt = t + 600
        for l in self.vis(node):
            g = self.g(node, l)
            if g == 0:
                self.exc(node, l, tt, self.frames_init() + [
                    (self.site + "/torch/distributed/c10d_logger.py", 83, "wrapper", "return func(*args, **kwargs)"),
                    (self.site + "/torch/distributed/distributed_c10d.py", 1520, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
                    (self.site + "/torch/distributed/rendezvous.py", 269, "_env_rendezvous_handler", "store = _create_c10d_store(")],
                    ["torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. %d/%d clients joined." % (P["world"] - len(culprits) * P["rpn"], P["world"])],
                    "store_wait_timeout", "symptoms")
            else:
                self.exc(node, l, tt, self.frames_init() + [
                    (self.site + "/torch/distributed/distributed_c10d.py", 1520, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)")],
                    ["torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//cuda//0"], "store_wait_timeout", "symptoms")
        return tt + 1

    def teardown(self, node, t, failures):
        """failures: list of (local_rank, exitcode); first one is root cause on this node."""
        r = self.r
        rpn = self.P["rpn"]
        fl = [(lr, c, self.pid(node, lr)) for lr, c in failures]
        others = [l for l in range(rpn) if l not in [f[0] for f in failures]]
        for l in others:
            r.emit(node, t, self.A(node, t, "W", "torch/distributed/elastic/multiprocessing/api.py:897", "Sending process %d closing signal SIGTERM" % self.pid(node, l)))
        t += 1.5
        lr, c, pid = fl[0]
        r.emit(node, t, self.A(node, t, "E", "torch/distributed/elastic/multiprocessing/api.py:869", "failed (exitcode: %d) local_rank: %d (pid: %d) of binary: /opt/venv/bin/python3" % (c, lr, pid)),
               ("symptoms", "torchrun_worker_failed"))
        for i, line in enumerate(torchrun_box(r, node, t, fl, "torchtitan/train.py", "/opt/venv/bin/torchrun", self.site)):
            r.emit(node, t, line, ("symptoms", "torchrun_child_failed") if line.startswith("torch.distributed.elastic") else None)
        return t + 0.5

    def sched_cancel(self, node, t, reason, mark=None):
        suf = " DUE TO %s" % reason if reason else ""
        if reason == "NODE FAILURE":
            suf += ", SEE SLURMCTLD LOG"
        self.r.emit(node, t, "slurmstepd: error: *** STEP %d.0 ON %s CANCELLED AT %s%s ***" % (self.P["slurm_job"], node.name, slurm_ts(t + node.skew), suf), mark)

    def job_end(self, t, exits, first=None, node_fail=None, cancel=None):
        """exits: list of (node, code) -> srun lines in head node file."""
        r = self.r
        head = r.nodes[0]
        if node_fail is not None:
            r.emit(head, t, "srun: error: Node failure on %s" % node_fail.name, ("symptoms", "srun_node_failure"))
            t += 1
        for n, code in exits:
            if code == "kill":
                r.emit(head, t, "srun: error: %s: task %d: Killed" % (n.name, n.idx), ("symptoms", "srun_task_exit"))
            elif code == "term":
                r.emit(head, t, "srun: error: %s: task %d: Terminated" % (n.name, n.idx), ("symptoms", "srun_task_exit"))
            elif code == "abort":
                r.emit(head, t, "srun: error: %s: task %d: Aborted (core dumped)" % (n.name, n.idx), ("symptoms", "srun_task_exit"))
            elif code == "oom":
                r.emit(head, t, "srun: error: %s: task %d: Out Of Memory" % (n.name, n.idx), ("symptoms", "srun_task_exit"))
            else:
                r.emit(head, t, "srun: error: %s: task %d: Exited with exit code %d" % (n.name, n.idx, code), ("symptoms", "srun_task_exit"))
            t += 0.05
        if cancel:
            r.emit(head, t, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
        return t

    def oom_kill_line(self, node, t):
        return "slurmstepd: error: Detected 1 oom_kill event in StepId=%d.0. Some of the step tasks have been OOM Killed." % self.P["slurm_job"]

    def finish(self, node, t):
        r = self.r
        for l in self.vis(node):
            r.emit(node, t, self.L(node, l, t, "INFO", "Training completed"))
            r.emit(node, t, self.L(node, l, t, "INFO", "Sleeping 2 seconds for other ranks to complete"))
        t += 2.2
        for l in self.vis(node):
            r.emit(node, t, self.L(node, l, t, "INFO", "Process group destroyed."))
        t += 1
        r.emit(node, t, self.A(node, t, "I", "torch/distributed/elastic/agent/server/api.py:879", "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish."))
        r.emit(node, t + 0.5, self.A(node, t + 0.5, "I", "torch/distributed/elastic/agent/server/api.py:932", "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish"))
        r.emit(node, t + 1, self.A(node, t + 1, "I", "torch/distributed/elastic/agent/server/api.py:946", "Done waiting for other agents. Elapsed: 0.%02d seconds" % (node.idx % 90 + 3)))
        return t + 1


# ======================================================================
class MindSpeed(Style):
    name = "mindspeed-npu"
    framework = "mindspeed-llm"
    launcher = "torchrun"
    fam = "npu"
    coll_timeout = 1800.0

    def __init__(self, run):
        super().__init__(run)
        self.site = "/usr/local/python3.10.14/lib/python3.10/site-packages"

    def loggers(self):
        return [self.r.nodes[-1]]

    def A(self, node, t, lev, src, msg):
        return "%s:%s:%s" % ({"W": "WARNING", "E": "ERROR", "I": "INFO"}[lev], src, msg)

    def wnpu(self, node, t, msg):
        d = dt_of(t + node.skew)
        return "[W%s %s.%06d000 compiler_depend.ts:%d] Warning: %s" % (d.strftime("%m%d"), d.strftime("%H:%M:%S"), d.microsecond, 133, msg)

    def preamble(self, node, t):
        r, P = self.r, self.P
        e = r.emit
        for m in ["", "*****************************************",
                  "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                  "*****************************************"]:
            e(node, t, "WARNING:torch.distributed.run:" + m if m == "" else m)
        t += 3
        for l in range(P["rpn"]):
            e(node, t, "%s/torch_npu/utils/path_manager.py:82: UserWarning: Warning: The /usr/local/Ascend/ascend-toolkit/latest owner does not match the current user." % self.site)
            e(node, t, "  warnings.warn(f\"Warning: The {path} owner does not match the current user.\")")
            if P["noise_warn"]:
                e(node, t, "%s/torch_npu/contrib/transfer_to_npu.py:301: ImportWarning: " % self.site)
                e(node, t, "    *************************************************************************************************************")
                e(node, t, "    The torch.Tensor.cuda and torch.nn.Module.cuda are replaced with torch.Tensor.npu and torch.nn.Module.npu now..")
                e(node, t, "    *************************************************************************************************************")
                e(node, t, "  warnings.warn(msg, ImportWarning)")
        if True:
            self._hdr = ["using world size: %d, data-parallel size: %d, context-parallel size: 1, tensor-model-parallel size: %d, pipeline-model-parallel size: %d " % (P["world"], P["world"] // (P["tp"] * P["pp"]), P["tp"], P["pp"]),
                      "> building PretrainedFromHF tokenizer ...",
                      " > padded vocab (size: 32000) with 0 dummy tokens (new size: 32000)",
                      "> initializing torch distributed ...",
                      "> initialized tensor model parallel with size %d" % P["tp"],
                      "> initialized pipeline model parallel with size %d" % P["pp"],
                      "> setting random seeds to 1234 ...",
                      "> compiling dataset index builder ...",
                      ">>> done with dataset index builder. Compilation time: 0.%03d seconds" % (100 + node.idx),
                      "time to initialize megatron (seconds): %.3f" % (30 + P["n_nodes"] * 0.3),
                      "[after megatron is initialized] datetime: %s " % sec_ts(t + 40 + node.skew),
                      "building GPT model ..."]
        if node.idx == 0:
            for i_m, m in enumerate(self._hdr):
                e(node, t + 0.05 * i_m + (40 if i_m >= 9 else 0), m)
        node.marks["init"] = t + 0.05 * 3 + 0.01
        t += 45
        d = dt_of(t + node.skew)
        for l in range(P["rpn"]):
            if P["noise_warn"] or l == 0:
                e(node, t, self.wnpu(node, t, "Warning: Device do not support double dtype now, dtype cast repalce with float. (function operator())"))
        e(node, t, " > number of parameters on (tensor, pipeline) model parallel rank (%d, 0): %d" % (node.idx % P["tp"], P["params"] // (P["tp"] * P["pp"])))
        return t + 2

    def load_ckpt(self, node, t, step):
        e = self.r.emit
        node.marks["model"] = t + 1
        if node.idx == 0:
            e(node, t, " loading release checkpoint from %s" % self.P["ckpt_dir"] if step == 0 else " loading checkpoint from %s at iteration %d" % (self.P["ckpt_dir"], step))
        t += self.P["ckpt_load_s"]
        if node.idx == 0:
            e(node, t, "  successfully loaded checkpoint from %s [ t %d, p 1 ] at iteration %d" % (self.P["ckpt_dir"], 0, step))
        return t

    def train_start(self, node, t, step):
        e = self.r.emit
        node.marks["data"] = t + 0.5
        if node.idx == 0:
            P = self.P
            e(node, t, "(min, max) time across ranks (ms):")
            e(node, t, "    load-checkpoint ................................: (%.2f, %.2f)" % (P["ckpt_load_s"] * 900, P["ckpt_load_s"] * 1000))
            e(node, t + 0.4, "> building train, validation, and test datasets ...")
            t += 1
            e(node, t, " > datasets target sizes (minimum size):")
            e(node, t, "    train:      %d" % (P["total"] * P["gbs"]))
            e(node, t, "    validation: %d" % ((P["total"] // P["eval_every"] + 1) * P["gbs"] * 10))
            e(node, t, "    test:       %d" % (P["gbs"] * 10))
            e(node, t, "[after dataloaders are built] datetime: %s " % sec_ts(t + 5 + node.skew))
            e(node, t + 5, "done with setup ...")
            e(node, t + 5, "training ...")
            e(node, t + 5, "[before the start of training step] datetime: %s " % sec_ts(t + 6 + node.skew))
        return t + 6

    def step_line(self, node, t, step, loss, dt, first=False):
        P = self.P
        self.r.emit(node, t, " [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number of skipped iterations:   0 | number of nan iterations:   0 |" % (
            sec_ts(t + node.skew), step, P["total"], step * P["gbs"], dt * 1000, P["gbs"] * P["seq"] * P["flop_tok"] / dt / P["world"] / 1e12,
            P["lr"] * (1 - step / (P["total"] * 1.1)), P["gbs"], loss, 0.9 + (step % 11) * 0.03))

    def ckpt_begin(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, "saving checkpoint at iteration %7d to %s in torch format" % (step, self.P["ckpt_dir"]))

    def ckpt_end(self, node, t, step, dur):
        if node.idx == 0:
            self.r.emit(node, t, "  successfully saved checkpoint from iteration %7d to %s [ t %d/%d, p 1/%d ]" % (step, self.P["ckpt_dir"], 1, self.P["tp"], self.P["pp"]))

    def eval_lines(self, node, t, step, loss):
        if node is self.r.nodes[-1]:
            e = self.r.emit
            s = "-" * 115
            e(node, t, s)
            e(node, t, " validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E | " % (step, loss + 0.04, 2.718281828 ** (loss + 0.04)))
            e(node, t, s)

    def frames_train(self):
        return [("/home/work/MindSpeed-LLM/pretrain_gpt.py", 121, "<module>", "pretrain("),
                ("/home/work/MindSpeed-LLM/mindspeed_llm/training/training.py", 276, "pretrain", "iteration, num_floating_point_operations_so_far = train(*train_args)"),
                ("/home/work/MindSpeed-LLM/mindspeed_llm/training/training.py", 616, "train", "train_step(forward_step_func,"),
                ("/home/work/MindSpeed-LLM/megatron/training/training.py", 547, "train_step", "losses_reduced = forward_backward_func(")]

    def frames_data(self):
        return [("/home/work/MindSpeed-LLM/pretrain_gpt.py", 121, "<module>", "pretrain("),
                ("/home/work/MindSpeed-LLM/mindspeed_llm/training/training.py", 244, "pretrain", "= build_train_valid_test_data_iterators("),
                ("/home/work/MindSpeed-LLM/megatron/core/datasets/blended_megatron_dataset_builder.py", 97, "build", "datasets = self._build_blended_dataset_splits()"),
                ("/home/work/MindSpeed-LLM/megatron/core/datasets/indexed_dataset.py", 384, "__init__", "self.initialize(path_prefix, multimodal, mmap)")]

    def frames_ckpt(self):
        return [("/home/work/MindSpeed-LLM/mindspeed_llm/training/training.py", 663, "train", "save_checkpoint_and_time(iteration, model, optimizer,"),
                ("/home/work/MindSpeed-LLM/megatron/training/training.py", 833, "save_checkpoint_and_time", "save_checkpoint(iteration, model, optimizer, opt_param_scheduler,"),
                ("/home/work/MindSpeed-LLM/megatron/training/checkpointing.py", 393, "save_checkpoint", "torch.save(state_dict, checkpoint_name)"),
                (self.site + "/torch/serialization.py", 628, "save", "with _open_zipfile_writer(f) as opened_zipfile:")]

    def frames_init(self):
        return [("/home/work/MindSpeed-LLM/pretrain_gpt.py", 121, "<module>", "pretrain("),
                ("/home/work/MindSpeed-LLM/mindspeed_llm/training/training.py", 178, "pretrain", "initialize_megatron(extra_args_provider=extra_args_provider,"),
                ("/home/work/MindSpeed-LLM/megatron/training/initialize.py", 78, "initialize_megatron", "finish_mpu_init()")]

    def peer_fail(self, node, t, culprits, mode, seq):
        r = self.r
        P = self.P
        tt = t + self.coll_timeout
        cr = culprits[0].idx * P["rpn"] + (self.r.culprit_l if self.r.culprit_l is not None else 0) if culprits else 0
        for l in range(P["rpn"]):
            if r.is_silent(node, l):
                continue
            g = self.g(node, l)
            x = tt + 0.03 * l
            self.exc(node, l, x, self.frames_train() + [
                ("/home/work/MindSpeed-LLM/megatron/core/distributed/param_and_grad_buffer.py", 249, "finish_grad_sync", "self.start_grad_sync()"),
                (self.site + "/torch/distributed/distributed_c10d.py", 2050, "all_reduce", "work.wait()")],
                ["RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the current working operator name is HcclAllReduce.",
                 "Since the operator is called asynchronously, the stacktrace may be inaccurate. If you want to get the accurate stacktrace, pleace set the environment variable ASCEND_LAUNCH_BLOCKING=1.",
                 "[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR00100 PTA call acl api failed" % (sec_ts(x + node.skew).replace(" ", "-"), self.pid(node, l), l, g)],
                "hccl_exec_failed", "symptoms")
            r.emit(node, x, "EI0002: [PID: %d] %s The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [%d].base information: [streamID:[%d], taskID[%d], tag[AllReduce_%s%%enp189s0f0_60000_0_%d], AlgType(level 0-1-2):[fullmesh-ring-NHR].] task information: []" % (
                self.pid(node, l), cann_ts(x + node.skew), cr, 7 + l, 1200 + seq % 900, r.nodes[0].ip, 17_3651_0462 + seq), ("symptoms", "hccl_notify_timeout_EI0002"))
            r.emit(node, x, "        Possible Cause: 1. An exception occurs during the execution on some NPUs in the cluster. As a result, collective communication operation failed.2. The execution speed on some NPU in the cluster is too slow to complete a communication operation within the timeout interval. (default 1800s, You can set the interval by using HCCL_EXEC_TIMEOUT.)3. The number of training samples of each NPU is inconsistent.4. Packet loss or other connectivity problems occur on the communication link.")
            r.emit(node, x, "        Solution: 1. If this error is reported on part of these ranks, check other ranks to see whether other errors have been reported earlier.2. If this error is reported for all ranks, check whether the error reporting time is consistent (the maximum difference must not exceed 1800s). If not, locate the cause or adjust the locate the cause or set the HCCL_EXEC_TIMEOUT environment variable to a larger value.3. Check whether the completion queue element (CQE) of the error exists in the plog(grep -rn 'error cqe'). If so, check the network connection status. (For details, see the TLS command and HCCN connectivity check examples.)4. Ensure that the number of training samples of each NPU is consistent.")
            r.emit(node, x, "        TraceBack (most recent call last):")
        return tt + 3

    def init_wait_fail(self, node, t, culprits):
        r = self.r
        P = self.P
        tt = t + 120
        for l in range(P["rpn"]):
            x = tt + 0.02 * l
            self.exc(node, l, x, self.frames_init() + [
                ("/home/work/MindSpeed-LLM/megatron/core/parallel_state.py", 612, "initialize_model_parallel", "group = torch.distributed.new_group("),
                (self.site + "/torch/distributed/distributed_c10d.py", 2260, "barrier", "work.wait()")],
                ["RuntimeError: HCCL function error: HcclGetRootInfo or HcclCommInitRootInfoConfig, error code is 7",
                 "[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR02200 DIST call hccl api failed." % (sec_ts(x + node.skew).replace(" ", "-"), self.pid(node, l), l, self.g(node, l))],
                "hccl_init_failed", "symptoms")
            r.emit(node, x, "EI0006: [PID: %d] %s Getting socket times out. Reason: 1. The remote does not initiate a connect request. some NPUs in the cluster are abnormal.    2. The remote does not initiate a connect request because the collective communication operator is started too late or is not started by some NPU in the cluster.    3. The communication link is disconnected. (For example, the IP addresses are not on the same network segment or the TLS configurations are inconsistent.)" % (
                self.pid(node, l), cann_ts(x + node.skew)), ("symptoms", "hccl_socket_timeout_EI0006"))
            r.emit(node, x, "        Solution: 1. Check the rank service processes with other errors or no errors in the cluster.2. If this error is reported for all NPUs, check whether the time difference between the earliest and latest errors is greater than the connect timeout interval (120s by default). If so, adjust the timeout interval by using the HCCL_CONNECT_TIMEOUT environment variable.3. Check the connectivity of the communication link between nodes. (For details, see the TLS command and HCCN connectivity check examples.)")
        return tt + 1

    def teardown(self, node, t, failures):
        r = self.r
        fl = [(lr, c, self.pid(node, lr)) for lr, c in failures]
        others = [l for l in range(self.P["rpn"]) if l not in [f[0] for f in failures]]
        for l in others:
            r.emit(node, t, "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process %d closing signal SIGTERM" % self.pid(node, l))
        t += 2
        lr, c, pid = fl[0]
        r.emit(node, t, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: %d) local_rank: %d (pid: %d) of binary: /usr/local/python3.10.14/bin/python3.10" % (c, lr, pid),
               ("symptoms", "torchrun_worker_failed"))
        for line in torchrun_box(r, node, t, fl, "pretrain_gpt.py", "/usr/local/python3.10.14/bin/torchrun", self.site):
            r.emit(node, t, line, ("symptoms", "torchrun_child_failed") if line.startswith("torch.distributed.elastic") else None)
        return t + 0.5

    def sched_cancel(self, node, t, reason, mark=None):
        pass

    def job_end(self, t, exits, first=None, node_fail=None, cancel=None):
        return t

    def finish(self, node, t):
        e = self.r.emit
        if node.idx == 0:
            e(node, t, "[after training is done] datetime: %s " % sec_ts(t + node.skew))
        if node is self.r.nodes[-1]:
            s = "-" * 115
            e(node, t, s)
            e(node, t, " validation loss at the end of training for test data | lm loss value: %.6E | lm loss PPL: %.6E | " % (self.r.final_loss, 2.718281828 ** self.r.final_loss))
            e(node, t, s)
        return t + 1


# ======================================================================
class Horovod(Style):
    name = "horovod-mpirun"
    framework = "horovod"
    launcher = "mpirun"
    fam = "cuda"
    coll_timeout = 600.0

    def __init__(self, run):
        super().__init__(run)
        self.site = "/opt/conda/lib/python3.10/site-packages"

    def loggers(self):
        return [self.r.nodes[0]]

    def X(self, node, l, msg, stream="stderr"):
        return "[1,%d]<%s>:%s" % (self.g(node, l), stream, msg)

    def L(self, node, l, t, level, msg):
        return self.X(node, l, "%s - %s - train_hvd.py:%d - %s" % (py_ts(t + node.skew), level, 180 + len(msg) % 97, msg), "stdout")

    def H(self, node, l, t, lev, src, msg):
        d = dt_of(t + node.skew)
        return self.X(node, l, "[%s.%06d: %s /tmp/pip-install-8f2kq1/horovod_3e1c/horovod/common/%s] %s" % (
            d.strftime("%Y-%m-%d %H:%M:%S"), d.microsecond, lev, src, msg))

    def preamble(self, node, t):
        r, P = self.r, self.P
        e = r.emit
        if node.idx == 0 and P["noise_refused"]:
            for m in ["--------------------------------------------------------------------------",
                      "WARNING: There was an error initializing an OpenFabrics device.",
                      "",
                      "  Local host:   %s" % node.name,
                      "  Local device: mlx5_0",
                      "--------------------------------------------------------------------------"]:
                e(node, t, m)
        node.marks["init"] = t + 0.5
        t += 2
        for l in range(P["rpn"]):
            if P["noise_warn"]:
                e(node, t, self.X(node, l, "%s/torch/cuda/amp/grad_scaler.py:126: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead." % self.site))
                e(node, t, self.X(node, l, "  warnings.warn("))
        for l in range(P["rpn"]):
            x = t + 1 + 0.01 * l
            pfx = "%s:%d:%d [%d] " % (node.name, self.pid(node, l), self.pid(node, l), l)
            e(node, x, self.X(node, l, pfx + "NCCL INFO Bootstrap : Using eth0:%s<0>" % node.ip, "stdout"))
            e(node, x, self.X(node, l, pfx + "NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.", "stdout"))
            e(node, x, self.X(node, l, pfx + "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB eth0:%s<0>" % node.ip, "stdout"))
        if node.idx == 0:
            e(node, t, self.L(node, 0, t, "INFO", "Horovod initialized: size=%d local_size=%d" % (P["world"], P["rpn"])))
            e(node, t, self.X(node, 0, "%s:%d:%d [0] NCCL INFO NCCL version 2.18.5+cuda12.2" % (node.name, self.pid(node, 0), self.pid(node, 0)), "stdout"))
            e(node, t, self.L(node, 0, t, "INFO", "Loading model %s (%s params)" % (P["model_name"], format(P["params"], ","))))
            e(node, t + 0.6, self.L(node, 0, t + 0.6, "INFO", "Dataset %s: %d shards, seq_len=%d, per-rank batch %d" % (P["data_path"], P["n_shards"], P["seq"], P["lbs"])))
        node.marks["model"] = t + 0.5
        return t + 20

    def load_ckpt(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Restoring checkpoint %s/step_%d.pt" % (self.P["ckpt_dir"], step)))
        t += self.P["ckpt_load_s"]
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Broadcasting parameters and optimizer state from rank 0"))
        return t

    def train_start(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Starting training at step %d / %d" % (step, self.P["total"])))
        return t

    def step_line(self, node, t, step, loss, dt, first=False):
        P = self.P
        self.r.emit(node, t, self.L(node, 0, t, "INFO", "step %d/%d loss=%.4f lr=%.3e throughput=%.1f samples/s (%.3f s/it)" % (
            step, P["total"], loss, P["lr"] * (1 - step / (P["total"] * 1.1)), P["lbs"] * P["world"] / dt, dt)))

    def ckpt_begin(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Saving checkpoint to %s/step_%d.pt" % (self.P["ckpt_dir"], step)))

    def ckpt_end(self, node, t, step, dur):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Checkpoint saved (%.2f s)" % dur))

    def eval_lines(self, node, t, step, loss):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "eval step %d: val_loss=%.4f ppl=%.2f" % (step, loss + 0.04, 2.718281828 ** (loss + 0.04))))

    def frames_train(self):
        return [("/workspace/train_hvd.py", 412, "<module>", "main()"),
                ("/workspace/train_hvd.py", 371, "main", "loss = train_step(model, optimizer, batch, scaler)"),
                ("/workspace/train_hvd.py", 244, "train_step", "scaler.scale(loss).backward()")]

    def frames_data(self):
        return [("/workspace/train_hvd.py", 412, "<module>", "main()"),
                ("/workspace/train_hvd.py", 365, "main", "batch = next(train_iter)"),
                (self.site + "/torch/utils/data/dataloader.py", 701, "__next__", "data = self._next_data()"),
                (self.site + "/torch/utils/data/dataloader.py", 1465, "_next_data", "return self._process_data(data)")]

    def frames_ckpt(self):
        return [("/workspace/train_hvd.py", 412, "<module>", "main()"),
                ("/workspace/train_hvd.py", 388, "main", "save_checkpoint(model, optimizer, step, args.ckpt_dir)"),
                ("/workspace/train_hvd.py", 131, "save_checkpoint", "torch.save(state, path)"),
                (self.site + "/torch/serialization.py", 849, "save", "with _open_zipfile_writer(f) as opened_zipfile:")]

    def frames_init(self):
        return [("/workspace/train_hvd.py", 412, "<module>", "main()"),
                ("/workspace/train_hvd.py", 298, "main", "hvd.init()")]

    def mpirun_box(self, t, g, code, sig=None, culprit=None):
        r = self.r
        head = r.nodes[0]
        e = lambda m, mk=None: r.emit(head, t, m, mk)
        if sig:
            e("--------------------------------------------------------------------------")
            e("Primary job  terminated normally, but 1 process returned")
            e("a non-zero exit code. Per user-direction, the job has been aborted.")
            e("--------------------------------------------------------------------------")
            e("--------------------------------------------------------------------------")
            e("mpirun noticed that process rank %d with PID %d on node %s exited on signal %d (%s)." % (
                g, r.nodes[g // self.P["rpn"]].pid0 + 1 + g % self.P["rpn"], r.nodes[g // self.P["rpn"]].name, sig[0], sig[1]), ("symptoms", "mpirun_rank_signal"))
            e("--------------------------------------------------------------------------")
        else:
            e("--------------------------------------------------------------------------")
            e("Primary job  terminated normally, but 1 process returned")
            e("a non-zero exit code. Per user-direction, the job has been aborted.")
            e("--------------------------------------------------------------------------")
            e("--------------------------------------------------------------------------")
            e("mpirun detected that one or more processes exited with non-zero status, thus causing")
            e("the job to be terminated. The first process to do so was:")
            e("")
            e("  Process name: [[%d,1],%d]" % (self.P["mpi_jobid"], g), ("symptoms", "mpirun_first_failed"))
            e("  Exit code:    %d" % code)
            e("--------------------------------------------------------------------------")

    def peer_fail(self, node, t, culprits, mode, seq):
        r = self.r
        P = self.P
        cl = r.culprit_l if r.culprit_l is not None else 0
        cr = [c.idx * P["rpn"] + cl for c in culprits]
        if node.idx == 0 and cr:
            for k in range(3 if mode != "crash" else 1):
                tt = t + 60 * (k + 1)
                r.emit(node, tt, self.H(node, 0, tt, "W", "stall_inspector.cc:107", "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. "),
                       ("symptoms", "horovod_stall_warning"))
                r.emit(node, tt, self.X(node, 0, "Missing ranks:"))
                for g in cr:
                    r.emit(node, tt, self.X(node, 0, "%d: [DistributedAdamW.Allreduce.grad.transformer.h.%d.attn.c_attn.weight, DistributedAdamW.Allreduce.grad.transformer.h.%d.mlp.c_fc.weight ...]" % (
                        g, seq % P["layers"], seq % P["layers"])), ("symptoms", "horovod_missing_ranks"))
        tt = t + (self.coll_timeout if mode != "crash" else 61)
        for l in range(P["rpn"]):
            if r.is_silent(node, l):
                continue
            self.exc(node, l, tt + 0.01 * l, self.frames_train() + [
                (self.site + "/horovod/torch/optimizer.py", 271, "synchronize", "output = synchronize(handle)"),
                (self.site + "/horovod/torch/mpi_ops.py", 1170, "synchronize", "raise HorovodInternalError(e)")],
                ["horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, you should see the exception in the log before the first shutdown message."],
                "horovod_shut_down", "symptoms")
        return tt + 1

    def init_wait_fail(self, node, t, culprits):
        return t

    def teardown(self, node, t, failures):
        return t

    def sched_cancel(self, node, t, reason, mark=None):
        pass

    def job_end(self, t, exits, first=None, node_fail=None, cancel=None):
        return t

    def finish(self, node, t):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Training finished: %d steps, final loss %.4f" % (self.P["total"], self.r.final_loss)))
        return t + 1


# ======================================================================
class MaxText(Style):
    name = "maxtext-jax"
    framework = "maxtext"
    launcher = "slurm-srun"
    fam = "jax"
    coll_timeout = 100.0

    def __init__(self, run):
        super().__init__(run)
        self.site = "/usr/local/lib/python3.10/dist-packages"

    def vis(self, node):
        return [0]

    def tid(self, node):
        return 139_800_000_000_000 + node.pid0 * 4096

    def I(self, node, t, lev, src, msg):
        return "%s%s %d %s] %s" % (lev, glog_ts(t + node.skew), self.tid(node) % 10**15, src, msg)

    def Xla(self, node, t, lev, src, msg):
        d = dt_of(t + node.skew)
        return "%s.%06d: %s %s] %s" % (d.strftime("%Y-%m-%d %H:%M:%S"), d.microsecond, lev, src, msg)

    def preamble(self, node, t):
        r, P = self.r, self.P
        e = r.emit
        if P["noise_warn"]:
            e(node, t, "E0000 00:00:%d.%06d %d cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered" % (int(t), node.idx * 37 % 10**6, node.pid0))
            e(node, t, "E0000 00:00:%d.%06d %d cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered" % (int(t), node.idx * 41 % 10**6, node.pid0))
        t += 1
        if node.idx == 0:
            e(node, t, self.I(node, t, "I", "distributed.py:114", "Starting JAX distributed service on [::]:%d" % P["coord_port"]))
        e(node, t, self.I(node, t, "I", "distributed.py:126", "Connecting to JAX distributed service on %s:%d" % (r.nodes[0].name, P["coord_port"])))
        t += 4
        for m in ["System Information: Jax Version: %s" % P["jax"], "System Information: Jax Lib Version: %s" % P["jax"],
                  "System Information: Jax Backend: PJRT C API", "Num_devices: %d, shape (1, %d, 1, 1, 1, %d, 1, 1)" % (P["world"], P["world"] // P["tp"], P["tp"]),
                  "Setting up checkpoint logger...", "Creating checkpoint manager with ocdbt=True and zarr3=True", "Checkpoint manager created!"]:
            t += 0.0731 + (node.pid0 % 97) * 0.0001
            e(node, t, self.I(node, t, "I", "max_utils.py:%d" % (300 + len(m)), m))
        if P["noise_warn"]:
            e(node, t, self.Xla(node, t, "W", "external/xla/xla/service/gpu/nvptx_compiler.cc:893", "The NVIDIA driver's CUDA version is 12.2 which is older than the ptxas CUDA version (12.6.77). Because the driver is older than the ptxas version, XLA is disabling parallel compilation, which may slow down compilation. You should update your NVIDIA driver or use the NVIDIA-provided CUDA forward compatibility packages."))
        e(node, t, self.I(node, t, "I", "train.py:741", "number parameters: %.3f billion" % (P["params"] / 1e9)))
        node.marks["data"] = t + 0.5
        return t + 30

    def load_ckpt(self, node, t, step):
        self.r.emit(node, t, self.I(node, t, "I", "checkpointing.py:189", "restoring from this run's directory step %d" % step))
        node.marks["model"] = t + 1
        t += self.P["ckpt_load_s"]
        self.r.emit(node, t, self.I(node, t, "I", "checkpoint_manager.py:1377", "[process=%d][thread=MainThread] Restored checkpoint at step %d in %.2fs" % (node.idx, step, self.P["ckpt_load_s"])))
        return t

    def train_start(self, node, t, step):
        self.r.emit(node, t, self.I(node, t, "I", "train.py:826", "Compiling train_step... first step will be slow"))
        return t + 25

    def step_line(self, node, t, step, loss, dt, first=False):
        P = self.P
        self.r.emit(node, t, self.I(node, t, "I", "metric_logger.py:161", "completed step: %d, seconds: %.3f, TFLOP/s/device: %.3f, Tokens/s/device: %.3f, total_weights: %d, loss: %.3f" % (
            step, dt, P["flop_tok"] * P["lbs"] * P["seq"] / dt / 1e12, P["lbs"] * P["seq"] / dt, P["lbs"] * P["seq"] * P["world"], loss)))

    def ckpt_begin(self, node, t, step):
        self.r.emit(node, t, self.I(node, t, "I", "checkpoint_manager.py:1289", "[process=%d] Saving checkpoint at step %d" % (node.idx, step)))

    def ckpt_end(self, node, t, step, dur):
        self.r.emit(node, t, self.I(node, t, "I", "async_checkpointer.py:432", "Finished blocking save. Time taken: %.6fs. Continuing background save to %s/%d." % (dur, self.P["ckpt_dir"], step)))
        self.r.emit(node, t, self.I(node, t, "I", "checkpointing.py:366", "saved a checkpoint at step %d" % step))

    def eval_lines(self, node, t, step, loss):
        self.r.emit(node, t, self.I(node, t, "I", "train.py:1003", "eval metrics after step: %d, loss=%.3f, total_weights=%d" % (step, loss + 0.04, self.P["lbs"] * self.P["seq"] * self.P["world"] * 4)))

    def frames_train(self):
        return [("/deps/MaxText/train.py", 1127, "<module>", "app.run(main)"),
                (self.site + "/absl/app.py", 254, "_run_main", "sys.exit(main(argv))"),
                ("/deps/MaxText/train.py", 1123, "main", "train_loop(config)"),
                ("/deps/MaxText/train.py", 956, "train_loop", "state, metrics = p_train_step(state, example_batch, nextrng)")]

    def frames_data(self):
        return [("/deps/MaxText/train.py", 1123, "main", "train_loop(config)"),
                ("/deps/MaxText/train.py", 944, "train_loop", "example_batch = load_next_batch(data_iterator, example_batch, config)"),
                ("/deps/MaxText/input_pipeline/_tfds_data_processing.py", 211, "__next__", "return next(self.iterator)")]

    def frames_ckpt(self):
        return [("/deps/MaxText/train.py", 1123, "main", "train_loop(config)"),
                ("/deps/MaxText/train.py", 972, "train_loop", "if save_checkpoint(checkpoint_manager, int(step), state, config.dataset_type, data_iterator, config):"),
                ("/deps/MaxText/checkpointing.py", 602, "save_checkpoint", "return checkpoint_manager.save("),
                (self.site + "/orbax/checkpoint/checkpoint_manager.py", 1330, "save", "self._checkpointer.save(save_directory, args=args)")]

    def frames_init(self):
        return [("/deps/MaxText/train.py", 1127, "<module>", "app.run(main)"),
                ("/deps/MaxText/train.py", 1112, "main", "max_utils.maybe_initialize_jax_distributed_system(config)"),
                (self.site + "/jax/_src/distributed.py", 196, "initialize", "global_state.initialize(coordinator_address, num_processes, process_id,")]

    def peer_fail(self, node, t, culprits, mode, seq):
        r = self.r
        tasks = "\n".join("/job:jax_worker/replica:0/task:%d" % c.idx for c in culprits)
        if mode == "hang":
            return t  # heartbeats continue: nothing until the scheduler kills the job
        if culprits and culprits[0].idx == 0:
            x = t + 0.4 + node.idx * 0.002
            r.emit(node, x, self.I(node, x, "E", "coordination_service_agent.cc:332", "Polled an error from coordination service (this can be an error from this or another task)."), ("symptoms", "jax_polled_error"))
            r.emit(node, x, self.I(node, x, "F", "client.h:77", "Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted unexpectedly or this task is experiencing network issues. Check earlier logs from this task and the leader (usually slice 0 task 0) for more details."),
                   ("symptoms", "jax_leader_unreachable"))
            r.emit(node, x, "Additional GRPC error information from remote target coordination_service while calling /tensorflow.CoordinationService/PollForError:")
            r.emit(node, x, ":UNKNOWN:Error received from peer  {grpc_message:\"Socket closed\", grpc_status:14}")
            r.emit(node, x, "*** Check failure stack trace: ***")
            r.emit(node, x, "Fatal Python error: Aborted")
            return x + 1
        tt = t + self.coll_timeout
        if node.idx == 0:
            for c in culprits:
                r.emit(node, tt, self.Xla(node, tt, "E", "external/xla/xla/tsl/distributed_runtime/coordination/coordination_service.cc:1170",
                                          "/job:jax_worker/replica:0/task:%d has been set to ERROR in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:%d heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check the task logs for an earlier error to debug further. [type.googleapis.com/tensorflow.CoordinationServiceError='']" % (c.idx, c.idx)),
                       ("symptoms", "jax_heartbeat_timeout"))
        x = tt + 0.5 + node.idx * 0.001
        r.emit(node, x, self.I(node, x, "E", "coordination_service_agent.cc:332", "Polled an error from coordination service (this can be an error from this or another task)."), ("symptoms", "jax_polled_error"))
        c0 = culprits[0].idx
        r.emit(node, x, self.I(node, x, "F", "client.h:77", "Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: Task /job:jax_worker/replica:0/task:%d heartbeat timeout. This indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check the task logs for an earlier error to debug further. [type.googleapis.com/tensorflow.CoordinationServiceError='']" % c0),
               ("symptoms", "jax_terminating_fatal"))
        r.emit(node, x, "*** Check failure stack trace: ***")
        for k, fn in enumerate(["absl::lts_20230802::log_internal::LogMessageFatal::~LogMessageFatal()", "xla::DistributedRuntimeClient::~DistributedRuntimeClient()", "tsl::CoordinationServiceAgentImpl::StartPollingForError()"]):
            r.emit(node, x, "    @     0x7f%010x  %s" % (0x3a1b2c0000 + k * 0x1234, fn))
        r.emit(node, x, "Fatal Python error: Aborted")
        return x + 1

    def init_wait_fail(self, node, t, culprits):
        r = self.r
        if node.idx != 0:
            return t + 900
        tt = t + 900
        names = "\n".join("/job:jax_worker/replica:0/task:%d" % c.idx for c in culprits)
        self.exc(node, 0, tt, self.frames_init() + [(self.site + "/jax/_src/distributed.py", 112, "initialize", "self.client.connect()")],
                 ["jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect. This usually happens because a task triggered the barrier too early or too slowly. Please look at the task logs (both timed out and first task) to debug further.",
                  "# of tasks that reached the barrier: %d/%d." % (self.P["n_nodes"] - len(culprits), self.P["n_nodes"]),
                  "The first task at the barrier: /job:jax_worker/replica:0/task:0. Some timed out task names:"]
                 + ["/job:jax_worker/replica:0/task:%d" % c.idx for c in culprits], "jax_barrier_timeout", "symptoms")
        return tt + 1

    def teardown(self, node, t, failures):
        return t

    sched_cancel = Titan.sched_cancel
    job_end = Titan.job_end
    oom_kill_line = Titan.oom_kill_line

    def finish(self, node, t):
        self.r.emit(node, t, self.I(node, t, "I", "checkpoint_manager.py:1611", "[process=%d][thread=MainThread] Waiting for previous save to complete before closing." % node.idx))
        self.r.emit(node, t + 3, self.I(node, t + 3, "I", "checkpoint_manager.py:1629", "[process=%d][thread=MainThread] CheckpointManager closed." % node.idx))
        return t + 4


# ======================================================================
class Determined(Style):
    name = "determined"
    framework = "determined+torch"
    launcher = "det.launch.torch_distributed"
    fam = "cuda"
    coll_timeout = 1800.0

    def __init__(self, run):
        super().__init__(run)
        self.site = "/opt/conda/lib/python3.10/site-packages"

    def loggers(self):
        return [self.r.nodes[0]]

    def D(self, node, t, msg, rank=None):
        if node is None:
            return "[%s]          || %s" % (iso_ts(t), msg)
        rk = "" if rank is None else "[rank=%d] " % rank
        return "[%s] %s %s|| %s" % (iso_ts(t + node.skew), node.cid, rk, msg)

    def X(self, node, l, msg):
        return "[%s] %s [rank=%d] || %s" % (iso_ts(self.r.cur_t + node.skew), node.cid, self.g(node, l), msg)

    def exc(self, node, l, t, frames, finals, kind, role="indicators"):
        self.r.cur_t = t
        Style.exc(self, node, l, t, frames, finals, kind, role)

    def L(self, node, l, t, level, msg, logger="__main__"):
        return self.D(node, t, "%s: [%d] %s: %s" % (level, self.pid(node, l), logger, msg), self.g(node, l))

    def preamble(self, node, t):
        r, P = self.r, self.P
        e = r.emit
        if node.idx == 0:
            head = r.nodes[0]
            e(head, t, self.D(None, t, "INFO: Scheduling Trial %d (Experiment %d) (id: %d.%s.1)" % (P["trial"], P["exp"], P["exp"], P["alloc"])))
            e(head, t + 0.4, self.D(None, t + 0.4, "INFO: Trial %d (Experiment %d) was assigned to an agent" % (P["trial"], P["exp"])))
        t += 1
        e(node, t, self.D(node, t, "INFO: image already found, skipping pull phase: docker.io/determinedai/pytorch-ngc:0.38.0"))
        for k in range(2):
            e(node, t, self.D(node, t, "INFO: copying files to container: /run/determined"))
        e(node, t + 1, self.D(node, t + 1, "INFO: Resources for Trial %d (Experiment %d) have started" % (P["trial"], P["exp"])))
        t += 4
        e(node, t, self.D(node, t, "INFO: [%d] determined: detected %d gpus" % (node.pid0 - 40, P["rpn"])))
        if P["noise_refused"] and node.idx != 0:
            e(node, t, self.D(node, t, "WARNING: [%d] determined.common.api._session: failed to connect to master, retrying: HTTPConnectionPool(host='det-master', port=8080): Max retries exceeded with url: /api/v1/me (Caused by NewConnectionError(\"<urllib3.connection.HTTPConnection object at 0x7f%08x>: Failed to establish a new connection: [Errno 111] Connection refused\"))" % (node.pid0 - 40, node.pid0 * 313 % 10**8)))
        e(node, t + 1, self.D(node, t + 1, "INFO: [%d] determined.launch.torch_distributed: New trial runner in (container %s) on agent %s: {\"entrypoint\": \"python3 -m determined.launch.torch_distributed python3 train.py\", \"resources\": {\"slots_per_trial\": %d}}" % (
            node.pid0 - 40, node.cid, node.name, P["world"])))
        t += 2
        for m in ["", "*****************************************",
                  "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
                  "*****************************************"]:
            e(node, t, self.D(node, t, "W%s %d torch/distributed/run.py:793] %s" % (glog_ts(t + node.skew), node.pid0, m)))
        node.marks["init"] = t + 0.5
        node.marks["model"] = t + 4
        t += 3
        for l in range(P["rpn"]):
            if P["noise_warn"]:
                e(node, t, self.D(node, t, "%s/torch/distributed/fsdp/_init_utils.py:444: UserWarning: FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1." % self.site if P["world"] == 1 else
                                  "%s/transformers/tokenization_utils_base.py:1617: FutureWarning: `clean_up_tokenization_spaces` was not set. It will be set to `True` by default. This behavior will be depracted in transformers v4.45, and will be then set to `False` by default. For more details check this issue: https://github.com/huggingface/transformers/issues/31884" % self.site, self.g(node, l)))
                e(node, t, self.D(node, t, "  warnings.warn(", self.g(node, l)))
        if node.idx == 0:
            e(node, t, self.L(node, 0, t, "INFO", "Loading %s from %s" % (P["model_name"], P["hf_path"])))
            e(node, t + 20, self.L(node, 0, t + 20, "INFO", "Model loaded: %s parameters, FSDP over %d ranks" % (format(P["params"], ","), P["world"])))
        return t + 25

    def load_ckpt(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Restoring from checkpoint %s (steps_completed=%d)" % (self.P["det_ckpt"], step), "determined.core._checkpoint"))
        return t + self.P["ckpt_load_s"]

    def train_start(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Starting training from step %d (max_length=%d batches)" % (step, self.P["total"])))
        return t

    def step_line(self, node, t, step, loss, dt, first=False):
        P = self.P
        self.r.emit(node, t, self.L(node, 0, t, "INFO", "step %d: loss=%.4f lr=%.3e grad_norm=%.3f tokens/s=%.0f" % (
            step, loss, P["lr"] * (1 - step / (P["total"] * 1.1)), 0.4 + step % 9 * 0.02, P["lbs"] * P["seq"] * P["world"] / dt)))
        if node.idx == 0 and step % (P["k"] * 4) == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Reported training metrics for step %d" % step, "determined.core._train"))

    def ckpt_begin(self, node, t, step):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Saving checkpoint at step %d" % step))

    def ckpt_end(self, node, t, step, dur):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Reported checkpoint to master %s" % self.r.uuid("ck%d" % step), "determined.core._checkpoint"))

    def eval_lines(self, node, t, step, loss):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "validation at step %d: val_loss=%.4f" % (step, loss + 0.05)))
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Reported validation metrics for step %d" % step, "determined.core._train"))

    def frames_train(self):
        return [("/run/determined/workdir/train.py", 301, "<module>", "main(core_context, hparams)"),
                ("/run/determined/workdir/train.py", 262, "main", "loss = train_step(model, batch, optimizer)"),
                ("/run/determined/workdir/train.py", 171, "train_step", "outputs = model(**batch)")]

    def frames_data(self):
        return [("/run/determined/workdir/train.py", 301, "<module>", "main(core_context, hparams)"),
                ("/run/determined/workdir/train.py", 255, "main", "batch = next(train_iter)"),
                (self.site + "/torch/utils/data/dataloader.py", 701, "__next__", "data = self._next_data()")]

    def frames_ckpt(self):
        return [("/run/determined/workdir/train.py", 301, "<module>", "main(core_context, hparams)"),
                ("/run/determined/workdir/train.py", 283, "main", "with core_context.checkpoint.store_path(metadata, shard=True) as (path, uuid):"),
                ("/usr/lib/python3.10/contextlib.py", 142, "__exit__", "next(self.gen)"),
                (self.site + "/determined/core/_checkpoint.py", 617, "store_path", "self._storage_manager.upload(src=path, dst=storage_id, paths=paths)")]

    def frames_init(self):
        return [("/run/determined/workdir/train.py", 298, "<module>", "with det.core.init(distributed=distributed) as core_context:"),
                ("/run/determined/workdir/train.py", 290, "<module>", "distributed = det.core.DistributedContext.from_torch_distributed()"),
                (self.site + "/torch/distributed/distributed_c10d.py", 1520, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)")]

    def peer_fail(self, node, t, culprits, mode, seq):
        r = self.r
        tt = t + (self.coll_timeout if mode != "crash" else 3)
        for l in range(self.P["rpn"]):
            if r.is_silent(node, l):
                continue
            g = self.g(node, l)
            x = tt + 0.01 * l
            if tt - t < 10:
                cn = culprits[0]
                r.emit(node, x, self.D(node, x, "%s:%d:%d [%d] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:%s remoteGid ::ffff:%s" % (
                    node.name, self.pid(node, l), self.pid(node, l) + 60, l, cn.ip, 41000 + cn.idx, node.ip, cn.ip), g), ("symptoms", "nccl_ib_completion_error"))
                self.exc(node, l, x, self.frames_train() + [(self.site + "/torch/distributed/distributed_c10d.py", 2501, "all_reduce", "work.wait()")],
                         ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027, remote process exited or there was a network error, NCCL version 2.20.5",
                          "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."], "nccl_remote_error", "symptoms")
                continue
            d = dt_of(x + node.skew)
            pre = "[rank%d]:[E%s %s.%06d000 ProcessGroupNCCL.cpp:%d] " % (g, d.strftime("%m%d"), d.strftime("%H:%M:%S"), d.microsecond, 607)
            r.emit(node, x, self.D(node, x, pre + "[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, NumelIn=%d, NumelOut=%d, Timeout(ms)=1800000) ran for 1800%03d milliseconds before timing out." % (
                g, seq, self.P["numel"], self.P["numel"], 40 + l), g), ("symptoms", "nccl_watchdog_timeout"))
            r.emit(node, x, self.D(node, x, pre.replace(":607]", ":1664]") + "[PG 0 (default_pg) Rank %d] Exception (either an error or timeout) detected by watchdog at work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (g, seq, seq, seq - 1), g))
            r.emit(node, x, self.D(node, x, pre.replace(":607]", ":621]") + "[Rank %d] To avoid data inconsistency, we are taking the entire process down." % g, g))
        return tt + 2

    def init_wait_fail(self, node, t, culprits):
        tt = t + 1800
        for l in range(self.P["rpn"]):
            self.exc(node, l, tt + 0.01 * l, self.frames_init() + [(self.site + "/torch/distributed/rendezvous.py", 269, "_env_rendezvous_handler", "store = _create_c10d_store(")],
                     ["torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. %d/%d clients joined." % (self.P["world"] - len(culprits) * self.P["rpn"], self.P["world"])
                      if self.g(node, l) == 0 else "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg/0//cuda//0"],
                     "store_wait_timeout", "symptoms")
        return tt + 1

    def teardown(self, node, t, failures):
        r = self.r
        fl = [(lr, c, self.pid(node, lr)) for lr, c in failures]
        others = [l for l in range(self.P["rpn"]) if l not in [f[0] for f in failures]]
        for l in others:
            r.emit(node, t, self.D(node, t, "W%s %d torch/distributed/elastic/multiprocessing/api.py:858] Sending process %d closing signal SIGTERM" % (glog_ts(t + node.skew), node.pid0, self.pid(node, l))))
        t += 1.5
        lr, c, pid = fl[0]
        r.emit(node, t, self.D(node, t, "E%s %d torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: %d) local_rank: %d (pid: %d) of binary: /opt/conda/bin/python3" % (glog_ts(t + node.skew), node.pid0, c, lr, pid)),
               ("symptoms", "torchrun_worker_failed"))
        for line in torchrun_box(r, node, t, fl, "train.py", "/opt/conda/bin/torchrun", self.site):
            r.emit(node, t, self.D(node, t, line), ("symptoms", "torchrun_child_failed") if line.startswith("torch.distributed.elastic") else None)
        t += 1
        r.emit(node, t, self.D(node, t, "ERROR: crashed: resources failed with non-zero exit code: container failed with non-zero exit code: 1 (exit code 1)"), ("symptoms", "det_container_failed"))
        return t

    def sched_cancel(self, node, t, reason, mark=None):
        pass

    def job_end(self, t, exits, first=None, node_fail=None, cancel=None):
        head = self.r.nodes[0]
        if node_fail is not None:
            self.r.emit(head, t, self.D(None, t, "ERROR: Trial %d (Experiment %d) was terminated: agent %s failed: agent closed with error: agent heartbeat timeout" % (self.P["trial"], self.P["exp"], node_fail.name)),
                        ("symptoms", "det_agent_lost"))
            t += 1
        self.r.emit(head, t, self.D(None, t, "ERROR: Trial %d (Experiment %d) was terminated: allocation failed: resources failed with non-zero exit code: container failed with non-zero exit code: 1 (exit code 1)" % (self.P["trial"], self.P["exp"])),
                    ("symptoms", "det_trial_terminated"))
        return t

    def finish(self, node, t):
        if node.idx == 0:
            self.r.emit(node, t, self.L(node, 0, t, "INFO", "Training complete after %d steps" % self.P["total"]))
        t += 3
        self.r.emit(node, t, self.D(node, t, "I%s %d torch/distributed/elastic/agent/server/api.py:879] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish." % (glog_ts(t + node.skew), node.pid0)))
        self.r.emit(node, t + 1, self.D(node, t + 1, "I%s %d torch/distributed/elastic/agent/server/api.py:946] Done waiting for other agents. Elapsed: 0.%02d seconds" % (glog_ts(t + 1 + node.skew), node.pid0, 3 + node.idx % 90)))
        if node.idx == 0:
            self.r.emit(node, t + 3, self.D(None, t + 3, "INFO: Trial %d (Experiment %d) was terminated: allocation stopped after resources exited successfully with a zero exit code" % (self.P["trial"], self.P["exp"])))
        return t


STYLES = {c.name: c for c in (Titan, MindSpeed, Horovod, MaxText, Determined)}
