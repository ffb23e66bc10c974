"""Framework and launcher text styles (healthy-run wording)."""
from common import hms, ts_glog, ts_glog_us, ts_py, ts_sec

BAR = "*" * 41


# ----------------------------------------------------------------------------- launcher
def agent_log(S, node, lvl, src, msg, t=None):
    """torch.distributed.elastic agent log line in the wording of the configured torch version"""
    t = S.lt(node, t)
    if S.c.torch in ("2.4", "2.5"):
        return "%s %d torch/distributed/%s] %s" % (ts_glog_us(t, lvl[0]), S.pid(node, -1), src, msg)
    name = src.split(".py")[0].replace("/", ".")
    return "[%s] torch.distributed.%s: [%s] %s" % (ts_py(t), name, {"W": "WARNING", "E": "ERROR", "I": "INFO"}[lvl[0]], msg)


def launch_start(S):
    c = S.c
    for i in range(S.n):
        h = S.nodes[i].host
        if c.launcher in ("srun", "srun-torchrun") and i == 0:
            S.out(i, "SLURM_JOB_ID=%d SLURM_NNODES=%d SLURM_JOB_NODELIST=%s" % (c.slurm_job, S.n, _nodelist(S)))
            S.out(i, "Starting job %d at %s" % (c.slurm_job, ts_sec(S.lt(i))))
        if c.launcher == "pdsh":
            if i == 0:
                S.out(0, "[%s] [INFO] [runner.py:463:main] Using IP address of %s for node %s" % (ts_py(S.lt(0)), S.nodes[0].ip, h), raw=True)
                S.out(0, "[%s] [INFO] [multinode_runner.py:80:get_cmd] Running on the following workers: %s" % (ts_py(S.lt(0)), ",".join(n.host for n in S.nodes[:6]) + (",..." if S.n > 6 else "")), raw=True)
                S.out(0, "[%s] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w %s export PYTHONPATH=%s; cd %s; /usr/bin/python -u -m deepspeed.launcher.launch --world_info=eyJ... --node_rank=%%n --master_addr=%s --master_port=%d %s --deepspeed ds_config.json" % (ts_py(S.lt(0)), ",".join(n.host for n in S.nodes[:3]) + ",...", c.repo, c.repo, S.nodes[0].ip, c.master_port, c.script), raw=True)
            S.out(i, "[%s] [INFO] [launch.py:146:main] WORLD INFO DICT: {'%s': [%s], ...}" % (ts_py(S.lt(i)), S.nodes[0].host, ", ".join(str(x) for x in range(c.rpn))))
            S.out(i, "[%s] [INFO] [launch.py:152:main] nnodes=%d, num_local_procs=%d, node_rank=%d" % (ts_py(S.lt(i)), S.n, c.rpn, i))
            S.out(i, "[%s] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class 'list'>, {...})" % ts_py(S.lt(i)))
            S.out(i, "[%s] [INFO] [launch.py:164:main] dist_world_size=%d" % (ts_py(S.lt(i)), c.world))
            S.out(i, "[%s] [INFO] [launch.py:166:main] Setting CUDA_VISIBLE_DEVICES=%s" % (ts_py(S.lt(i)), ",".join(str(x) for x in range(c.rpn))))
            for lr in range(c.rpn):
                S.out(i, "[%s] [INFO] [launch.py:256:main] process %d spawned with command: ['/usr/bin/python', '-u', '%s', '--local_rank=%d', '--deepspeed', 'ds_config.json']" % (ts_py(S.lt(i)), S.pid(i, lr), c.script, lr))
        if c.launcher == "mpirun" and i == 0:
            S.out(i, "Warning: Permanently added '%s' (ED25519) to the list of known hosts." % S.nodes[min(1, S.n - 1)].ip)
        if S.agent:
            S.out(i, agent_log(S, i, "W", "run.py:%d" % (793 if c.torch >= "2.4" else 757), ""))
            S.out(i, BAR)
            S.out(i, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
            S.out(i, BAR)
            if S.r.random() < 0.3:
                S.out(i, agent_log(S, i, "W", "elastic/rendezvous/dynamic_rendezvous.py:1134", "The node '%s_%d_0' has failed to send a keep-alive heartbeat to the rendezvous 'llm-%d' due to an error of type RendezvousTimeoutError." % (S.nodes[i].host, S.pid(i, -1), c.slurm_job)))
    S.adv(S.r.uniform(3, 15))


def _nodelist(S):
    hs = [n.host for n in S.nodes]
    return ",".join(hs[:4]) + (",..." if len(hs) > 4 else "")


def launch_ok(S, nodes=None):
    c = S.c
    for i in (range(S.n) if nodes is None else nodes):
        if S.agent:
            S.out(i, agent_log(S, i, "I", "elastic/agent/server/api.py:%d" % (879 if c.torch >= "2.4" else 846), "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish."))
            S.out(i, agent_log(S, i, "I", "elastic/agent/server/api.py:%d" % (932 if c.torch >= "2.4" else 897), "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish"))
            S.out(i, agent_log(S, i, "I", "elastic/agent/server/api.py:%d" % (946 if c.torch >= "2.4" else 911), "Done waiting for other agents. Elapsed: %.7f seconds" % S.r.uniform(0.001, 3)))
        if c.launcher == "pdsh":
            S.out(i, "[%s] [INFO] [launch.py:351:main] Process %d exits successfully." % (ts_py(S.lt(i)), S.pid(i, 0)))
    if c.launcher in ("srun", "srun-torchrun") and nodes is None:
        S.out(0, "Job %d finished at %s" % (c.slurm_job, ts_sec(S.lt(0))))


# ----------------------------------------------------------------------------- NCCL init
def nccl_init(S):
    c = S.c
    if not c.nccl_debug:
        return
    for i in range(S.n):
        h = S.nodes[i].host
        for lr in range(c.rpn):
            g = S.g(i, lr)
            pid = S.pid(i, lr)
            pre = "%s:%d:%d [%d] NCCL INFO " % (h, pid, pid, lr)
            if g == 0:
                S.out(i, pre + "Bootstrap : Using eth0:%s<0>" % S.nodes[i].ip, rank=g)
                S.out(i, pre + "NET/Plugin: No plugin found (libnccl-net.so)", rank=g)
                S.out(i, pre + "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so", rank=g)
                S.out(i, pre + "cudaDriverVersion 12040", rank=g)
                S.out(i, "NCCL version %s+cuda12.4" % c.nccl_ver, rank=g)
            if lr == 0 or g == 0:
                S.out(i, pre + "NCCL_SOCKET_IFNAME set by environment to eth0", rank=g)
                S.out(i, pre + "NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2,mlx5_3", rank=g)
                S.out(i, pre + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:%s<0>" % S.nodes[i].ip, rank=g)
                S.out(i, pre + "Using network IB", rank=g)
            S.out(i, pre + "comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init START" % (0x55d0c0000000 + g * 4096, g, c.world, lr, lr, [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb][lr % 8], 0x7ac31f2e9b1d0000 + S.c.slurm_job), rank=g)
            if lr == 0:
                S.out(i, pre + "Setting affinity for GPU %d to ffff,ffffffff" % lr, rank=g)
            if g == 0:
                S.out(i, pre + "Channel 00/32 : " + "".join("%4d" % x for x in range(min(c.world, 16))), rank=g)
            S.out(i, pre + "Trees [0] %d/-1/-1->%d->%d [1] %d/-1/-1->%d->%d" % ((g + 1) % c.world, g, (g - 1) % c.world, (g + 1) % c.world, g, (g - 1) % c.world), rank=g)
            if lr == 0 and S.r.random() < 0.5:
                S.out(i, "%s:%d:%d [%d] NCCL INFO Channel 02/0 : %d[%d] -> %d[%d] [receive] via NET/IB/1/GDRDMA" % (h, pid, pid + 41, lr, (g - 1) % c.world, (lr - 1) % c.rpn, g, lr), rank=g)
            nch = S.nch if hasattr(S, "nch") else None
            if nch is None:
                nch = S.nch = S.r.choice([2, 4, 8, 16])
            for ch in range(nch):
                if lr + 1 < c.rpn:
                    S.out(i, "%s:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC/read" % (h, pid, pid + 41, lr, ch, g, lr, g + 1, lr + 1), rank=g)
                else:
                    S.out(i, "%s:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA" % (h, pid, pid + 41, lr, ch, g, lr, (g + 1) % c.world, 0, ch % 4), rank=g)
            S.out(i, pre + "Connected all rings", rank=g)
            S.out(i, pre + "Connected all trees", rank=g)
            S.out(i, pre + "threadThresholds 8/8/64 | %d/8/64 | 512 | 512" % (c.world * 8), rank=g)
            S.out(i, pre + "comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init COMPLETE" % (0x55d0c0000000 + g * 4096, g, c.world, lr, lr, [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb][lr % 8], 0x7ac31f2e9b1d0000 + S.c.slurm_job), rank=g)
    S.adv(S.r.uniform(2, 20))


def rank_warnings(S):
    """benign python warnings every rank prints at start-up"""
    c = S.c
    pool = [
        ("%s/torch/distributed/distributed_c10d.py:%d: UserWarning: barrier(): using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning." % (c.site, 4631), "  warnings.warn(  # warn only once"),
        ("%s/transformers/utils/generic.py:441: FutureWarning: `torch.utils._pytree._register_pytree_node` is deprecated. Please use `torch.utils._pytree.register_pytree_node` instead." % c.site, "  _torch_pytree._register_pytree_node("),
        ("%s/torch/cuda/__init__.py:%d: UserWarning: Can't initialize NVML" % (c.site, 654), "  warnings.warn(\"Can't initialize NVML\")"),
        ("%s/apex/transformer/tensor_parallel/cross_entropy.py:%d: DeprecationWarning: `apex.transformer` is deprecated and will be removed in a future release." % (c.site, 17), "  warnings.warn("),
        ("%s/torch/_utils.py:831: UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()" % c.site, "  return self.fget.__get__(instance, owner)()"),
    ]
    k = S.warn_pick if hasattr(S, "warn_pick") else None
    if k is None:
        k = S.warn_pick = S.r.sample(range(len(pool)), S.r.randint(1, 3))
    for i in range(S.n):
        for lr in range(c.rpn):
            for j in k:
                a, b = pool[j]
                S.out(i, a, rank=S.g(i, lr))
                S.out(i, b, rank=S.g(i, lr))


def socket_warn(S):
    """benign IPv6 c10d client warning printed by some ranks at start"""
    c = S.c
    for i in range(S.n):
        if S.r.random() < 0.5:
            for lr in range(c.rpn):
                g = S.g(i, lr)
                if c.torch >= "2.3":
                    S.out(i, "[W%s socket.cpp:697] [c10d] The IPv6 network addresses of (%s, %d) cannot be retrieved (gai error: -2 - Name or service not known)." % (ts_glog(S.lt(i) + S.r.uniform(0, 0.08), ""), S.nodes[0].host, c.master_port), rank=g)
                else:
                    S.out(i, "[W socket.cpp:663] [c10d] The client socket has failed to connect to [%s]:%d (errno: 99 - Cannot assign requested address)." % (S.nodes[0].host, c.master_port), rank=g)


# ----------------------------------------------------------------------------- base style
class Base:
    phases = ("initialization", "model_loading", "data_loading")
    name = "base"

    def __init__(self, S):
        self.S = S
        self.c = S.c
        r = S.r
        self.loss = r.uniform(2.1, 3.4) if self.c.resume else r.uniform(9.5, 11.0)
        self.lr = r.choice([3e-4, 1.5e-4, 2e-5, 1e-5, 6e-4])

    # rank that prints progress
    def progress_rank(self):
        return 0

    def next_loss(self, it):
        S = self.S
        self.loss = max(1.2, self.loss * (0.9995 if self.loss < 4 else 0.99) + S.r.uniform(-0.03, 0.03))
        return self.loss

    def lr_at(self, it):
        c = self.c
        return self.lr * (0.1 + 0.9 * max(0.0, 1 - it / max(1, c.train_iters * 1.2)))

    def benign_pool(self, node):
        c = self.c
        return [
            "%s/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.\n  return fn(*args, **kwargs)" % c.site,
            "%s/torch/_dynamo/eval_frame.py:600: FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., device_type='cuda')` instead." % c.site,
            "NCCL WARN NET/IB : Got async event : GID table change",
            "[W ProcessGroupNCCL.cpp:1856] Warning: 0NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. (function operator())",
            "WARNING: retrying metrics push to http://prometheus-pushgateway:9091 (attempt 1/3): [Errno 111] Connection refused",
            "metrics push ok after 1 retry",
        ]

    def heartbeat(self, node, it, dt, slow=1.0):
        S, c = self.S, self.c
        g = S.g(node, 0)
        w = c.hb_word
        if w == 0:
            return "[host %s] step %d | fwd+bwd %.1f ms | data %.1f ms | host mem %.1f GiB" % (S.nodes[node].host, it, dt * 900 * slow, S.r.uniform(0.5, 9), S.r.uniform(180, 420))
        if w == 1:
            return "heartbeat rank=%d it=%d step_time=%.3fs" % (g, it, dt * slow)
        if w == 2:
            return "%s | local_rank0 | iter %d | %.2f s/it | gpu_mem %.1fG" % (ts_sec(S.lt(node)), it, dt * slow, S.r.uniform(50, 76))
        return "[%s] perf: iteration %d took %.0f ms (rank %d)" % (ts_py(S.lt(node)), it, dt * 1000 * slow, g)

    def frames(self, stage):
        return [("%s/%s" % (self.c.repo, self.c.script), 188, "<module>", "main()")]

    def initialization(self):
        self.init()
        if self.c.fw != "mindspeed":
            rank_warnings(self.S)


# ----------------------------------------------------------------------------- Megatron
class Megatron(Base):
    name = "megatron"
    phases = ("initialization", "model_loading", "data_loading")

    def progress_rank(self):
        return self.c.world - 1

    def log0(self, text, label=None):
        self.S.out(0, text, rank=0, label=label)

    def init(self):
        S, c = self.S, self.c
        if c.tp > 0 and c.heads % c.tp:
            pass
        self.log0("using world size: %d, data-parallel size: %d, context-parallel size: 1, tensor-model-parallel size: %d, pipeline-model-parallel size: %d " % (c.world, c.dp, c.tp, c.pp))
        self.log0("using torch.bfloat16 for parameters ...")
        self.log0("------------------------ arguments ------------------------")
        args = [("accumulate_allreduce_grads_in_fp32", "False"), ("adam_beta1", "0.9"), ("adam_beta2", "0.95"),
                ("bf16", "True"), ("clip_grad", "1.0"), ("data_path", "['%s/%s_text_document']" % (c.data_dir, c.model.split('-')[0])),
                ("distributed_backend", "nccl" if c.fw == "megatron" else "hccl"), ("distributed_timeout_minutes", str(c.timeout_s // 60)),
                ("eval_interval", str(c.eval_interval or 1000000)), ("eval_iters", "10"), ("global_batch_size", str(c.gbs)),
                ("hidden_size", "4096"), ("load", c.ckpt_dir if c.resume else "None"), ("log_interval", str(c.log_interval)),
                ("lr", "%.1e" % self.lr), ("micro_batch_size", str(c.mbs)), ("num_attention_heads", str(c.heads)),
                ("num_layers", "32"), ("pipeline_model_parallel_size", str(c.pp)), ("save", c.ckpt_dir),
                ("save_interval", str(c.save_interval)), ("seq_length", str(c.seq)), ("tensor_model_parallel_size", str(c.tp)),
                ("train_iters", str(c.train_iters)), ("use_distributed_optimizer", "True"), ("world_size", str(c.world))]
        for k, v in args:
            self.log0("  %s %s %s" % (k, "." * max(3, 48 - len(k)), v))
        self.log0("-------------------- end of arguments ---------------------")
        self.log0("setting number of micro-batches to constant %d" % max(1, c.gbs // (c.mbs * c.dp)))
        self.log0("> building %s tokenizer ..." % ("GPT2BPETokenizer" if "gpt" in c.model else "Llama2Tokenizer"))
        self.log0(" > padded vocab (size: 50257) with 175 dummy tokens (new size: 50432)" if "gpt" in c.model else " > padded vocab (size: 32000) with 0 dummy tokens (new size: 32000)")
        self.log0("> initializing torch distributed ...")
        socket_warn(S)
        S.adv(S.r.uniform(1, 5))
        self.log0("> initialized tensor model parallel with size %d" % c.tp)
        self.log0("> initialized pipeline model parallel with size %d" % c.pp)
        self.log0("> setting random seeds to 1234 ...")
        nccl_init(S)
        self.log0("> compiling dataset index builder ...")
        self.log0("make: Entering directory '%s/megatron/core/datasets'" % c.repo)
        self.log0("make: Nothing to be done for 'default'.")
        self.log0("make: Leaving directory '%s/megatron/core/datasets'" % c.repo)
        self.log0(">>> done with dataset index builder. Compilation time: %.3f seconds" % S.r.uniform(0.03, 0.2))
        self.log0("> compiling and loading fused kernels ...")
        S.adv(S.r.uniform(2, 30))
        self.log0(">>> done with compiling and loading fused kernels. Compilation time: %.3f seconds" % S.r.uniform(1, 9))
        self.log0("time to initialize megatron (seconds): %.3f" % S.r.uniform(20, 90))
        self.log0("[after megatron is initialized] datetime: %s " % ts_sec(S.lt(0)))

    def model_loading(self):
        S, c = self.S, self.c
        self.log0("building GPT model ...")
        for i in range(min(S.n, max(1, (c.tp * c.pp) // c.rpn + 1))):
            for lr in range(c.rpn):
                g = S.g(i, lr)
                if g < c.tp * c.pp:
                    S.out(i, " > number of parameters on (tensor, pipeline) model parallel rank (%d, %d): %d" % (g % c.tp, g // c.tp, 6738415616 // (c.tp * c.pp) + S.r.randint(0, 9999)), rank=g)
        self.log0("> learning rate decay style: cosine")
        if c.resume:
            self.log0(" loading checkpoint from %s at iteration %d" % (c.ckpt_dir, c.start_iter))
            S.adv(S.r.uniform(10, 120))
            self.log0("  successfully loaded checkpoint from %s [ t %d, p %d ] at iteration %d" % (c.ckpt_dir, 1, 1, c.start_iter))
            self.log0("(min, max) time across ranks (ms):\n    load-checkpoint ................................: (%.2f, %.2f)" % (30123.4, 30456.7 + S.r.uniform(0, 900)))
        else:
            self.log0("WARNING: could not find the metadata file %s/latest_checkpointed_iteration.txt " % c.ckpt_dir)
            self.log0("    will not load any checkpoints and will start from random")
        self.log0("[after model, optimizer, and learning rate scheduler are built] datetime: %s " % ts_sec(S.lt(0)))

    def data_loading(self):
        S, c = self.S, self.c
        pfx = "%s/%s_text_document" % (c.data_dir, c.model.split('-')[0])
        self.log0("> building train, validation, and test datasets ...")
        self.log0(" > datasets target sizes (minimum size):")
        self.log0("    train:      %d" % (c.train_iters * c.gbs))
        self.log0("    validation: %d" % ((c.train_iters // max(1, c.eval_interval or c.train_iters) + 1) * 10 * c.gbs))
        self.log0("    test:       %d" % (10 * c.gbs))
        self.log0("> building train, validation, and test datasets for GPT ...")
        self.log0("INFO:megatron.core.datasets.blended_megatron_dataset_builder:Let split_matrix = [(0, 0.949), (0.949, 0.999), (0.999, 1.0)]")
        self.log0("INFO:megatron.core.datasets.indexed_dataset:Load the _IndexReader from %s.idx" % pfx)
        self.log0("INFO:megatron.core.datasets.indexed_dataset:\tExtract the sequence lengths")
        self.log0("INFO:megatron.core.datasets.indexed_dataset:\tExtract the sequence pointers")
        self.log0("INFO:megatron.core.datasets.indexed_dataset:\tExtract the document indices")
        self.log0("INFO:megatron.core.datasets.indexed_dataset:> total number of sequences: %d" % S.r.randint(10**7, 9 * 10**7))
        self.log0("INFO:megatron.core.datasets.indexed_dataset:> total number of documents: %d" % S.r.randint(10**6, 9 * 10**6))
        S.adv(S.r.uniform(5, 60))
        for sp in ("train", "valid", "test"):
            self.log0("INFO:megatron.core.datasets.gpt_dataset:Load the GPTDataset %s indices" % sp)
            self.log0("INFO:megatron.core.datasets.gpt_dataset:> total number of samples: %d" % S.r.randint(10**5, 10**8))
        self.log0("> finished creating GPT datasets ...")
        self.log0("[after dataloaders are built] datetime: %s " % ts_sec(S.lt(0)))
        self.log0("done with setup ...")
        self.log0("(min, max) time across ranks (ms):\n    model-and-optimizer-setup ......................: (%.2f, %.2f)\n    train/valid/test-data-iterators-setup ..........: (%.2f, %.2f)" % (31000.1, 31890.2, 40000.5, 41234.9))
        self.log0("training ...")
        self.log0("[before the start of training step] datetime: %s " % ts_sec(S.lt(0)))

    def progress(self, it, dt):
        S, c = self.S, self.c
        pr = self.progress_rank()
        node = pr // c.rpn
        loss = self.next_loss(it)
        w = c.word
        if w == 0:
            s = " [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number of skipped iterations:   0 | number of nan iterations:   0 |" % (
                ts_sec(S.lt(node)), it, c.train_iters, it * c.gbs, dt * 1000, 400 / dt * S.r.uniform(0.95, 1.05), self.lr_at(it), c.gbs, loss, S.r.uniform(0.15, 0.6))
        elif w == 1:
            s = " iteration %7d/%7d | consumed samples: %10d | consumed tokens: %13d | elapsed time per iteration (ms): %.1f | learning rate: %.3E | global batch size: %4d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | num zeros: 0.0 | params norm: %.3f | number of skipped iterations:   0 | number of nan iterations:   0 |" % (
                it, c.train_iters, it * c.gbs, it * c.gbs * c.seq, dt * 1000, self.lr_at(it), c.gbs, loss, S.r.uniform(0.15, 0.6), 1234.5 + it * 0.001)
        else:
            s = "[%s] iter %d/%d | samples %d | step_time %.2fs | lr %.4e | loss %.4f | grad_norm %.3f | tflops %.1f" % (
                ts_sec(S.lt(node)), it, c.train_iters, it * c.gbs, dt, self.lr_at(it), loss, S.r.uniform(0.15, 0.6), 400 / dt)
        S.out(node, s, rank=pr)
        if it == c.start_iter + c.log_interval:
            for lr in range(min(c.rpn, 2)):
                S.out(0, "[Rank %d] (after %d iterations) memory (MB) | allocated: %.1f | max allocated: %.1f | reserved: %.1f | max reserved: %.1f" % (lr, it, 20123.4, 51234.5, 60000.0, 60000.0), rank=lr)

    def save_begin(self, it):
        _S, c = self.S, self.c
        w = ["saving checkpoint at iteration %7d to %s in torch_dist format" % (it, c.ckpt_dir),
             "saving checkpoint at iteration %7d to %s" % (it, c.ckpt_dir),
             "[ckpt] writing iteration %d to %s ..." % (it, c.ckpt_dir)][c.word]
        self.log0(w)

    def save_end(self, it):
        S, c = self.S, self.c
        w = ["  successfully saved checkpoint from iteration %7d to %s [ t %d/%d, p %d/%d ]" % (it, c.ckpt_dir, 1, c.tp, 1, c.pp),
             "  successfully saved checkpoint at iteration %7d to %s" % (it, c.ckpt_dir),
             "[ckpt] iteration %d written (%.1fs)" % (it, S.r.uniform(10, 90))][c.word]
        self.log0(w)
        self.log0("(min, max) time across ranks (ms):\n    save-checkpoint ................................: (%.2f, %.2f)" % (S.r.uniform(9000, 60000), S.r.uniform(60000, 61000)))

    def eval_begin(self, it):
        if self.c.word == 2:
            self.log0("[eval] running 10 validation iterations at iteration %d" % it)

    def eval_end(self, it):
        S, c = self.S, self.c
        pr = self.progress_rank()
        node = pr // c.rpn
        l = self.loss + S.r.uniform(-0.05, 0.1)
        bar = "-" * 100
        if c.word == 2:
            S.out(node, "[eval] iteration %d: val_loss=%.4f ppl=%.2f" % (it, l, 2.718 ** l), rank=pr)
        else:
            S.out(node, bar, rank=pr)
            S.out(node, " validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E | " % (it, l, 2.718 ** l), rank=pr)
            S.out(node, bar, rank=pr)

    def final_begin(self):
        self.log0("[after training is done] datetime: %s " % ts_sec(self.S.lt(0)))
        self.save_begin(self.S.it_done)

    def final_end(self):
        self.save_end(self.S.it_done)
        self.log0("Evaluating on %d samples" % (10 * self.c.gbs))
        self.log0("exiting program at iteration %d" % self.S.it_done)

    def frames(self, stage):
        c = self.c
        m = "%s/megatron" % c.repo
        base = [("%s/%s" % (c.repo, c.script), 231, "<module>", "pretrain("),
                ("%s/training/training.py" % m, 352, "pretrain", "iteration, num_floating_point_operations_so_far = train(")]
        if stage == "training":
            return base + [("%s/training/training.py" % m, 1227, "train", "train_step(forward_step_func,"),
                           ("%s/training/training.py" % m, 644, "train_step", "losses_reduced = forward_backward_func("),
                           ("%s/core/pipeline_parallel/schedules.py" % m, 1364, "forward_backward_pipelining_without_interleaving", "output_tensor, num_tokens = forward_step("),
                           ("%s/core/pipeline_parallel/schedules.py" % m, 274, "forward_step", "output_tensor, loss_func = forward_step_func(data_iterator, model)")]
        if stage == "checkpointing":
            return base + [("%s/training/training.py" % m, 1298, "train", "save_checkpoint_and_time(iteration, model, optimizer,"),
                           ("%s/training/training.py" % m, 1010, "save_checkpoint_and_time", "save_checkpoint(iteration, model, optimizer, opt_param_scheduler,"),
                           ("%s/training/checkpointing.py" % m, 397, "save_checkpoint", "torch.save(state_dict, checkpoint_name)"),
                           ("%s/torch/serialization.py" % c.site, 628, "save", "with _open_zipfile_writer(f) as opened_zipfile:")]
        if stage == "evaluation":
            return base + [("%s/training/training.py" % m, 1270, "train", "evaluate_and_print_results(prefix, forward_step_func,"),
                           ("%s/training/training.py" % m, 1498, "evaluate_and_print_results", "total_loss_dict, collected_non_loss_data, timelimit = evaluate("),
                           ("%s/training/training.py" % m, 1421, "evaluate", "loss_dicts = forward_backward_func(")]
        if stage == "data_loading":
            return base[:1] + [("%s/training/training.py" % m, 305, "pretrain", "= build_train_valid_test_data_iterators("),
                               ("%s/training/training.py" % m, 1640, "build_train_valid_test_data_loaders", "train_ds, valid_ds, test_ds = build_train_valid_test_datasets("),
                               ("%s/core/datasets/blended_megatron_dataset_builder.py" % m, 240, "build", "datasets = self._build_blended_dataset_splits()"),
                               ("%s/core/datasets/indexed_dataset.py" % m, 409, "__init__", "self.initialize(path_prefix, multimodal, mmap)")]
        if stage == "model_loading":
            return base[:1] + [("%s/training/training.py" % m, 283, "pretrain", "model, optimizer, opt_param_scheduler = setup_model_and_optimizer("),
                               ("%s/training/training.py" % m, 573, "setup_model_and_optimizer", "args.iteration, args.num_floating_point_operations_so_far = load_checkpoint("),
                               ("%s/training/checkpointing.py" % m, 1097, "load_checkpoint", "model[0].load_state_dict(state_dict['model'], strict=strict)")]
        return base[:1] + [("%s/training/initialize.py" % m, 80, "initialize_megatron", "finish_mpu_init()"),
                           ("%s/training/initialize.py" % m, 60, "finish_mpu_init", "_initialize_distributed()")]


class MindSpeed(Megatron):
    name = "mindspeed"

    def benign_pool(self, node):
        c = self.c
        return [
            "%s/torch_npu/utils/path_manager.py:79: UserWarning: Warning: The /usr/local/Ascend/ascend-toolkit/latest owner does not match the current user." % c.site,
            "[W compiler_depend.ts:133] Warning: Warning: Device do not support double dtype now, dtype cast repalce with float. (function operator())",
            "[W OpCommand.cpp:75] Warning: [Check][offset] Check input storage_offset[%d] = 0 failed, result is untrustworthy (function operator())" % self.S.r.randint(1, 4096),
            "%s/torch_npu/contrib/transfer_to_npu.py:211: ImportWarning: \n    *************************************************************************************************************\n    The torch.Tensor.cuda and torch.nn.Module.cuda are replaced with torch.Tensor.npu and torch.nn.Module.npu now..\n    *************************************************************************************************************\n    \n  warnings.warn(msg, ImportWarning)" % c.site,
        ]

    def init(self):
        S, c = self.S, self.c
        for i in range(S.n):
            S.out(i, "%s/torch_npu/utils/collect_env.py:58: UserWarning: Warning: The /usr/local/Ascend/ascend-toolkit/latest owner does not match the current user." % c.site)
            S.out(i, "  warnings.warn(f\"Warning: The {path} owner does not match the current user.\")")
        super().init()
        for i in range(S.n):
            S.out(i, "[INFO] HCCL_CONNECT_TIMEOUT=%d HCCL_EXEC_TIMEOUT=%d HCCL_IF_IP=%s" % (1200, c.timeout_s, S.nodes[i].ip))


# ----------------------------------------------------------------------------- DeepSpeed
class DeepSpeed(Base):
    name = "deepspeed"
    phases = ("initialization", "model_loading", "data_loading")

    def ds(self, node, src, msg, rank=None, lvl="INFO", label=None):
        S = self.S
        S.out(node, "[%s] [%s] [%s] %s" % (ts_py(S.lt(node)), lvl, src, msg), rank=rank, label=label)

    def init(self):
        S, c = self.S, self.c
        for i in range(S.n):
            for lr in range(c.rpn):
                g = S.g(i, lr)
                self.ds(i, "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)", rank=g)
        socket_warn(S)
        for i in range(S.n):
            for lr in range(c.rpn):
                self.ds(i, "comm.py:652:init_distributed", "cdb=None", rank=S.g(i, lr))
        self.ds(0, "comm.py:683:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl", rank=0)
        nccl_init(S)
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] DeepSpeed info: version=0.14.%d, git-hash=unknown, git-branch=unknown" % S.r.randint(0, 4), rank=0)
        self.ds(0, "config.py:733:__init__", "Config mesh_device None world_size = %d" % c.world, rank=0)

    def model_loading(self):
        S, c = self.S, self.c
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] DeepSpeed Flops Profiler Enabled: False", rank=0)
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] Using DeepSpeed Optimizer param name adamw as basic optimizer", rank=0)
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] Creating %s optimizer" % ("BF16" if not c.fp16 else "fp16 ZeRO stage %d" % c.zero), rank=0)
        self.ds(0, "stage_1_and_2.py:148:__init__" if c.zero < 3 else "stage3.py:130:__init__", "Reduce bucket size 500000000", rank=0)
        self.ds(0, "config.py:1000:print", "DeepSpeedEngine configuration:", rank=0)
        for k, v in [("activation_checkpointing_config", "{...}"), ("bfloat16_enabled", str(not c.fp16)), ("fp16_enabled", str(c.fp16)),
                     ("gradient_accumulation_steps", str(max(1, c.gbs // (c.world * c.mbs)))), ("gradient_clipping", "1.0"),
                     ("train_batch_size", str(c.gbs)), ("train_micro_batch_size_per_gpu", str(c.mbs)), ("wall_clock_breakdown", "False"),
                     ("zero_enabled", "True"), ("zero_optimization_stage", str(c.zero))]:
            self.ds(0, "config.py:1004:print", "  %s %s %s" % (k, "." * max(3, 30 - len(k)), v), rank=0)
        if c.resume:
            for i in range(S.n):
                for lr in range(c.rpn):
                    g = S.g(i, lr)
                    if g == 0 or S.r.random() < 0.15:
                        self.ds(i, "torch_checkpoint_engine.py:27:load", "[Torch] Loading checkpoint from %s/global_step%d/zero_pp_rank_%d_mp_rank_00_optim_states.pt..." % (c.ckpt_dir, c.start_iter, g), rank=g)
            S.adv(S.r.uniform(10, 90))
            self.ds(0, "engine.py:3043:_get_all_zero_checkpoint_state_dicts", "successfully read %d ZeRO state_dicts for rank 0" % c.world, rank=0)
            self.ds(0, "engine.py:2975:_load_zero_checkpoint", "loading %d zero partition checkpoints for rank 0" % c.world, rank=0)

    def data_loading(self):
        S, c = self.S, self.c
        S.out(0, "Loading dataset from %s/train-*.jsonl ... %d shards" % (c.data_dir, S.r.randint(64, 2048)), rank=0)
        S.adv(S.r.uniform(5, 60))
        S.out(0, "train dataset: %d samples, valid dataset: %d samples" % (S.r.randint(10**6, 10**8), S.r.randint(10**4, 10**5)), rank=0)
        S.out(0, "***** Running training *****", rank=0)

    def progress(self, it, dt):
        S, c = self.S, self.c
        loss = self.next_loss(it)
        lr = self.lr_at(it)
        if c.word != 2:
            self.ds(0, "logging.py:96:log_dist", "[Rank 0] step=%d, skipped=%d, lr=[%.10f], mom=[(0.9, 0.95)]" % (it, 0 if not c.fp16 else it // 997, lr), rank=0)
            self.ds(0, "timer.py:260:stop", "epoch=0/micro_step=%d/global_step=%d, RunningAvgSamplesPerSec=%.4f, CurrSamplesPerSec=%.4f, MemAllocated=%.2fGB, MaxMemAllocated=%.2fGB" % (it * max(1, c.gbs // (c.world * c.mbs)), it, c.gbs / dt * 0.98, c.gbs / dt * S.r.uniform(0.95, 1.05), 14.2, 31.7), rank=0)
        msg = ["Epoch: 0 | Step: %d | loss: %.4f | lr: %.3e | %.2f s/it" % (it, loss, lr, dt),
               "step %d/%d loss=%.4f ppl=%.2f lr=%.2e elapsed=%.0fms" % (it, c.train_iters, loss, 2.718 ** loss, lr, dt * 1000),
               "[%s] global_step=%d train/loss=%.4f train/lr=%.3e samples/s=%.1f" % (ts_sec(S.lt(0)), it, loss, lr, c.gbs / dt)][c.word]
        S.out(0, msg, rank=0)

    def benign_pool(self, node):
        p = super().benign_pool(node)
        if self.c.fp16:
            p.append("[%s] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768" % ts_py(self.S.lt(node)))
        if self.c.zero == 3:
            p.append("[%s] [WARNING] [stage3.py:2069:step] 1 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding get_accelerator().empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time" % ts_py(self.S.lt(node)))
        return p

    def save_begin(self, it):
        _S, c = self.S, self.c
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] [Torch] Checkpoint global_step%d is about to be saved!" % it, rank=0)
        self.ds(0, "logging.py:96:log_dist", "[Rank 0] Saving model checkpoint: %s/global_step%d/mp_rank_00_model_states.pt" % (c.ckpt_dir, it), rank=0)
        self.ds(0, "torch_checkpoint_engine.py:21:save", "[Torch] Saving %s/global_step%d/mp_rank_00_model_states.pt..." % (c.ckpt_dir, it), rank=0)

    def save_shard_line(self, node, lr, it, done=True):
        c = self.c
        g = self.S.g(node, lr)
        f = "%s/global_step%d/%szero_pp_rank_%d_mp_rank_00_optim_states.pt" % (c.ckpt_dir, it, "bf16_" if not c.fp16 else "", g)
        if done:
            self.ds(node, "torch_checkpoint_engine.py:23:save", "[Torch] Saved %s." % f, rank=g)
        else:
            self.ds(node, "torch_checkpoint_engine.py:21:save", "[Torch] Saving %s..." % f, rank=g)
        return f

    def save_end(self, it):
        S, c = self.S, self.c
        for i in range(S.n):
            for lr in range(c.rpn):
                if S.g(i, lr) == 0 or S.r.random() < 0.1:
                    self.save_shard_line(i, lr, it)
        self.ds(0, "torch_checkpoint_engine.py:33:commit", "[Torch] Checkpoint global_step%d is ready now!" % it, rank=0)

    def eval_begin(self, it):
        self.S.out(0, ["***** Running Evaluation *****", "Evaluating at step %d ..." % it, "[eval] start step=%d" % it][self.c.word], rank=0)

    def eval_end(self, it):
        l = self.loss + self.S.r.uniform(-0.05, 0.1)
        self.S.out(0, ["eval_loss = %.4f, perplexity = %.3f" % (l, 2.718 ** l), "Eval step %d: loss %.4f ppl %.3f" % (it, l, 2.718 ** l), "[eval] done step=%d loss=%.4f" % (it, l)][self.c.word], rank=0)

    def final_begin(self):
        self.S.out(0, "Training finished at step %d, saving final model" % self.S.it_done, rank=0)
        self.save_begin(self.S.it_done)

    def final_end(self):
        self.save_end(self.S.it_done)
        self.S.out(0, "Done. Total time %s" % hms(self.S.t - self.S.t0), rank=0)

    def frames(self, stage):
        c = self.c
        ds = "%s/deepspeed" % c.site
        base = [("%s/%s" % (c.repo, c.script), 412, "<module>", "main()"), ("%s/%s" % (c.repo, c.script), 377, "main", "train(args, model_engine, train_loader, eval_loader)")]
        if stage == "training":
            return base + [("%s/%s" % (c.repo, c.script), 261, "train", "model_engine.backward(loss)"),
                           ("%s/utils/nvtx.py" % ds, 15, "wrapped_fn", "ret_val = func(*args, **kwargs)"),
                           ("%s/runtime/engine.py" % ds, 1976, "backward", "self.optimizer.backward(loss, retain_graph=retain_graph)")]
        if stage == "checkpointing":
            return base + [("%s/%s" % (c.repo, c.script), 290, "train", "model_engine.save_checkpoint(args.output_dir, tag=f\"global_step{step}\")"),
                           ("%s/runtime/engine.py" % ds, 3113, "save_checkpoint", "self._save_zero_checkpoint(save_dir, tag)"),
                           ("%s/runtime/engine.py" % ds, 3422, "_save_zero_checkpoint", "self.checkpoint_engine.save(zero_sd, zero_checkpoint_name)"),
                           ("%s/runtime/checkpoint_engine/torch_checkpoint_engine.py" % ds, 22, "save", "torch.save(state_dict, path)")]
        if stage == "evaluation":
            return base + [("%s/%s" % (c.repo, c.script), 301, "train", "evaluate(model_engine, eval_loader)"),
                           ("%s/%s" % (c.repo, c.script), 198, "evaluate", "outputs = model_engine(**batch)"),
                           ("%s/utils/nvtx.py" % ds, 15, "wrapped_fn", "ret_val = func(*args, **kwargs)")]
        if stage == "model_loading":
            return base[:1] + [("%s/%s" % (c.repo, c.script), 352, "main", "model_engine.load_checkpoint(args.resume_from)"),
                               ("%s/runtime/engine.py" % ds, 2759, "load_checkpoint", "load_path, client_states = self._load_checkpoint(load_dir,"),
                               ("%s/runtime/engine.py" % ds, 2950, "_load_zero_checkpoint", "zero_sd_list = self._get_all_zero_checkpoints(load_dir, tag)")]
        if stage == "data_loading":
            return base[:1] + [("%s/%s" % (c.repo, c.script), 331, "main", "train_ds = build_dataset(args.data_path, tokenizer)"),
                               ("%s/data.py" % c.repo, 88, "build_dataset", "ds = load_dataset(\"json\", data_files=files, split=\"train\")")]
        return base[:1] + [("%s/%s" % (c.repo, c.script), 318, "main", "deepspeed.init_distributed()"),
                           ("%s/comm/comm.py" % ds, 670, "init_distributed", "cdb = TorchBackend(dist_backend, timeout, init_method, rank, world_size)")]


# ----------------------------------------------------------------------------- HF
class HF(Base):
    name = "hf"
    phases = ("initialization", "model_loading", "data_loading")

    def hf(self, src, msg, node=0, rank=0, lvl="INFO", label=None):
        S = self.S
        S.out(node, "[%s|%s] %s >> %s" % (lvl, src, ts_py(S.lt(node)), msg), rank=rank, label=label)

    def init(self):
        S, c = self.S, self.c
        if S.agent and c.launcher != "srun-torchrun":
            for i in range(S.n):
                S.out(i, "The following values were not passed to `accelerate launch` and had defaults used instead:")
                S.out(i, "\t`--dynamo_backend` was set to a value of `'no'`")
                S.out(i, "To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.")
        socket_warn(S)
        for i in range(S.n):
            for lr in range(c.rpn):
                g = S.g(i, lr)
                if g == 0 or lr == 0:
                    S.out(i, "%s - WARNING - __main__ - Process rank: %d, device: cuda:%d, n_gpu: 1, distributed training: True, 16-bits training: %s" % (ts_sec(S.lt(i)).replace(" ", " "), g, lr, c.fp16), rank=g)
        nccl_init(S)

    def model_loading(self):
        S, c = self.S, self.c
        self.hf("configuration_utils.py:731", "loading configuration file %s/config.json" % c.model)
        self.hf("modeling_utils.py:3474", "loading weights file %s/model.safetensors.index.json" % c.model)
        n = S.r.choice([2, 3, 4, 8])
        for i in range(S.n):
            for lr in range(c.rpn):
                g = S.g(i, lr)
                if lr == 0 or g == 0:
                    S.out(i, "Loading checkpoint shards: 100%%|██████████| %d/%d [00:%02d<00:00,  %.2fs/it]" % (n, n, n * 2, S.r.uniform(1, 3)), rank=g)
        self.hf("modeling_utils.py:4280", "All model checkpoint weights were used when initializing %s." % ("LlamaForCausalLM" if "llama" in c.model else "AutoModelForCausalLM"))
        if c.zero == 3:
            self.hf("trainer.py:2048", "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.", lvl="WARNING")

    def data_loading(self):
        S, c = self.S, self.c
        n = S.r.randint(10**5, 10**7)
        S.out(0, "Running tokenizer on dataset (num_proc=32): 100%%|██████████| %d/%d [01:%02d<00:00, %d.%02d examples/s]" % (n, n, S.r.randint(0, 59), S.r.randint(1000, 9000), S.r.randint(0, 99)), rank=0)
        S.out(0, "Grouping texts in chunks of %d (num_proc=32): 100%%|██████████| %d/%d [00:41<00:00, 9812.11 examples/s]" % (c.seq, n, n), rank=0)
        if S.r.random() < 0.5:
            S.out(0, "Token indices sequence length is longer than the specified maximum sequence length for this model (%d > %d). Running this sequence through the model will result in indexing errors" % (c.seq + S.r.randint(10, 9000), c.seq), rank=0)
        S.adv(S.r.uniform(10, 100))
        self.steps = c.train_iters
        self.hf("trainer.py:2078", "***** Running training *****")
        for l in [f"  Num examples = {c.train_iters * c.gbs // 3:,}", "  Num Epochs = 3",
                  "  Instantaneous batch size per device = %d" % c.mbs,
                  f"  Total train batch size (w. parallel, distributed & accumulation) = {c.gbs:,}",
                  "  Gradient Accumulation steps = %d" % max(1, c.gbs // (c.world * c.mbs)),
                  f"  Total optimization steps = {c.train_iters:,}",
                  f"  Number of trainable parameters = {6738415616:,}"]:
            self.hf("trainer.py:2079", l.strip()) if False else S.out(0, "[INFO|trainer.py:2080] %s >> %s" % (ts_py(S.lt(0)), l), rank=0)
        if c.resume:
            for l in ["  Continuing training from checkpoint, will skip to saved global_step", "  Continuing training from epoch 0",
                      "  Continuing training from global step %d" % c.start_iter]:
                S.out(0, "[INFO|trainer.py:2110] %s >> %s" % (ts_py(S.lt(0)), l), rank=0)

    def bar(self, it, dt):
        c = self.c
        pct = int(100 * it / c.train_iters)
        fill = int(10 * it / c.train_iters)
        return "%3d%%|%s%s| %d/%d [%s<%s, %5.2fs/it]" % (pct, "█" * fill, " " * (10 - fill), it, c.train_iters,
                                                       hms((it - c.start_iter) * dt), hms((c.train_iters - it) * dt), dt)

    def progress(self, it, dt):
        S, c = self.S, self.c
        loss = self.next_loss(it)
        S.out(0, self.bar(it, dt), rank=0)
        ep = it / c.train_iters * 3
        d = ["{'loss': %.4f, 'grad_norm': %.6f, 'learning_rate': %.4e, 'epoch': %.2f}" % (loss, S.r.uniform(0.2, 1.5), self.lr_at(it), ep),
             "{'loss': %.3f, 'learning_rate': %.6e, 'epoch': %.2f}" % (loss, self.lr_at(it), ep),
             "{'train/loss': %.4f, 'train/grad_norm': %.4f, 'train/learning_rate': %.3e, 'train/epoch': %.3f, 'train/global_step': %d}" % (loss, S.r.uniform(0.2, 1.5), self.lr_at(it), ep, it)][c.word]
        S.out(0, d, rank=0)

    def save_begin(self, it):
        _S, c = self.S, self.c
        self.hf("trainer.py:3410", "Saving model checkpoint to %s/checkpoint-%d" % (c.ckpt_dir, it))

    def save_end(self, it):
        S, c = self.S, self.c
        d = "%s/checkpoint-%d" % (c.ckpt_dir, it)
        self.hf("configuration_utils.py:472", "Configuration saved in %s/config.json" % d)
        self.hf("configuration_utils.py:807", "Configuration saved in %s/generation_config.json" % d)
        self.hf("modeling_utils.py:2628", "The model is bigger than the maximum size per checkpoint (5GB) and is going to be split in 3 checkpoint shards. You can find where each parameters has been saved in the index located at %s/model.safetensors.index.json." % d)
        self.hf("tokenization_utils_base.py:2513", "tokenizer config file saved in %s/tokenizer_config.json" % d)
        if c.zero:
            self.S.out(0, "[%s] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step%d is about to be saved!" % (ts_py(S.lt(0)), it), rank=0)
            self.S.out(0, "[%s] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step%d is ready now!" % (ts_py(S.lt(0)), it), rank=0)
        if S.r.random() < 0.3:
            self.hf("trainer.py:3502", "Deleting older checkpoint [%s/checkpoint-%d] due to args.save_total_limit" % (c.ckpt_dir, max(0, it - 3 * c.save_interval)))

    def eval_begin(self, it):
        S, c = self.S, self.c
        self.hf("trainer.py:3719", "***** Running Evaluation *****")
        S.out(0, "[INFO|trainer.py:3721] %s >>   Num examples = %d" % (ts_py(S.lt(0)), 5000), rank=0)
        S.out(0, "[INFO|trainer.py:3724] %s >>   Batch size = %d" % (ts_py(S.lt(0)), c.mbs * 2), rank=0)
        S.out(0, "  0%|          | 0/20 [00:00<?, ?it/s]", rank=0)

    def eval_end(self, it):
        S, c = self.S, self.c
        l = self.loss + S.r.uniform(-0.05, 0.1)
        S.out(0, "100%%|██████████| 20/20 [00:%02d<00:00,  1.12it/s]" % S.r.randint(10, 50), rank=0)
        S.out(0, "{'eval_loss': %.4f, 'eval_runtime': %.3f, 'eval_samples_per_second': %.3f, 'eval_steps_per_second': %.3f, 'epoch': %.2f}" % (l, S.r.uniform(20, 90), S.r.uniform(50, 300), S.r.uniform(1, 5), it / c.train_iters * 3), rank=0)

    def final_begin(self):
        S, c = self.S, self.c
        S.out(0, "\n\nTraining completed. Do not forget to share your model on huggingface.co/models =)\n\n", rank=0)
        S.out(0, "{'train_runtime': %.4f, 'train_samples_per_second': %.3f, 'train_steps_per_second': %.3f, 'train_loss': %.6f, 'epoch': 3.0}" % (S.t - S.t0, S.r.uniform(10, 90), S.r.uniform(0.1, 1), self.loss + 0.3), rank=0)
        self.hf("trainer.py:3410", "Saving model checkpoint to %s" % c.ckpt_dir)

    def final_end(self):
        S, c = self.S, self.c
        self.hf("configuration_utils.py:472", "Configuration saved in %s/config.json" % c.ckpt_dir)
        self.hf("modeling_utils.py:2628", "Model weights saved in %s/model.safetensors" % c.ckpt_dir)
        if c.push_to_hub:
            S.out(0, "model.safetensors: 100%%|██████████| %.2fG/%.2fG [02:%02d<00:00, 41.2MB/s]" % (13.5, 13.5, S.r.randint(0, 59)), rank=0)
            S.out(0, "Upload 3 LFS files: 100%|██████████| 3/3 [02:41<00:00, 53.80s/it]", rank=0)
        S.out(0, "***** train metrics *****", rank=0)
        S.out(0, "  epoch                    =        3.0", rank=0)
        S.out(0, "  train_loss               =     %.4f" % self.loss, rank=0)

    def frames(self, stage):
        c = self.c
        tr = "%s/transformers" % c.site
        base = [("%s/%s" % (c.repo, c.script), 640, "<module>", "main()"), ("%s/%s" % (c.repo, c.script), 588, "main", "train_result = trainer.train(resume_from_checkpoint=checkpoint)"),
                ("%s/trainer.py" % tr, 1938, "train", "return inner_training_loop(")]
        if stage == "training":
            return base + [("%s/trainer.py" % tr, 2279, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs)"),
                           ("%s/trainer.py" % tr, 3349, "training_step", "self.accelerator.backward(loss, **kwargs)"),
                           ("%s/accelerate/accelerator.py" % c.site, 2151, "backward", "loss.backward(**kwargs)")]
        inner = [("%s/trainer.py" % tr, 2356, "_inner_training_loop", "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval)")]
        if stage == "checkpointing":
            return base + inner + [("%s/trainer.py" % tr, 2691, "_maybe_log_save_evaluate", "self._save_checkpoint(model, trial, metrics=metrics)"),
                           ("%s/trainer.py" % tr, 2786, "_save_checkpoint", "self.save_model(output_dir, _internal_call=True)"),
                           ("%s/trainer.py" % tr, 3466, "_save", "safe_serialization=self.args.save_safetensors"),
                           ("%s/modeling_utils.py" % tr, 2658, "save_pretrained", "safe_save_file(shard, os.path.join(save_directory, shard_file), metadata={\"format\": \"pt\"})"),
                           ("%s/safetensors/torch.py" % c.site, 286, "save_file", "serialize_file(_flatten(tensors), filename, metadata=metadata)")]
        if stage == "evaluation":
            return base + inner + [("%s/trainer.py" % tr, 2681, "_maybe_log_save_evaluate", "metrics = self._evaluate(trial, ignore_keys_for_eval)"),
                           ("%s/trainer.py" % tr, 3572, "evaluate", "output = eval_loop("),
                           ("%s/trainer.py" % tr, 3757, "evaluation_loop", "losses, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)")]
        if stage == "model_loading":
            return base[:1] + [("%s/%s" % (c.repo, c.script), 431, "main", "model = AutoModelForCausalLM.from_pretrained("),
                               ("%s/models/auto/auto_factory.py" % tr, 564, "from_pretrained", "return model_class.from_pretrained("),
                               ("%s/modeling_utils.py" % tr, 3838, "from_pretrained", ") = cls._load_pretrained_model(")]
        if stage == "data_loading":
            return base[:1] + [("%s/%s" % (c.repo, c.script), 402, "main", "raw_datasets = load_dataset("),
                               ("%s/datasets/load.py" % c.site, 2594, "load_dataset", "builder_instance.download_and_prepare(")]
        if stage == "finalization":
            return base[:1] + [("%s/%s" % (c.repo, c.script), 612, "main", "trainer.push_to_hub(**kwargs)"),
                               ("%s/trainer.py" % tr, 4211, "push_to_hub", "return upload_folder("),
                               ("%s/huggingface_hub/utils/_validators.py" % c.site, 114, "_inner_fn", "return fn(*args, **kwargs)")]
        return base[:1] + [("%s/%s" % (c.repo, c.script), 260, "main", "model_args, data_args, training_args = parser.parse_args_into_dataclasses()")]


# ----------------------------------------------------------------------------- torchtitan
class Titan(Base):
    name = "torchtitan"
    phases = ("initialization", "data_loading", "model_loading")

    def ranks_logging(self):
        c = self.c
        if c.log_ranks == "all":
            return [(i, lr) for i in range(self.S.n) for lr in range(c.rpn)]
        return [(0, 0)]

    def tt(self, msg, node=0, lr=0, lvl="INFO", label=None, every=False):
        S = self.S
        targets = self.ranks_logging() if every else [(node, lr)]
        for (i, l) in targets:
            S.out(i, "[titan] %s - root - %s - %s" % (ts_py(S.lt(i)), lvl, msg), rank=S.g(i, l), label=label)

    def init(self):
        S, c = self.S, self.c
        self.tt("Starting job: %s training" % c.model.replace("-", " ").title(), every=True)
        socket_warn(S)
        self.tt("Building 1-D device mesh with ['dp_shard'], [%d]" % c.world, every=True)
        self.tt("[GC] Initial GC collection. 0.00 seconds.", every=True)
        nccl_init(S)

    def data_loading(self):
        _S, _c = self.S, self.c
        self.tt("Building tokenizer ...", every=True)
        self.tt("Preparing c4 dataset from allenai/c4", every=True)

    def model_loading(self):
        S, c = self.S, self.c
        mn = c.model.replace("-", " ")
        self.tt("Building " + mn + " with TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, max_seq_len=%d, depth_init=True, use_flex_attn=False, attn_mask_type='causal', eos_id=0)" % c.seq, every=True)
        self.tt("\x1b[34mModel %s \x1b[31msize: 8,030,261,248 total parameters\x1b[39m" % mn, every=True)
        self.tt("CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory", every=True)
        self.tt("Applied selective activation checkpointing to the model", every=True)
        self.tt("Applied FSDP to the model", every=True)
        self.tt("CUDA memory usage for model: 3.77GiB(4.77%)", every=True)
        self.tt("Checkpointing active. Checkpoints will be loaded from and saved to %s" % c.ckpt_dir, every=True)
        if c.resume:
            self.tt("Loading the checkpoint at step %d." % c.start_iter, every=True)
            S.adv(S.r.uniform(10, 60))
            self.tt("Finished loading the checkpoint in %.2f seconds." % S.r.uniform(10, 60), every=True)
        self.tt("Trainer is initialized with local batch size %d, global batch size %d, gradient accumulation steps 1, sequence length %d, total steps %d (warmup 200)" % (c.mbs, c.mbs * c.world, c.seq, c.train_iters), every=True)
        self.tt("Training starts at step %d." % (c.start_iter + 1), every=True)
        if S.r.random() < 0.6:
            self.tt("Profiling active. Traces will be saved at ./outputs/profile_trace", every=True)

    def progress(self, it, dt):
        S, c = self.S, self.c
        loss = self.next_loss(it)
        for (i, lr) in self.ranks_logging():
            tps = int(c.mbs * c.seq / dt)
            m = [f"step: %d  loss: %8.4f  memory: %.2fGiB(%.2f%%)  tps: {tps:,}  tflops: %.2f  mfu: %.2f%%" % (it, loss, 58.12, 73.47, 394.5 / dt * 1.0, 39.89 / dt * 1.0),
                 f"step: %2d  loss: %7.4f  grad_norm: %7.4f  memory: %5.2fGiB(%.2f%%)  tps: {tps:,}  tflops: %.2f  mfu: %.2f%%" % (it, loss, S.r.uniform(0.2, 1.1), 61.3, 77.49, 390.0 / dt, 39.4 / dt),
                 f"step: %d  loss: %.5f  memory: %.2fGiB(%.2f%%)  wps: {tps:,}  mfu: %.2f%%" % (it, loss, 58.12, 73.47, 39.89 / dt)][c.word]
            if c.log_ranks == "all" and (i, lr) != (0, 0):
                m = m.replace("loss: ", "loss: ")
            S.out(i, "[titan] %s - root - INFO - %s" % (ts_py(S.lt(i)), m), rank=S.g(i, lr))

    def save_begin(self, it):
        self.tt("Saving the checkpoint (or staging if async is enabled).", every=True)

    def save_end(self, it):
        self.tt("[GC] Performing periodical GC collection. %.2f seconds." % self.S.r.uniform(0.01, 0.09), every=True)
        self.tt("Finished saving the checkpoint (or staging if async is enabled)in %.2f seconds." % self.S.r.uniform(5, 40), every=True)

    def eval_begin(self, it):
        pass

    def eval_end(self, it):
        l = self.loss + self.S.r.uniform(-0.05, 0.1)
        self.tt(f"validate step: %d  loss: %7.4f  memory: %5.2fGiB(%.2f%%)  tps: {self.S.r.randint(20000, 60000):,}" % (it, l, 40.1, 50.8), every=True)

    def final_begin(self):
        self.tt("Saving a full checkpoint at last step, step %d." % self.S.it_done, every=True)

    def final_end(self):
        self.tt("Finished saving the checkpoint (or staging if async is enabled)in %.2f seconds." % self.S.r.uniform(5, 40), every=True)
        self.tt("Sleeping 2 seconds for other ranks to complete", every=True)
        self.tt("Training completed", every=True)
        self.tt("Process group destroyed.", every=True)

    def frames(self, stage):
        c = self.c
        tt = "%s/torchtitan" % c.repo
        base = [("%s/train.py" % tt, 670, "<module>", "trainer.train()"),
                ("%s/torch/distributed/elastic/multiprocessing/errors/__init__.py" % c.site, 355, "wrapper", "return f(*args, **kwargs)")]
        if stage == "training":
            return base + [("%s/train.py" % tt, 545, "train", "self.train_step(data_iterator)"),
                           ("%s/train.py" % tt, 468, "train_step", "loss = self.forward_backward_step(input_dict, labels)"),
                           ("%s/train.py" % tt, 440, "forward_backward_step", "loss.backward()")]
        if stage in ("checkpointing", "finalization"):
            return base + [("%s/train.py" % tt, 560, "train", "self.checkpointer.save("),
                           ("%s/components/checkpoint.py" % tt, 521, "save", "self.dcp_save("),
                           ("%s/components/checkpoint.py" % tt, 380, "dcp_save", "ret = dcp.save(state_dict, checkpoint_id=checkpoint_id)"),
                           ("%s/torch/distributed/checkpoint/state_dict_saver.py" % c.site, 150, "save", "return _save_state_dict(")]
        if stage == "evaluation":
            return base + [("%s/train.py" % tt, 575, "train", "self.validator.validate(self.model_parts, self.step)"),
                           ("%s/components/validate.py" % tt, 118, "validate", "pred = model_parts[0](inputs)")]
        if stage == "model_loading":
            return [("%s/train.py" % tt, 662, "<module>", "trainer = Trainer(config)")] + base[1:] + [
                ("%s/train.py" % tt, 301, "__init__", "self.checkpointer.load(step=job_config.checkpoint.load_step)"),
                ("%s/components/checkpoint.py" % tt, 611, "load", "self.dcp_load(")]
        if stage == "data_loading":
            return [("%s/train.py" % tt, 662, "<module>", "trainer = Trainer(config)")] + base[1:] + [
                ("%s/train.py" % tt, 142, "__init__", "self.dataloader = self.train_spec.build_dataloader_fn(")]
        return [("%s/train.py" % tt, 662, "<module>", "trainer = Trainer(config)")] + base[1:] + [
            ("%s/distributed/utils.py" % tt, 258, "init_distributed", "torch.distributed.init_process_group(")]


FW = {"megatron": Megatron, "deepspeed": DeepSpeed, "hf": HF, "torchtitan": Titan, "mindspeed": MindSpeed}
