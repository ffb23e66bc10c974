"""Message catalogue of the job simulator (:mod:`l4.sim.simulate`).

Every block below is derived from a real log excerpt or a vendor document; ``source`` names
it (``F0xx``/``N0xx`` are entries of the real-failure corpus the project was developed
against; the corpus itself is not shipped).  Keeping the catalogue in the repository lets
anyone regenerate the accuracy benchmark without that corpus.

A block is written in a tiny line DSL, one output line per DSL line::

    <stream><key><template>

* ``stream`` is who writes the line, which decides its prefix: ``R`` a rank process (gets
  the launcher's rank prefix), ``A`` the launcher/agent of the node, ``K`` the kernel (gets
  a dmesg/syslog prefix), ``S`` Slurm, ``P`` plain text pasted by a log collector.
* ``key`` is ``!`` for the lines that carry the message's own evidence and a space for
  context lines (traceback frames, boilerplate).  The truth file lists both, the context
  lines with the kind ``<kind>:context`` so that scoring can tell them apart.
* ``template`` is a :meth:`str.format` template; the simulator supplies the fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from l4.profiles import STAGES  # noqa: F401  (the stage names truth.json uses)

CATEGORIES = ("hardware", "user", "platform", "framework")
FRAMEWORKS = ("megatron", "deepspeed", "hf", "torchtitan", "mindspeed")
NVIDIA = ("megatron", "deepspeed", "hf", "torchtitan")


@dataclass(frozen=True)
class Block:
    """One message (possibly several lines) with the kind reported in ``truth.json``."""

    id: str
    kind: str
    source: str
    lines: tuple[tuple[str, bool, str], ...]


def _parse(block_id: str, source: str, text: str, kind: str | None = None) -> Block:
    lines = []
    for raw in text.strip("\n").split("\n"):
        stream, key, tmpl = raw[0], raw[1:2] == "!", raw[2:]
        if stream not in "RAKSP":
            raise ValueError(f"block {block_id}: bad stream {stream!r} in {raw!r}")
        lines.append((stream, key, tmpl))
    return Block(block_id, kind or block_id, source, tuple(lines))


BLOCKS: dict[str, Block] = {}


def _def(block_id: str, source: str, text: str, kind: str | None = None) -> None:
    BLOCKS[block_id] = _parse(block_id, source, text, kind)


# --------------------------------------------------------------------------------------
# Fault messages (indicators).  Fields come from the simulator's line context.
# --------------------------------------------------------------------------------------

_def("xid79", "F020; NVIDIA Xid catalogue (Xid 79: GPU has fallen off the bus)", """
K!NVRM: Xid (PCI:{pci}): 79, pid={pid}, name=python3, GPU has fallen off the bus.
K!NVRM: GPU {pci_full}: GPU has fallen off the bus.
K!NVRM: The NVIDIA GPU {pci_full}
K!               NVRM: (PCI ID: 10de:2330) installed in this system has
K!               NVRM: fallen off the bus and is not responding to commands.
""")

_def("xid_ecc", "F005 (Xid 94 contained ECC); NVIDIA Xid catalogue (48 DBE, 95 uncontained ECC)", """
K!NVRM: Xid (PCI:{pci}): {xid_ecc}, pid={pid}, name=python3, {xid_ecc_text}
""")

_def("cuda_ecc_error", "F008; F007", """
R   File "{site}/torch/nn/modules/linear.py", line 125, in forward
R     return F.linear(input, self.weight, self.bias)
R!RuntimeError: CUDA error: uncorrectable ECC error encountered
R CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
R For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
R Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
R
R![E ProcessGroupNCCL.cpp:916] [Rank {rank}] NCCL watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered
R Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):
""")

_def("xid_nvlink", "F005 (Xid 149 NETIR / Xid 145 RLW NVLink samples)", """
K!NVRM: Xid (PCI:{pci}): 149, NETIR_LINK_EVT Fatal XC0 i0 Link {link:02d} (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
K!NVRM: Xid (PCI:{pci}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link {link} (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)
""")

_def("nccl_cuda_nvlink", "F127 (NCCL WARN Cuda failure line); CUDA runtime error string cudaErrorNvlinkUncorrectable", """
R!{host}:{pid}:{tid} [{lrank}] transport/p2p.cc:275 NCCL WARN Cuda failure 'uncorrectable NVLink error detected during the execution'
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/p2p.cc:338 -> 1
R!RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution
R CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
R For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
""")

_def("ib_port_error", "F015", """
R!{host}:{pid}:{tid} [{lrank}] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error
R
""")

_def("npu_hbm_uce", "F119 (torch_npu error layout); F123 (EH9999 layout); CANN aclError 507053 ACL_ERROR_RT_DEVICE_MEM_ERROR (HBM multi-bit ECC / UCE)", """
R!EH9999: {hccl_ts}  wait for compute device to finish failed, runtime result = 507053.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]
R         TraceBack (most recent call last):
R!        rtDeviceSynchronize execute failed, reason=[device mem error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]
R!RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:467 NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507053
R![ERROR] {asc_ts} (PID:{pid}, Device:{lrank}, RankID:{rank}) ERR00100 PTA call acl api failed
R![Error]: The device memory has an uncorrectable multi-bit ECC error (HBM UCE).
R         Rectify the fault based on the error information in the ascend log.
""")

_def("pcie_aer", "F002", """
K!pcieport {root_port}: AER: Corrected error received: {root_port}
K!pcieport {root_port}: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)
K pcieport {root_port}:   device [8086:6f08] error status/mask=00001000/00002000
K pcieport {root_port}:    [12] Timeout
""")

_def("pcie_aer_fatal", "F002; Linux AER driver message format", """
K!pcieport {root_port}: AER: Uncorrected (Fatal) error received: {root_port}
K!pcieport {root_port}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)
K pcieport {root_port}:   device [8086:6f08] error status/mask=00004000/00000000
K pcieport {root_port}:    [14] CmpltTO                (First)
""")

_def("cuda_oom", "F052; F053", """
R Traceback (most recent call last):
R   File "{workdir}/{script}", line 412, in <module>
R     main()
R   File "{workdir}/{script}", line 377, in main
R     loss.backward()
R   File "{site}/torch/_tensor.py", line 581, in backward
R     torch.autograd.backward(
R   File "{site}/torch/autograd/graph.py", line 825, in _engine_run_backward
R     return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
R!torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU {lrank} has a total capacity of 79.15 GiB of which {free} MiB is free. Including non-PyTorch memory, this process has 79.04 GiB memory in use. Of the allocated memory 71.37 GiB is allocated by PyTorch, and 6.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
""")

_def("cuda_oom_eval", "F052; F053", """
R Traceback (most recent call last):
R   File "{workdir}/{script}", line 298, in evaluate
R     logits = model(input_ids).logits
R   File "{site}/torch/nn/modules/module.py", line 1747, in _call_impl
R     return forward_call(*args, **kwargs)
R!torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU {lrank} has a total capacity of 79.15 GiB of which {free} MiB is free. Including non-PyTorch memory, this process has 79.04 GiB memory in use. Of the allocated memory 71.37 GiB is allocated by PyTorch, and 6.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
""", kind="cuda_oom")

_def("npu_oom", "F070; F071", """
R Traceback (most recent call last):
R   File "{workdir}/{script}", line 412, in <module>
R     main()
R   File "{site}/torch/nn/modules/module.py", line 1747, in _call_impl
R     return forward_call(*args, **kwargs)
R!RuntimeError: NPU out of memory. Tried to allocate {alloc} GiB (NPU {lrank}; 60.96 GiB total capacity; 57.47 GiB already allocated; 57.47 GiB current active; {free} MiB free; 59.55 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
""")

_def("npu_oom_load", "F071", """
R     new_value = value.to(device)
R!RuntimeError: NPU out of memory. Tried to allocate 386.00 MiB (NPU {lrank}; 60.97 GiB total capacity; 59.57 GiB already allocated; 59.57 GiB current active; 16.54 MiB free; 60.06 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
R Loading checkpoint shards:  42%|██████████████████████████████████████▋                                                     | 16/38 [00:14<00:19,  1.13it/s]
""", kind="npu_oom")

_def("megatron_nan", "F064; NVIDIA/Megatron-LM training/utils (NaN check in local grad norm)", """
R Traceback (most recent call last):
R   File "{workdir}/pretrain_gpt.py", line 243, in <module>
R     pretrain(
R   File "{workdir}/megatron/training/training.py", line 1146, in train_step
R     losses_reduced = forward_backward_func(
R!AssertionError: Rank {rank}: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: {lrank}, node: {host}
""")

_def("ds_loss_scale_min", "F129; DeepSpeed runtime/fp16/loss_scaler.py (minimum loss scale reached)", """
R Traceback (most recent call last):
R   File "{workdir}/{script}", line 377, in main
R     model.step()
R   File "{site}/deepspeed/runtime/fp16/loss_scaler.py", line 183, in update_scale
R     raise Exception(
R!Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.
""")

_def("ds_overflow_min", "F129", """
R![{py_ts}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1
""")

_def("state_dict_mismatch", "F131; PyTorch nn.Module.load_state_dict error text", """
R Traceback (most recent call last):
R   File "{workdir}/{ckpt_loader}", line 1023, in load_checkpoint
R     model.load_state_dict(state_dict, strict=True)
R   File "{site}/torch/nn/modules/module.py", line 2584, in load_state_dict
R     raise RuntimeError(
R!RuntimeError: Error(s) in loading state_dict for {model_class}:
R!	size mismatch for {param_name}: copying a param with shape torch.Size([{vocab_ckpt}, {hidden}]) from checkpoint, the shape in current model is torch.Size([{vocab_now}, {hidden}]).
""")

_def("dcp_size_mismatch", "F131", """
R Traceback (most recent call last):
R   File "{site}/torchtitan/components/checkpoint.py", line 562, in load
R     dcp.load(states, checkpoint_id=checkpoint_id)
R!ValueError: Size mismatch between saved torch.Size([{vocab_ckpt}, {hidden}]) and current: torch.Size([{vocab_now}, {hidden}]) for tok_embeddings.weight
""")

_def("dataset_missing_megatron", "F133 (rank exits while datasets load); Megatron indexed dataset FileNotFoundError", """
R Traceback (most recent call last):
R   File "{workdir}/megatron/core/datasets/indexed_dataset.py", line 384, in __init__
R     self.initialize(path_prefix, multimodal, mmap)
R!FileNotFoundError: [Errno 2] No such file or directory: '{data_path}.idx'
""")

_def("dataset_missing_hf", "HF datasets load_dataset error text (FileNotFoundError: Unable to find ...)", """
R Traceback (most recent call last):
R   File "{workdir}/{script}", line 188, in <module>
R     raw = load_dataset("json", data_files=args.train_file)
R   File "{site}/datasets/data_files.py", line 407, in resolve_pattern
R     raise FileNotFoundError(error_msg)
R!FileNotFoundError: Unable to find '{data_path}.jsonl'
""")

_def("tp_mismatch", "F068", """
R Traceback (most recent call last):
R   File "{workdir}/megatron/training/checkpointing.py", line 58, in _compare
R     assert checkpoint_value == args_value, error_message
R!AssertionError: tensor_model_parallel_size value from checkpoint ({tp_ckpt}) is not equal to the input argument value ({tp}).
""")

_def("enospc_torch", "F030 (No space left on device); PyTorch serialization error text", """
R Traceback (most recent call last):
R   File "{workdir}/{ckpt_loader}", line 402, in save_checkpoint
R     torch.save(state_dict, checkpoint_name)
R   File "{site}/torch/serialization.py", line 850, in save
R     with _open_zipfile_writer(f) as opened_zipfile:
R!RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 1946239488 vs 1946239376
R During handling of the above exception, another exception occurred:
R!OSError: [Errno 28] No space left on device: '{ckpt_dir}/iter_{it:07d}/mp_rank_{lrank:02d}/model_optim_rng.pt'
""", kind="enospc")

_def("enospc_ds", "F038", """
R   File "{site}/deepspeed/runtime/engine.py", line 2894, in save_checkpoint
R     self._save_zero_checkpoint(save_dir, tag)
R   File "{site}/deepspeed/runtime/engine.py", line 3223, in _save_zero_checkpoint
R     self.checkpoint_engine.save(zero_sd, zero_checkpoint_name)
R!RuntimeError: [enforce fail at inline_container.cc:337] . PytorchStreamWriter failed writing file data/3: file write failed
""", kind="enospc")

_def("enospc_safetensors", "F037", """
R   File "{site}/transformers/trainer.py", line 3541, in _save
R     safetensors.torch.save_file(state_dict, os.path.join(output_dir, SAFE_WEIGHTS_NAME), metadata={{"format": "pt"}})
R!safetensors_rust.SafetensorError: Error while serializing: IoError(Os {{ code: 28, kind: StorageFull, message: "No space left on device" }})
""", kind="enospc")

_def("eio_megatron", "F034", """
R!ERROR: megatron.core.dist_checkpointing.strategies.filesystem_async: Local process {lrank} encountered an error: [Errno 5] Input/output error
R Traceback (most recent call last):
R   File "{workdir}/megatron/core/dist_checkpointing/strategies/filesystem_async.py", line 310, in write_preloaded_data
R     os.fsync(stream.fileno())
R!OSError: [Errno 5] Input/output error
""", kind="eio")

_def("eio_torch", "F034; PyTorch torch.save OSError", """
R   File "{site}/torch/serialization.py", line 850, in save
R     _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)
R!OSError: [Errno 5] Input/output error: '{ckpt_dir}/step-{it}/__{rank}_0.distcp'
""", kind="eio")

_def("estale", "F041; F081", """
R   File "{workdir}/{script}", line 916, in _save_checkpoint
R     torch.save(self.optimizer.state_dict(), os.path.join(output_dir, "optimizer.pt"))
R   File "{site}/torch/serialization.py", line 374, in save
R     _legacy_save(obj, opened_file, pickle_module, pickle_protocol)
R!OSError: [Errno 116] Stale file handle
""")

_def("slurm_node_failure", "Slurm srun/slurmstepd messages (node failure)", """
S!srun: error: Node failure on {culprit_host}
""")

_def("slurm_preempt_job", "F043", """
S!slurmstepd: error: *** JOB {jobid} ON {host} CANCELLED AT {slurm_ts} DUE TO PREEMPTION ***
""", kind="slurm_preemption")

_def("slurm_preempt_step", "F043", """
S!slurmstepd: error: *** STEP {jobid}.0 ON {host} CANCELLED AT {slurm_ts} DUE TO PREEMPTION ***
""", kind="slurm_preemption")

_def("slurm_cancel_step", "Slurm slurmstepd cancellation message (scancel); F043 format", """
S!slurmstepd: error: *** STEP {jobid}.0 ON {host} CANCELLED AT {slurm_ts} ***
""", kind="slurm_cancel")

_def("slurm_cancel_job", "Slurm slurmstepd cancellation message (scancel); F043 format", """
S!slurmstepd: error: *** JOB {jobid} ON {host} CANCELLED AT {slurm_ts} ***
""", kind="slurm_cancel")

_def("kernel_oom", "Linux OOM killer message; F073 (SIGKILL with no stack); F047", """
K!Out of memory: Killed process {pid} (python3) total-vm:412331220kB, anon-rss:61224112kB, file-rss:112312kB, shmem-rss:8192kB, UID:0 pgtables:132104kB oom_score_adj:0
""")

_def("slurm_oom_event", "Slurm slurmstepd oom_kill notice", """
S!slurmstepd: error: Detected 1 oom_kill event in StepId={jobid}.0. Some of the step tasks have been OOM Killed.
""", kind="kernel_oom")

_def("tcpstore_connect_timeout", "F029", """
R![E{glog_e} socket.cpp:1011] [c10d] The client socket has timed out after 1800000ms while trying to connect to ({master_ip}, 29500).
R Traceback (most recent call last):
R   File "{site}/torch/distributed/rendezvous.py", line 189, in _create_c10d_store
R     return TCPStore(
R!torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to ({master_ip}, 29500).
""")

_def("k8s_evicted", "F046; F047", """
P!The node was low on resource: ephemeral-storage. Threshold quantity: 10120387530, available: 9702960Ki. Container pytorch was using 26498512Ki, request is 0, has larger consumption of ephemeral-storage.
""")

_def("nccl_cuda_invalid", "F075", """
R!{host}:{pid}:{tid} [{lrank}] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'
R!{host}:{pid}:{tid2} [{lrank}] proxy.cc:1485 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection
R {host}:{pid}:{tid2} [{lrank}] proxy.cc:1495 NCCL WARN [Service thread] Could not receive type from localRank {lrank}, res=3, closed=0
R {host}:{pid}:{tid2} [{lrank}] proxy.cc:1519 NCCL WARN [Proxy Service {rank}] Failed to execute operation Connect from rank {rank}, retcode 3
""")

_def("nccl_invalid_usage", "F091; F135", """
R!torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1287, invalid usage, NCCL version {nccl_bad}
R!ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
""")

_def("hccp_busy", "F027", """
R!RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64
R![ERROR] {asc_ts} (PID:{pid}, Device:{lrank}, RankID:{rank}) ERR02200 DIST call hccl api failed.
R!EJ0001: {hccl_ts} Failed to initialize the HCCP process. Reason: Maybe the last training process is running.
R         Solution: Wait for 10s after killing the last training process and try again.
R         TraceBack (most recent call last):
R         tsd client wait response fail, device response code[1]. unknown device error.[FUNC:WaitRsp][FILE:process_mode_manager.cpp][LINE:290]
R         Fail to get sq reg virtual addr, deviceId={lrank}, sqId=40.[FUNC:Setup][FILE:stream.cc][LINE:1102]
R         rtGetDevMsg execute failed, reason=[driver error:internal error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]
""")

_def("hccl_transport_init", "F124; F028 (plog layout)", """
R![ERROR] HCCL({pid},python3):{hccl_ts} [hccl_socket_manager.cc:778] [{tid}][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[{rank}] timeout[120]
R![ERROR] HCCL({pid},python3):{hccl_ts} [hccl_socket_manager.cc:830] [{tid}][Wait][LinksEstablishCompleted] is failed. ret[9].
R!EI0009: [PID: {pid}] {hccl_ts} Transport init error. Reason: [Create][DestLink]Create Dest error! createLink para:rank[{rank}]-localUserrank[{rank}]-localIpAddr[{ip}], dst_rank[{peer_rank}]-remoteUserrank[{peer_rank}]-remote_ip_addr[{peer_ip}]
R         Solution: Check other NPUs that are not reporting errors, or check if there are any abnormalities on the other end's NPU.
R!RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:1771
R![ERROR] {asc_ts} (PID:{pid}, Device:{lrank}, RankID:{rank}) ERR02200 DIST call hccl api failed.
""")

_def("aicpu_exception", "F123", """
R!EH9999: {hccl_ts}  wait for compute device to finish failed, runtime result = 507018.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]
R         TraceBack (most recent call last):
R  (function npuSynchronizeDevice)
R![W NPUStream.cpp:365] Warning: NPU warning, error code is 507018[Error]:
R![Error]: The aicpu execution is abnormal.
R         Rectify the fault based on the error information in the ascend log.
R!EH9999: Inner Error!
R!        rtDeviceSynchronize execute failed, reason=[aicpu exception][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]
""")

_def("nccl_illegal_access", "F127; F107", """
R!{host}:{pid}:{pid} [{lrank}] init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was encountered'
R {host}:{pid}:{pid} [{lrank}] NCCL INFO init.cc:990 -> 1
R!terminate called after throwing an instance of 'c10::DistBackendError'
R!  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered
R CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
R For debugging consider passing CUDA_LAUNCH_BLOCKING=1
R Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
R
R Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):
R frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x{addr} in {site}/torch/lib/libc10.so)
R frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x64 (0x{addr} in {site}/torch/lib/libc10.so)
R frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118 (0x{addr} in {site}/torch/lib/libc10_cuda.so)
""")

_def("segv_backtrace", "F106 (UCX 'Caught signal' backtrace layout); F113", """
R![{host}:{pid} :0:{tid}] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x{addr_short})
R!==== backtrace (tid:{tid:>7}) ====
R  0 0x0000000000042520 __sigaction()  ???:0
R  1 0x000000000008170d ncclProxyProgress()  ???:0
R  2 0x0000000000094ac3 start_thread()  ???:0
R  3 0x0000000000126850 clone()  ???:0
R =================================
""")

_def("shm_fallocate", "F030; F032", """
R!{host}:{pid}:{tid} [{lrank}] include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device
R {host}:{pid}:{tid} [{lrank}] NCCL INFO include/shm.h:41 -> 2
R!{host}:{pid}:{tid} [{lrank}] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-{shm_id}-0-{lrank}-0 (size 9637888)
""")

_def("shm_bus_error", "F106; F105", """
R![{host}:{pid} :0:{tid}] Caught signal 7 (Bus error: nonexistent physical address)
R!==== backtrace (tid:{tid:>7}) ====
R  0 0x0000000000043090 killpg()  ???:0
R  1 0x000000000008170d ncclGroupEnd()  ???:0
R  2 0x00000000000742f0 ncclGroupEnd()  ???:0
R  3 0x0000000000008609 start_thread()  ???:0
R  4 0x000000000011f133 clone()  ???:0
R =================================
""")

# --------------------------------------------------------------------------------------
# Propagated errors (symptoms) and launcher teardown.
# --------------------------------------------------------------------------------------

_def("watchdog_timeout", "F092; F093; F094; F095; F097; F108", """
R![E{glog_e} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={optype}, NumelIn={numel}, NumelOut={numel_out}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.
R![E{glog_e} ProcessGroupNCCL.cpp:1664] [PG 0 Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq_enq}, last completed NCCL work: {seq_done}.
R![E{glog_e} ProcessGroupNCCL.cpp:684] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
R![E{glog_e} ProcessGroupNCCL.cpp:698] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.
R![E{glog_e} ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={optype}, NumelIn={numel}, NumelOut={numel_out}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.
R Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):
R frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x{addr} in {site}/torch/lib/libc10.so)
R frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x{addr} in {site}/torch/lib/libtorch_cuda.so)
R frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x{addr} in {site}/torch/lib/libtorch_cuda.so)
R frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x{addr} in {site}/torch/lib/libtorch_cuda.so)
R frame #4: <unknown function> + 0xdc253 (0x{addr} in /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
R frame #5: <unknown function> + 0x94ac3 (0x{addr} in /usr/lib/x86_64-linux-gnu/libc.so.6)
R frame #6: <unknown function> + 0x126850 (0x{addr} in /usr/lib/x86_64-linux-gnu/libc.so.6)
R
R!terminate called after throwing an instance of 'c10::DistBackendError'
R!  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={optype}, NumelIn={numel}, NumelOut={numel_out}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.
""", kind="nccl_watchdog_timeout")

_def("watchdog_timeout_old", "F050", """
R![E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
R![E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.
R!terminate called after throwing an instance of 'std::runtime_error'
R!  what():  [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={optype}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.
""", kind="nccl_watchdog_timeout")

_def("remote_error", "F023; F138; F140", """
R![E{glog_e} ProcessGroupNCCL.cpp:541] [Rank {rank}] found async exception when checking for NCCL errors: NCCL error: remote process exited or there was a network error, NCCL version {nccl}
R!ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
R Last error:
R!socketProgressOpt: Call to recv from {culprit_ip}<{port}> failed : Connection reset by peer
R Exception raised from checkForNCCLErrorsInternal at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1954 (most recent call first):
""", kind="nccl_remote_error")

_def("socket_reset", "F100; F127", """
R!{host}:{pid}:{tid} [{lrank}] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from {culprit_ip}<{port}> failed : Connection reset by peer
R {host}:{pid}:{tid} [{lrank}] NCCL INFO misc/socket.cc:47 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO misc/socket.cc:750 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/net_ib.cc:710 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/net.cc:677 -> 6
""", kind="nccl_connection_reset")

_def("ib_flush", "F138", """
R!{host}:{pid}:{tid} [{lrank}] ib_plugin.c:1673 NCCL WARN NET/IB: Got completion from peer {culprit_ip}<{port}> with status=5 opcode=0 len=0 vendor err 249 (Recv) hca mlx5_{hca}
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/net.cc:1314 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO proxy.cc:638 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO proxy.cc:819 -> 6 [Progress Thread]
""", kind="nccl_ib_completion_error")

_def("ib_retry_exceeded", "F001; F098; F130", """
R!{host}:{pid}:{tid} [{lrank}] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer {culprit_ip}<{port}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff{gid:02x} remoteGids fd00:1148:9000:5000:4:200:3:ff{rgid:02x}
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/net.cc:1302 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO proxy.cc:698 -> 6
R {host}:{pid}:{tid} [{lrank}] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]
R
""", kind="nccl_ib_completion_error")

_def("tcpstore_reset", "F133; F134; F072", """
R![W{glog_w} TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd={fd}, addr=[{host}]:{port}, remote=[{master}]:29500): Connection reset by peer
R Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:675 (most recent call first):
R![W{glog_w} ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank {rank}] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Connection reset by peer
""", kind="tcpstore_connection_lost")

_def("store_wait_clients", "F115", """
R!torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. {joined}/{nnodes} clients joined.
""", kind="tcpstore_wait_timeout")

_def("nccl_connect_abort", "F103; F101", """
R!{host}:{pid}:{tid} [{lrank}] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to {culprit_ip}<{port}> failed : Software caused connection abort
R {host}:{pid}:{tid} [{lrank}] NCCL INFO misc/socket.cc:564 -> 2
R {host}:{pid}:{tid} [{lrank}] NCCL INFO transport/net_socket.cc:336 -> 2
R!{host}:{pid}:{tid} [{lrank}] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x{addr_short}
R!torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1287, internal error - please report this issue to the NCCL developers, NCCL version {nccl}
""", kind="nccl_bootstrap_error")

_def("hccl_ei0002", "F136; F137; F120", """
R![W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]:
R![Error]: The execution of the internal task times out.
R Rectify the fault based on the error information in the ascend log.
R!EI0002: [PID: {pid}] {hccl_ts} The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [{culprit_rank}].base information: [streamID:[{stream}], taskID[{task}], taskType[Notify Wait], tag[AllReduce_{master_ip}%enp189s0f0_60000_0_{ident}].] task information: []
R!there are(is) 1 abnormal device(s):
R!Cluster Exception Location[IP/ID]:[{culprit_ip}/{culprit_dev}], Arrival Time:[{ctime_ts}], Discoverer:[{ip}/{lrank}], ExceptionType:[Heartbeat Lost Occurred], Possible Reason:1. Process has exited, 2. Network Disconnected
R ]
R!RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048
R![ERROR] {asc_ts} (PID:{pid}, Device:{lrank}, RankID:{rank}) ERR00100 PTA call acl api failed
""", kind="hccl_notify_timeout")

_def("hccl_ei0006", "F117; F118", """
R!RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllreduce, error code is 6
R![ERROR] {asc_ts} (PID:{pid}, Device:{lrank}, RankID:{rank}) ERR01100 OPS call acl api failed.
R!EI0006: [PID: {pid}] {hccl_ts} Getting socket times out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck
R         Solution: 1. Check the rank service processes with other errors or no errors in the cluster.2. If this error is reported for all NPUs, check whether the time difference between the earliest and latest errors is greater than the connect timeout interval (120s by default)
""", kind="hccl_socket_timeout")

_def("child_failed", "F109; F111; F113; F073", """
A!ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {exitcode}) local_rank: {lrank} (pid: {pid}) of binary: /usr/bin/python3
A Traceback (most recent call last):
A   File "/usr/local/bin/torchrun", line 8, in <module>
A     sys.exit(main())
A   File "{site}/torch/distributed/run.py", line 919, in main
A     run(args)
A   File "{site}/torch/distributed/launcher/api.py", line 263, in launch_agent
A     raise ChildFailedError(
A!torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
A ============================================================
A!{script} FAILED
A ------------------------------------------------------------
A Failures:
A   <NO_OTHER_FAILURES>
A ------------------------------------------------------------
A Root Cause (first observed failure):
A [0]:
A   time      : {elastic_ts}
A   host      : {host}
A   rank      : {rank} (local_rank: {lrank})
A!  exitcode  : {exitcode} (pid: {pid})
A   error_file: <N/A>
A!  traceback : {child_tb}
A ============================================================
""", kind="torchrun_child_failed")

_def("sigterm_siblings", "F111; F027", """
A![{py_ts}] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process {pid} closing signal SIGTERM
""", kind="torchrun_sigterm")

_def("agent_sigterm", "torch.distributed.elastic agent (death signal handling)", """
A![{py_ts}] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM death signal, shutting down workers
""", kind="torchrun_sigterm")

_def("agent_signal_exc", "torch.distributed.elastic agent (SignalException)", """
A Traceback (most recent call last):
A   File "/usr/local/bin/torchrun", line 8, in <module>
A     sys.exit(main())
A!torch.distributed.elastic.multiprocessing.api.SignalException: Process {agent_pid} got signal: 15
""", kind="torchrun_sigterm")

_def("slurm_step_cancel", "F043 format; Slurm slurmstepd", """
S!slurmstepd: error: *** STEP {jobid}.0 ON {host} CANCELLED AT {slurm_ts} ***
""", kind="slurm_step_cancelled")

_def("slurm_step_cancel_nodefail", "Slurm slurmstepd (node failure)", """
S!slurmstepd: error: *** STEP {jobid}.0 ON {host} CANCELLED AT {slurm_ts} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
""", kind="slurm_step_cancelled")

_def("slurm_time_limit", "F043 format; Slurm slurmstepd (time limit)", """
S!slurmstepd: error: *** JOB {jobid} ON {host} CANCELLED AT {slurm_ts} DUE TO TIME LIMIT ***
""", kind="slurm_time_limit")

_def("srun_task_exit", "Slurm srun messages", """
S!srun: error: {victim_host}: tasks {task_lo}-{task_hi}: Exited with exit code {exit_status}
""", kind="srun_task_failed")

_def("srun_abort", "Slurm srun messages", """
S!srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
""", kind="srun_task_failed")

_def("srun_task_signal", "Slurm srun messages", """
S!srun: error: {victim_host}: task {rank}: {signal_text}
""", kind="srun_task_failed")

_def("ds_sigkill_handler", "F132", """
A![{py_ts}] [INFO] [launch.py:428:sigkill_handler] Killing subprocess {pid}
""", kind="ds_launcher_kill")

_def("ds_exit_code", "F132", """
A![{py_ts}] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', '{script}', '--local_rank={lrank}', '--deepspeed', '--deepspeed_config', 'ds_config.json'] exits with return code = {exitcode}
""", kind="ds_launcher_exit")

_def("pdsh_exit", "DeepSpeed pdsh launcher (pdsh ssh exit)", """
S!pdsh@{master}: {victim_host}: ssh exited with exit code {exit_status}
""", kind="ds_launcher_exit")

_def("mpirun_abort", "Open MPI mpirun abort messages", """
S --------------------------------------------------------------------------
S!Primary job  terminated normally, but 1 process returned
S!a non-zero exit code. Per user-direction, the job has been aborted.
S --------------------------------------------------------------------------
S!mpirun detected that one or more processes exited with non-zero status, thus causing
S the job to be terminated. The first process to do so was:
S
S   Process name: [[{mpi_job},1],{first_rank}]
S   Exit code:    {exit_status}
S --------------------------------------------------------------------------
""", kind="mpirun_abort")

# --------------------------------------------------------------------------------------
# Benign lines that look alarming and also appear in healthy runs (noise).
# (block id, source, template, stream, frameworks, where) -- see simulate._noise_plan.
# --------------------------------------------------------------------------------------

BENIGN: tuple[tuple[str, str, str, str, tuple[str, ...], str], ...] = (
    ("ld_preload", "common container noise (ld.so preload failure, ignored)",
     "ERROR: ld.so: object '/usr/lib/x86_64-linux-gnu/libnccl-net.so' from LD_PRELOAD cannot be preloaded (cannot open shared object file): ignored.",
     "R", FRAMEWORKS, "init"),
    ("ibverbs_warn", "N005",
     "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs{lrank}",
     "R", NVIDIA, "init"),
    ("c10d_ipv6", "PyTorch c10d socket warning (IPv6 unavailable)",
     "[W{glog_w} socket.cpp:752] [c10d] The client socket cannot be initialized to connect to [{master}]:29500 (errno: 97 - Address family not supported by protocol).",
     "R", FRAMEWORKS, "init"),
    ("barrier_device", "PyTorch ProcessGroupNCCL barrier warning",
     "[W{glog_w} ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank {rank}]  using GPU {lrank} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() with a device_id.",
     "R", NVIDIA, "init"),
    ("torchvision_ext", "torchvision image extension warning",
     "{site}/torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: 'libc10_cuda.so: cannot open shared object file: No such file or directory'If you don't plan on using image functionality from `torchvision.io`, you can ignore this warning. Otherwise, there might be something wrong with your environment. Did you have `libjpeg` or `libpng` installed before building `torchvision` from source?",
     "R", ("hf", "deepspeed", "torchtitan"), "init"),
    ("reentrant_warn", "PyTorch torch.utils.checkpoint deprecation warning",
     "{site}/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
     "R", ("hf", "deepspeed", "megatron"), "train_start"),
    ("autocast_deprecated", "PyTorch FutureWarning (torch.cuda.amp.autocast)",
     "{site}/deepspeed/runtime/zero/linear.py:47: FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
     "R", ("deepspeed", "hf"), "init"),
    ("use_cache_warn", "transformers warning (gradient checkpointing)",
     "[WARNING|logging.py:329] {py_ts} >> `use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
     "R", ("hf",), "train_start"),
    ("gid_change", "NCCL IB async event (benign GID table change)",
     "{host}:{pid}:{tid} [{lrank}] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : GID table change",
     "R", NVIDIA, "train"),
    ("wandb_error", "wandb system monitor noise",
     "wandb: ERROR Failed to sample metric: Not Supported",
     "R", ("hf", "deepspeed", "torchtitan", "megatron"), "train"),
    ("reloop", "N011",
     "[titan] {py_ts} - root - WARNING - Dataset c4 is being re-looped",
     "R", ("torchtitan",), "train"),
    ("npu_fallback", "F118 (CPU fallback warning, benign by itself)",
     "[W VariableFallbackKernel.cpp:51] Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on the NPU backend and will fall back to run on the CPU. This may have performance implications. (function npu_cpu_fallback)",
     "R", ("mindspeed",), "train_start"),
    ("npu_jit_warn", "torch_npu warning layout (F121/F136)",
     "[W compiler_depend.ts:133] Warning: Warning: Device do not support double dtype now, dtype cast repalce with float. (function operator())",
     "R", ("mindspeed",), "init"),
    ("grad_sync_warn", "PyTorch DDP reducer warning",
     "[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every iteration,  which can adversely affect performance. If your model indeed never has any unused parameters in the forward pass, consider turning this flag off. Note that this warning may be a false positive if your model has flow control causing later iterations to have unused parameters. (function operator())",
     "R", ("hf",), "train_start"),
    ("hccl_exec_timeout_warn", "torch_npu environment warning",
     "[W compiler_depend.ts:615] Warning: HCCL_EXEC_TIMEOUT is set to 1800s, communication timeout may be reported if the operator takes longer. (function operator())",
     "R", ("mindspeed",), "init"),
)

# One-off harmless lines that look alarming; a job shows a few of them on one node, so they
# are rarely in the baselines: red herrings for spatial analysis.  (id, source, template, stream)
DECOYS: tuple[tuple[str, str, str, str], ...] = (
    ("c10d_connect_retry", "PyTorch c10d client connect retry (succeeds on retry)",
     "[W{glog_w} socket.cpp:663] [c10d] The client socket has failed to connect to [{master}]:29500 (errno: 110 - Connection timed out).",
     "R"),
    ("perf_irq", "Linux kernel perf sample-rate notice",
     "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate to 79750", "K"),
    ("hrtimer", "Linux kernel hrtimer notice", "hrtimer: interrupt took 2131562 ns", "K"),
    ("inforom", "NVIDIA driver infoROM warning (healthy GPU, stale ROM checksum)",
     "WARNING: infoROM is corrupted at gpu {pci_full}", "R"),
    ("dataloader_workers", "PyTorch DataLoader worker-count warning",
     "{site}/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
     "R"),
    ("numpy_overflow", "NumPy RuntimeWarning", "{site}/numpy/core/_methods.py:118: RuntimeWarning: overflow encountered in reduce", "R"),
)

# Megatron argument dump (N004, N027): (name, value template)
MEGATRON_ARGS: tuple[tuple[str, str], ...] = (
    ("accumulate_allreduce_grads_in_fp32", "False"), ("adam_beta1", "0.9"), ("adam_beta2", "0.95"),
    ("adam_eps", "1e-08"), ("attention_dropout", "0.0"), ("bf16", "True"), ("clip_grad", "1.0"),
    ("data_path", "['{data_path}']"), ("distributed_backend", "{backend}"),
    ("distributed_timeout_minutes", "{timeout_min}"), ("eval_interval", "{eval_interval}"),
    ("eval_iters", "10"), ("ffn_hidden_size", "{ffn}"), ("global_batch_size", "{gbs}"),
    ("hidden_dropout", "0.0"), ("hidden_size", "{hidden}"), ("init_method_std", "0.02"),
    ("load", "{ckpt_dir}"), ("log_interval", "1"), ("lr", "{lr}"), ("lr_decay_style", "cosine"),
    ("lr_warmup_iters", "{warmup}"), ("max_position_embeddings", "{seq}"),
    ("micro_batch_size", "1"), ("min_lr", "3e-05"), ("num_attention_heads", "{heads}"),
    ("num_layers", "{layers}"), ("optimizer", "adam"), ("pipeline_model_parallel_size", "{pp}"),
    ("position_embedding_type", "rope"), ("rank", "0"), ("save", "{ckpt_dir}"),
    ("save_interval", "{save_interval}"), ("seed", "1234"), ("seq_length", "{seq}"),
    ("sequence_parallel", "True"), ("split", "949,50,1"), ("swiglu", "True"),
    ("tensor_model_parallel_size", "{tp}"), ("tokenizer_type", "Llama2Tokenizer"),
    ("train_iters", "{train_iters}"), ("use_distributed_optimizer", "True"),
    ("use_flash_attn", "True"), ("weight_decay", "0.1"), ("world_size", "{world}"),
)


@dataclass(frozen=True)
class FaultSpec:
    """A fault kind: what happened, where it may strike, and how it shows up.

    ``mode`` selects the behaviour in :mod:`l4.sim.simulate`:
    ``crash`` (culprit prints its evidence and its processes exit; peers see resets and
    time out), ``silent`` (evidence from the kernel, then the node falls silent),
    ``hang`` (culprit stops making progress; peers hit the collective timeout),
    ``everywhere`` (a user error every rank hits identically), ``scheduler`` (the
    scheduler ends the job on every node), ``node_failure``, ``nan``, ``slow``,
    ``store`` (a node cannot reach the rendezvous store).
    """

    id: str
    category: str
    root_cause: str
    source: str
    mode: str
    frameworks: tuple[str, ...]
    stages: tuple[tuple[str, float], ...]
    blocks: tuple[str, ...] = ()
    who: str = "one"  # one rank | local (every rank of the culprit) | node (once)
    exitcode: int = 1
    culprits: str = "one"  # one | all | node0
    platforms: tuple[str, ...] = ("slurm", "k8s", "bare")
    silent_crash: bool = False  # culprit dies before it can write anything (crash mode)


_TRAIN = (("training", 1.0),)

FAULTS: dict[str, FaultSpec] = {f.id: f for f in (
    FaultSpec("gpu_fell_off_bus", "hardware",
              "A GPU fell off the PCIe bus (Xid 79); the node stops responding and its peers time out",
              "F020", "silent", NVIDIA, (("training", 0.7), ("evaluation", 0.3)), ("xid79",), "node"),
    FaultSpec("gpu_ecc_uncorrectable", "hardware",
              "Uncorrectable GPU memory ECC error (Xid 48/94/95) killed the rank using that GPU",
              "F008; F007; F005", "crash", NVIDIA, _TRAIN, ("xid_ecc", "cuda_ecc_error"), "one", -6),
    FaultSpec("nvlink_error", "hardware",
              "Fatal NVLink error between GPUs of one node (Xid 149/145) aborted the collective",
              "F005; F127", "crash", NVIDIA, _TRAIN, ("xid_nvlink", "nccl_cuda_nvlink"), "one", -6),
    FaultSpec("ib_link_down", "hardware",
              "InfiniBand port of one node went down; peers get completion errors (status=12) from it and the job hangs",
              "F015; F001; F098; F130", "crash", NVIDIA, _TRAIN, ("ib_port_error",), "local", -6),
    FaultSpec("npu_hbm_ecc", "hardware",
              "Uncorrectable multi-bit ECC error in an NPU's HBM (error 507053) killed the rank",
              "F119; F123; CANN error code 507053", "crash", ("mindspeed",), _TRAIN, ("npu_hbm_uce",), "one", 1),
    FaultSpec("pcie_gpu_lost", "hardware",
              "A GPU is lost from PCIe after repeated AER errors on its root port; the rank hangs",
              "F002", "hang", NVIDIA, _TRAIN, ("pcie_aer", "pcie_aer", "pcie_aer", "pcie_aer_fatal"), "node"),
    FaultSpec("cuda_oom", "user",
              "CUDA out of memory on one rank (a long batch / too large micro-batch)",
              "F052; F053", "crash", NVIDIA, (("training", 0.75), ("evaluation", 0.25)), ("cuda_oom",), "one", 1),
    FaultSpec("npu_oom", "user",
              "NPU out of memory (model or batch too large for the device HBM)",
              "F070; F071", "crash", ("mindspeed",), (("training", 0.6), ("model_loading", 0.4)), ("npu_oom",), "one", 1),
    FaultSpec("nan_loss", "user",
              "Loss became NaN / fp16 loss scale collapsed (bad data or too high learning rate); every rank aborts",
              "F064; F085; F128; F129", "nan", ("megatron", "mindspeed", "deepspeed"), _TRAIN, (), "local", 1, "all"),
    FaultSpec("ckpt_shape_mismatch", "user",
              "Checkpoint does not match the model (size mismatch while loading the state dict)",
              "F131", "everywhere", FRAMEWORKS, (("model_loading", 1.0),), ("state_dict_mismatch",), "local", 1, "all"),
    FaultSpec("dataset_path_missing", "user",
              "Training data path does not exist (FileNotFoundError while building the dataset)",
              "F133; F040", "everywhere", FRAMEWORKS, (("data_loading", 1.0),), ("dataset_missing_hf",), "local", 1, "all"),
    FaultSpec("tp_size_mismatch", "user",
              "Resuming a checkpoint saved with a different tensor-parallel size",
              "F068", "everywhere", ("megatron", "mindspeed"), (("model_loading", 1.0),), ("tp_mismatch",), "local", 1, "all"),
    FaultSpec("ckpt_disk_full", "platform",
              "No space left on device while writing a checkpoint",
              "F037; F038; F030", "crash", FRAMEWORKS, (("checkpointing", 0.7), ("finalization", 0.3)), ("enospc_torch",), "one", 1),
    FaultSpec("ckpt_io_error", "platform",
              "Input/output error (EIO) from the shared file system while saving a checkpoint",
              "F034", "crash", ("megatron", "mindspeed", "torchtitan", "deepspeed"), (("checkpointing", 1.0),), ("eio_torch",), "one", 1),
    FaultSpec("ckpt_stale_handle", "platform",
              "NFS stale file handle (ESTALE) while saving a checkpoint",
              "F041; F081", "crash", ("hf", "deepspeed", "megatron"), (("checkpointing", 0.7), ("finalization", 0.3)), ("estale",), "one", 1),
    FaultSpec("slurm_node_failure", "platform",
              "Slurm lost a node (node failure); the job step is cancelled",
              "F043 (format); Slurm node-failure messages", "node_failure", FRAMEWORKS,
              (("training", 0.8), ("checkpointing", 0.2)), ("slurm_node_failure",), "node", 0, "one", ("slurm",)),
    FaultSpec("slurm_preemption", "platform",
              "The job was preempted by the scheduler",
              "F043", "scheduler", FRAMEWORKS, (("training", 0.7), ("evaluation", 0.15), ("checkpointing", 0.15)),
              ("slurm_preempt_step",), "node", 0, "all", ("slurm",)),
    FaultSpec("slurm_cancelled", "platform",
              "The job was cancelled by the scheduler/administrator (scancel)",
              "F043 (format)", "scheduler", FRAMEWORKS, (("training", 0.8), ("data_loading", 0.2)),
              ("slurm_cancel_step",), "node", 0, "all", ("slurm",)),
    FaultSpec("host_oom_kill", "platform",
              "Host (CPU) memory exhausted: the kernel OOM killer SIGKILLed a training process (exit code -9, no stack)",
              "F073; F109; F110; F111; F112; F047", "crash", FRAMEWORKS,
              (("training", 0.5), ("data_loading", 0.25), ("model_loading", 0.25)), (), "one", -9,
              silent_crash=True),
    FaultSpec("rendezvous_store_unreachable", "platform",
              "A node cannot reach the c10d TCPStore / rendezvous endpoint (network/DNS/firewall); initialization times out",
              "F029; F115", "store", FRAMEWORKS, (("initialization", 1.0),), ("tcpstore_connect_timeout",), "local", 1),
    FaultSpec("k8s_eviction", "platform",
              "Kubernetes evicted a worker pod (node low on ephemeral storage / memory)",
              "F046; F047", "crash", FRAMEWORKS, (("training", 0.8), ("checkpointing", 0.2)), ("k8s_evicted",), "node", -15,
              "one", ("k8s",)),
    FaultSpec("nccl_version_mismatch", "framework",
              "One node runs an incompatible NCCL/CUDA build; communicator setup fails with invalid usage",
              "F075; F091; F135; F089", "crash", NVIDIA, (("initialization", 1.0),),
              ("nccl_cuda_invalid", "nccl_invalid_usage"), "local", 1),
    FaultSpec("hccl_transport_error", "framework",
              "HCCL could not establish links from one node (EI0009 transport init error, ERR02200)",
              "F124; F028; F117", "crash", ("mindspeed",), (("initialization", 1.0),), ("hccl_transport_init",), "local", 1),
    FaultSpec("hccp_busy", "platform",
              "A stale process from a previous job still holds the NPUs of one node (EJ0001 HCCP init failed)",
              "F027", "crash", ("mindspeed",), (("initialization", 1.0),), ("hccp_busy",), "local", 1),
    FaultSpec("npu_aicpu_exception", "framework",
              "AICPU operator exception (507018) on one NPU; its peers report HCCL notify-wait timeouts (EI0002)",
              "F123; F136", "crash", ("mindspeed",), _TRAIN, ("aicpu_exception",), "one", 1),
    FaultSpec("nccl_illegal_memory_access", "framework",
              "Illegal memory access inside an NCCL kernel aborted one rank",
              "F127; F107", "crash", NVIDIA, _TRAIN, ("nccl_illegal_access",), "one", -6),
    FaultSpec("segfault", "framework",
              "Segmentation fault in a training process (exit code -11)",
              "F113; F106", "crash", FRAMEWORKS, (("training", 0.7), ("finalization", 0.3)), ("segv_backtrace",), "one", -11),
    FaultSpec("shm_exhausted", "platform",
              "/dev/shm too small in one node's container: NCCL shared-memory setup fails (Bus error / posix_fallocate)",
              "F030; F105; F106; F032", "crash", NVIDIA, (("initialization", 1.0),), ("shm_fallocate",), "local", -7),
    FaultSpec("hang", "hardware",
              "One node stopped making progress without any error (stuck GPU/kernel); its peers time out in the collective",
              "F092; F093; F108; F050", "hang", FRAMEWORKS, (("training", 0.8), ("checkpointing", 0.2)), (), "node"),
    FaultSpec("slow_node", "hardware",
              "One node is several times slower than the others (throttled GPU / degraded link); the job stalls",
              "F118; F096", "slow", ("megatron", "mindspeed", "deepspeed"), _TRAIN, (), "node"),
)}

# Per-framework replacement of a fault's indicator blocks (same kind of fault, the
# framework's own words for it).
FAULT_BLOCKS_BY_FRAMEWORK: dict[tuple[str, str], tuple[str, ...]] = {
    ("dataset_path_missing", "megatron"): ("dataset_missing_megatron",),
    ("dataset_path_missing", "mindspeed"): ("dataset_missing_megatron",),
    ("ckpt_shape_mismatch", "torchtitan"): ("dcp_size_mismatch",),
    ("ckpt_disk_full", "deepspeed"): ("enospc_ds",),
    ("ckpt_disk_full", "hf"): ("enospc_safetensors",),
    ("ckpt_io_error", "megatron"): ("eio_megatron",),
    ("ckpt_io_error", "mindspeed"): ("eio_megatron",),
    ("cuda_oom", "evaluation"): ("cuda_oom_eval",),
    ("npu_oom", "model_loading"): ("npu_oom_load",),
}

# Kinds that only ever come from faults (never printed by a healthy job).
FAULT_KINDS = frozenset(
    BLOCKS[b].kind for f in FAULTS.values() for b in f.blocks
) | frozenset(
    BLOCKS[b].kind for bs in FAULT_BLOCKS_BY_FRAMEWORK.values() for b in bs
) | {"megatron_nan", "ds_loss_scale_min", "ds_overflow_min", "nan_iteration", "kernel_oom",
     "sigkill_exit", "slurm_node_failure", "slurm_preemption", "slurm_cancel", "shm_bus_error"}

# Strings that identify fault messages in a log (used to prove baselines are clean).
FAULT_MARKERS: tuple[str, ...] = (
    "fallen off the bus", "ECC error", "NVLink error", "Got async event : port error",
    "507053", "AER: Corrected error", "AER: Uncorrected", "out of memory",
    "found NaN in local grad norm", "loss scale already at minimum", "size mismatch",
    "Size mismatch", "[Errno 2] No such file or directory", "Unable to find", "is not equal to the input argument",
    "No space left on device", "PytorchStreamWriter failed", "StorageFull", "Input/output error",
    "Stale file handle", "Node failure", "DUE TO PREEMPTION", "CANCELLED AT", "Killed process",
    "oom_kill", "The client socket has timed out", "ephemeral-storage", "Cuda failure 'invalid argument'",
    "invalid usage", "EJ0001", "EI0009", "507018", "illegal memory access", "Caught signal",
    "posix_fallocate", "Watchdog caught", "Connection reset by peer", "status=12", "status=5",
    "ChildFailedError", "EI0002", "EI0006", "SIGTERM", "lm loss: nan", "grad norm: nan",
)


# --------------------------------------------------------------------------------------
# Healthy output.  A step is (stage, who, condition, seconds until the next step, text).
# who: r0 (global rank 0), last (last global rank), l0 (local rank 0 of every node),
# l0x (local rank 0 of every node but the first), all (every rank), dp0 (ranks of the
# first data-parallel replica), node (the node's launcher, once), node0 (launcher of the
# first node only).  condition: "" always, or a style flag (nccl, torchrun, resume, fresh,
# ds_launcher, plog).  Sources: N0xx ids of the real-failure corpus.
# --------------------------------------------------------------------------------------

_TORCHRUN_BANNER = """
A WARNING:torch.distributed.run:
A *****************************************
A Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
A *****************************************
"""  # F135

_NCCL_INIT = """
R {host}:{pid}:{pid} [{lrank}] NCCL INFO Bootstrap : Using ib0:{ip}<0>
R {host}:{pid}:{pid} [{lrank}] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
R {host}:{pid}:{pid} [{lrank}] NCCL INFO cudaDriverVersion 12040
R {host}:{pid}:{tid} [{lrank}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:{ip}<0>
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Using non-device net plugin version 0
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Using network IB
R {host}:{pid}:{tid} [{lrank}] NCCL INFO comm 0x{comm} rank {rank} nranks {world} cudaDev {lrank} nvmlDev {lrank} busId {busid} commId 0x{commid} - Init START
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Setting affinity for GPU {lrank} to ffffffff,00000000,ffffffff
R {host}:{pid}:{tid} [{lrank}] NCCL INFO comm 0x{comm} rank {rank} nRanks {world} nNodes {nnodes} localRanks {rpn} localRank {lrank} MNNVL 0
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Trees [0] {tree_a}/-1/-1->{rank}->{tree_b} [1] {tree_a}/-1/-1->{rank}->{tree_b}
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Channel 00/0 : {rank}[{busid}] -> {next_rank}[{next_busid}] [send] via NET/IB/{hca}/GDRDMA
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Channel 01/0 : {rank}[{busid}] -> {next_rank}[{next_busid}] [send] via NET/IB/{hca}/GDRDMA
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Connected all rings
R {host}:{pid}:{tid} [{lrank}] NCCL INFO Connected all trees
R {host}:{pid}:{tid} [{lrank}] NCCL INFO threadThresholds 8/8/64 | 512/8/64 | 512 | 512
R {host}:{pid}:{tid} [{lrank}] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer
R {host}:{pid}:{tid} [{lrank}] NCCL INFO comm 0x{comm} rank {rank} nranks {world} cudaDev {lrank} nvmlDev {lrank} busId {busid} commId 0x{commid} - Init COMPLETE
"""  # N021, N022

_HCCL_INIT = """
R [INFO] HCCL({pid},python):{hccl_ts} [op_base.cc:1292] [{pid}]Entry-HcclCommInitRootInfoInner:ranks[{world}], rank[{rank}], rootinfo: host ip[{master_ip}] port[60000] nicDeploy[1] identifier[{master_ip}%enp_60000_0_{ident}], deviceLogicId[{lrank}]
R [INFO] HCCL({pid},python):{hccl_ts} [op_base.cc:1340] [{pid}]HcclCommInitRootInfoInner success, take time [{hccl_us}]us, rankNum[{world}], rank[{rank}]
"""  # N033

_MG_WORLD = """
R using world size: {world}, data-parallel size: {dp}, context-parallel size: 1 tensor-model-parallel size: {tp}, pipeline-model-parallel size: {pp}
R WARNING: Setting args.overlap_p2p_comm to False since non-interleaved schedule does not support overlapping p2p communication
R using torch.bfloat16 for parameters ...
R ------------------------ arguments ------------------------
R @args
R -------------------- end of arguments ---------------------
R setting number of micro-batches to constant {micro_batches}
R > building Llama2Tokenizer tokenizer ...
R  > padded vocab (size: {vocab_raw}) with {vocab_pad} dummy tokens (new size: {vocab})
R > initializing torch distributed ...
"""  # N027, N004, N005

_MG_INIT_DONE = """
R > initialized tensor model parallel with size {tp}
R > initialized pipeline model parallel with size {pp}
R > setting random seeds to 1234 ...
R > compiling dataset index builder ...
R make: Entering directory '{workdir}/megatron/core/datasets'
R make: Nothing to be done for 'default'.
R make: Leaving directory '{workdir}/megatron/core/datasets'
R >>> done with dataset index builder. Compilation time: 0.061 seconds
R > compiling and loading fused kernels ...
R >>> done with compiling and loading fused kernels. Compilation time: 2.174 seconds
R time to initialize megatron (seconds): {init_secs}
R [after megatron is initialized] datetime: {br_ts}
"""  # N005, N007

_MG_MODEL = """
R building GPT model ...
"""
_MG_PARAMS = """
R  > number of parameters on (tensor, pipeline) model parallel rank ({tp_rank}, {pp_rank}): {n_params}
"""  # N006
_MG_LOAD = """
R  loading checkpoint from {ckpt_dir} at iteration {start_iter}
R  checkpoint version 3.0
R   successfully loaded checkpoint from {ckpt_dir} [ t {tp_rank}, p {pp_rank} ] at iteration {start_iter}
R (min, max) time across ranks (ms):
R     load-checkpoint ................................: ({ms_a}, {ms_b})
"""  # N005, N028
_MG_FRESH = """
R WARNING: could not find the metadata file {ckpt_dir}/latest_checkpointed_iteration.txt
R     will not load any checkpoints and will start from random
"""
_MG_MODEL_DONE = """
R > learning rate decay style: cosine
R [after model, optimizer, and learning rate scheduler are built] datetime: {br_ts}
"""
_MG_DATA = """
R > building train, validation, and test datasets ...
R  > datasets target sizes (minimum size):
R     train:      {train_samples}
R     validation: {valid_samples}
R     test:       {test_samples}
R INFO:megatron.core.datasets.blended_megatron_dataset_config:mock = False
R INFO:megatron.core.datasets.gpt_dataset:Load the GPTDataset train indices
R INFO:megatron.core.datasets.gpt_dataset:> total number of samples: {ds_samples}
R INFO:megatron.core.datasets.gpt_dataset:> total number of epochs: 1
R INFO:megatron.core.datasets.gpt_dataset:Load the GPTDataset valid indices
R INFO:megatron.core.datasets.gpt_dataset:> total number of samples: {valid_samples}
R > finished creating GPT datasets ...
"""
# printed once the data iterators exist, i.e. when data loading is over
_MG_SETUP_DONE = """
R [after dataloaders are built] datetime: {br_ts}
R done with setup ...
R (min, max) time across ranks (ms):
R     model-and-optimizer-setup ......................: ({ms_a}, {ms_b})
R     train/valid/test-data-iterators-setup ..........: ({ms_c}, {ms_d})
R training ...
R [before the start of training step] datetime: {br_ts}
"""  # N028, N029, N031

_MG_EVAL = """
R (min, max) time across ranks (ms):
R     evaluate .......................................: ({ms_a}, {ms_b})
R ----------------------------------------------------------------------------------------------
R  validation loss at iteration {it} | lm loss value: {val_loss_e} | lm loss PPL: {val_ppl_e} |
R ----------------------------------------------------------------------------------------------
"""  # N003, N028
_MG_SAVE = """
R saving checkpoint at iteration {it:7d} to {ckpt_dir} in torch_dist format
"""  # N028
_MG_SAVED = """
R   successfully saved checkpoint from iteration {it:7d} to {ckpt_dir} [ t 1/{tp}, p 1/{pp} ]
R (min, max) time across ranks (ms):
R     save-checkpoint ................................: ({ms_a}, {ms_b})
"""  # N026, N028
_MG_FINAL = """
R [after training is done] datetime: {br_ts}
R ------------------------------------------------------------------------------------------------------------------
R  validation loss at the end of training for val data | lm loss value: {val_loss_e} | lm loss PPL: {val_ppl_e} |
R ------------------------------------------------------------------------------------------------------------------
"""  # N030
_AGENT_DONE = """
A INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.
A INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish
A INFO:torch.distributed.elastic.agent.server.api:Done waiting for other agents. Elapsed: {wait_secs} seconds
"""

_DS_RUNNER = """
A [{py_ts}] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to cuda (auto detect)
A [{py_ts}] [INFO] [runner.py:463:main] Using IP address of {master_ip} for node {master}
A [{py_ts}] [INFO] [multinode_runner.py:80:get_cmd] Running on the following workers: {worker_list}
A [{py_ts}] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w {worker_list} export PYTHONPATH={workdir};  cd {workdir}; /usr/bin/python3 -u -m deepspeed.launcher.launch --world_info=<world_info> --node_rank=%n --master_addr={master_ip} --master_port=29500 {script} --deepspeed --deepspeed_config ds_config.json
"""  # N015
_DS_LAUNCH = """
A [{py_ts}] [INFO] [launch.py:146:main] WORLD INFO DICT: {world_info}
A [{py_ts}] [INFO] [launch.py:152:main] nnodes={nnodes}, num_local_procs={rpn}, node_rank={node_index}
A [{py_ts}] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class 'list'>, {rank_mapping})
A [{py_ts}] [INFO] [launch.py:164:main] dist_world_size={world}
A [{py_ts}] [INFO] [launch.py:168:main] Setting CUDA_VISIBLE_DEVICES={cvd}
"""  # N015
_DS_COMM = """
R [{py_ts}] [INFO] [comm.py:637:init_distributed] cdb=None
"""
_DS_COMM0 = """
R [{py_ts}] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl
"""
_DS_DATA = """
R {loguru_ts} | INFO     | __main__:build_dataset:88 - Loading dataset from {data_path}
R Map (num_proc=16): 100%|██████████| {ds_rows}/{ds_rows} [00:{secs_a:02d}<00:00, {rate_a} examples/s]
R {loguru_ts} | INFO     | __main__:build_dataset:102 - Loaded {ds_rows} training samples, {val_rows} validation samples
"""  # N032 (loguru layout)
_DS_MODEL_ALL = """
R Loading checkpoint shards: 100%|██████████| {shards}/{shards} [00:{secs_a:02d}<00:00,  {rate_b}s/it]
R [{py_ts}] [INFO] [config.py:733:__init__] Config mesh_device None world_size = {world}
"""  # N017
_DS_MODEL_R0 = """
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version={ds_ver}, git-hash=unknown, git-branch=unknown
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed Flops Profiler Enabled: False
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] Using client Optimizer as basic optimizer
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] Creating torch.{dtype} ZeRO stage {zero} optimizer
R [{py_ts}] [INFO] [stage_1_and_2.py:148:__init__] Reduce bucket size 500000000
R [{py_ts}] [INFO] [stage_1_and_2.py:149:__init__] Allgather bucket size 500000000
R [{py_ts}] [INFO] [utils.py:827:see_memory_usage] Before initializing optimizer states
R [{py_ts}] [INFO] [utils.py:828:see_memory_usage] MA {mem_a} GB         Max_MA {mem_b} GB         CA {mem_b} GB         Max_CA {mem_c} GB
R [{py_ts}] [INFO] [utils.py:836:see_memory_usage] CPU Virtual Memory:  used = {cpu_used} GB, percent = {cpu_pct}%
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed Final Optimizer = FusedAdam
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed using configured LR scheduler = WarmupDecayLR
R [{py_ts}] [INFO] [config.py:997:print] DeepSpeedEngine configuration:
R [{py_ts}] [INFO] [config.py:1001:print]   activation_checkpointing_config  {{ "partition_activations": false, "contiguous_memory_optimization": false, "cpu_checkpointing": false, "number_checkpoints": null, "synchronize_checkpoint_boundary": false, "profile": false }}
R [{py_ts}] [INFO] [config.py:1001:print]   bfloat16_enabled ............. {bf16}
R [{py_ts}] [INFO] [config.py:1001:print]   fp16_enabled ................. {fp16}
R [{py_ts}] [INFO] [config.py:1001:print]   gradient_accumulation_steps .. 1
R [{py_ts}] [INFO] [config.py:1001:print]   gradient_clipping ............ 1.0
R [{py_ts}] [INFO] [config.py:1001:print]   steps_per_print .............. 1
R [{py_ts}] [INFO] [config.py:1001:print]   train_batch_size ............. {gbs}
R [{py_ts}] [INFO] [config.py:1001:print]   wall_clock_breakdown ......... {wall_clock}
R [{py_ts}] [INFO] [config.py:1001:print]   zero_optimization_stage ...... {zero}
"""  # N016, N017
_DS_RESUME = """
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint from {ckpt_dir}/global_step{start_iter}/mp_rank_00_model_states.pt...
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:29:load] [Torch] Loaded checkpoint from {ckpt_dir}/global_step{start_iter}/mp_rank_00_model_states.pt.
R [{py_ts}] [INFO] [engine.py:3012:_get_all_zero_checkpoint_state_dicts] successfully read {world} ZeRO state_dicts for rank {rank}
"""
_DS_TRAIN_START = """
R ***** Running training *****
R Beginning of Epoch 1/1, Total Micro Batches {micro_total}
"""  # N025
_DS_EVAL = """
R {loguru_ts} | INFO     | __main__:evaluation:240 - ***** Evaluating perplexity, Epoch 1/1 *****
"""
_DS_EVALED = """
R {loguru_ts} | INFO     | __main__:evaluation:251 - ppl: {val_ppl_f}, loss: {val_loss_f}
"""
_DS_SAVE_R0 = """
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step{it} is about to be saved!
R [{py_ts}] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: {ckpt_dir}/global_step{it}/mp_rank_00_model_states.pt
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving {ckpt_dir}/global_step{it}/mp_rank_00_model_states.pt...
"""  # N032
_DS_SAVE_ALL = """
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving {ckpt_dir}/global_step{it}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt...
"""  # N032
_DS_SAVED_R0 = """
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved {ckpt_dir}/global_step{it}/mp_rank_00_model_states.pt.
"""  # N032
_DS_SAVED_ALL = """
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved {ckpt_dir}/global_step{it}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt.
R [{py_ts}] [INFO] [engine.py:3244:_save_zero_checkpoint] zero checkpoint saved {ckpt_dir}/global_step{it}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt
"""  # N032
_DS_SAVE_DONE = """
R [{py_ts}] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step{it} is ready now!
"""  # N032
_DS_FINAL = """
R {loguru_ts} | INFO     | __main__:main:402 - saving the final model ...
"""
_DS_EXIT = """
A [{py_ts}] [INFO] [launch.py:351:main] Process {pid} exits successfully.
"""

_HF_INIT_ALL = """
R {us_ts} - WARNING - __main__ - Process rank: {rank}, device: cuda:{lrank}, n_gpu: 1, distributed training: True, 16-bits training: False
"""  # transformers examples/run_clm.py
_HF_INIT_R0 = """
R {us_ts} - INFO - __main__ - Training/evaluation parameters TrainingArguments(
R _n_gpu=1,
R adam_beta1=0.9,
R adam_beta2=0.999,
R bf16=True,
R ddp_timeout={timeout_s},
R gradient_checkpointing=True,
R learning_rate={lr},
R logging_steps=1,
R output_dir={out_dir},
R per_device_train_batch_size=4,
R save_steps={save_interval},
R eval_steps={eval_interval},
R seed=42,
R )
"""
_HF_DATA_R0 = """
R [INFO|tokenization_utils_base.py:2287] {py_ts} >> loading file tokenizer.model
R Running tokenizer on dataset (num_proc=16): 100%|██████████| {ds_rows}/{ds_rows} [00:{secs_a:02d}<00:00, {rate_a} examples/s]
R Grouping texts in chunks of {seq} (num_proc=16): 100%|██████████| {ds_rows}/{ds_rows} [00:{secs_b:02d}<00:00, {rate_a} examples/s]
"""
_HF_DATA_L0X = """
R Loading cached processed dataset at {hf_cache}/cache-{cache_id}.arrow
"""
_HF_MODEL_R0 = """
R [INFO|configuration_utils.py:733] {py_ts} >> loading configuration file {model_path}/config.json
R [INFO|modeling_utils.py:3474] {py_ts} >> loading weights file {model_path}/model.safetensors.index.json
"""
_HF_MODEL_ALL = """
R Loading checkpoint shards: 100%|██████████| {shards}/{shards} [00:{secs_a:02d}<00:00,  {rate_b}s/it]
"""
_HF_MODEL_DONE = """
R [INFO|modeling_utils.py:4280] {py_ts} >> All model checkpoint weights were used when initializing {model_class}.
R [INFO|modeling_utils.py:4288] {py_ts} >> All the weights of {model_class} were initialized from the model checkpoint at {model_path}.
"""
_HF_RESUME = """
R [INFO|trainer.py:2210] {py_ts} >>   Continuing training from checkpoint, will skip to saved global_step
R [INFO|trainer.py:2211] {py_ts} >>   Continuing training from epoch 0
R [INFO|trainer.py:2212] {py_ts} >>   Continuing training from global step {start_iter}
"""
_HF_TRAIN_START = """
R [INFO|trainer.py:601] {py_ts} >> Using auto half precision backend
R [INFO|trainer.py:2134] {py_ts} >> ***** Running training *****
R [INFO|trainer.py:2135] {py_ts} >>   Num examples = {ds_rows}
R [INFO|trainer.py:2136] {py_ts} >>   Num Epochs = 1
R [INFO|trainer.py:2137] {py_ts} >>   Instantaneous batch size per device = 4
R [INFO|trainer.py:2140] {py_ts} >>   Total train batch size (w. parallel, distributed & accumulation) = {gbs}
R [INFO|trainer.py:2141] {py_ts} >>   Gradient Accumulation steps = 1
R [INFO|trainer.py:2142] {py_ts} >>   Total optimization steps = {train_iters}
R [INFO|trainer.py:2143] {py_ts} >>   Number of trainable parameters = {n_params_commas}
"""  # N018
_HF_EVAL = """
R [INFO|trainer.py:3819] {py_ts} >>
R ***** Running Evaluation *****
R [INFO|trainer.py:3821] {py_ts} >>   Num examples = {val_rows}
R [INFO|trainer.py:3824] {py_ts} >>   Batch size = 8
"""
_HF_EVALED = """
R {{'eval_loss': {val_loss_f}, 'eval_runtime': {secs_a}.{secs_b:02d}, 'eval_samples_per_second': {rate_a}, 'eval_steps_per_second': {rate_b}, 'epoch': {epoch}}}
"""
_HF_SAVE = """
R [INFO|trainer.py:3503] {py_ts} >> Saving model checkpoint to {out_dir}/checkpoint-{it}
R [INFO|configuration_utils.py:472] {py_ts} >> Configuration saved in {out_dir}/checkpoint-{it}/config.json
R [INFO|configuration_utils.py:807] {py_ts} >> Configuration saved in {out_dir}/checkpoint-{it}/generation_config.json
"""  # N019
_HF_SAVED = """
R [INFO|modeling_utils.py:2807] {py_ts} >> Model weights saved in {out_dir}/checkpoint-{it}/model.safetensors
R [INFO|tokenization_utils_base.py:2702] {py_ts} >> tokenizer config file saved in {out_dir}/checkpoint-{it}/tokenizer_config.json
R [INFO|tokenization_utils_base.py:2711] {py_ts} >> Special tokens file saved in {out_dir}/checkpoint-{it}/special_tokens_map.json
"""  # N019
_HF_FINAL = """
R [INFO|trainer.py:2394] {py_ts} >>
R
R Training completed. Do not forget to share your model on huggingface.co/models =)
R
R
R {{'train_runtime': {train_rt}, 'train_samples_per_second': {rate_a}, 'train_steps_per_second': {rate_b}, 'train_loss': {val_loss_f}, 'epoch': 1.0}}
R [INFO|trainer.py:3503] {py_ts} >> Saving model checkpoint to {out_dir}
R [INFO|configuration_utils.py:472] {py_ts} >> Configuration saved in {out_dir}/config.json
"""
_HF_FINAL_DONE = """
R [INFO|modeling_utils.py:2807] {py_ts} >> Model weights saved in {out_dir}/model.safetensors
R ***** train metrics *****
R   epoch                    =        1.0
R   train_loss               =     {val_loss_f}
R   train_runtime            = {train_hms}
"""

_TT_INIT = """
R [titan] {py_ts} - root - INFO - Starting job: Llama 3 {model_size} training
R [titan] {py_ts} - root - WARNING - ENV[TORCH_NCCL_ASYNC_ERROR_HANDLING] = 1 will be overridden to 3 based on job config
R [titan] {py_ts} - root - INFO - Building 1-D device mesh with ['dp_shard'], [{world}]
R [titan] {py_ts} - root - INFO - [GC] Initial GC collection. 0.00 seconds.
"""  # N010, N012
_TT_DATA = """
R [titan] {py_ts} - root - INFO - Building tokenizer from {tokenizer_path}
R [titan] {py_ts} - root - INFO - HuggingFaceTokenizer built: #words {vocab_raw}, BOS ID 128000, EOS ID 128001
R [titan] {py_ts} - root - INFO - Preparing c4 dataset from allenai/c4
"""
_TT_MODEL = """
R [titan] {py_ts} - root - INFO - Building llama3 {model_size} with TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', dim={hidden}, n_layers={layers}, n_heads={heads}, n_kv_heads=8, vocab_size={vocab}, multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, max_seq_len={seq}, depth_init=True, use_flex_attn=False, attn_mask_type='causal', eos_id=0)
R [titan] {py_ts} - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory
R [titan] {py_ts} - root - INFO - Model llama3 {model_size} size: {n_params_commas} total parameters
R [titan] {py_ts} - root - INFO - Applied selective activation checkpointing to the model
R [titan] {py_ts} - root - INFO - Applied FSDP to the model
R [titan] {py_ts} - root - INFO - Peak FLOPS used for computing MFU: 9.890e+14
R [titan] {py_ts} - root - INFO - CUDA memory usage for model: {mem_a}GiB({mem_pct}%)
"""  # N012
_TT_RESUME = """
R [titan] {py_ts} - root - INFO - Loading the checkpoint from {ckpt_dir}/step-{start_iter}.
R [titan] {py_ts} - root - INFO - [GC] GC collection for checkpoint loading. 0.01 seconds.
R [titan] {py_ts} - root - INFO - Finished loading the checkpoint in {secs_a}.{secs_b:02d} seconds.
"""
_TT_TRAIN_START = """
R [titan] {py_ts} - root - INFO - Mixed precision training is handled by fully_shard
R [titan] {py_ts} - root - INFO - Trainer is initialized with local batch size {lbs}, global batch size {gbs}, gradient accumulation steps 1, sequence length {seq}, total steps {train_iters} (warmup {warmup})
R [titan] {py_ts} - root - INFO - Training starts at step {first_iter}.
"""  # N012
_TT_EVAL = """
R [titan] {py_ts} - root - INFO - validate step: {it:2d}  loss: {val_loss_f}  memory: {mem_a}GiB({mem_pct}%)
"""
_TT_SAVE = """
R [titan] {py_ts} - root - INFO - Saving the checkpoint (or staging if async is enabled).
R [titan] {py_ts} - root - INFO - [GC] GC collection invoked by checkpointer. 0.02 seconds.
"""
_TT_SAVED = """
R [titan] {py_ts} - root - INFO - Finished saving the checkpoint (or staging if async is enabled)in {secs_a}.{secs_b:02d} seconds.
"""
_TT_FINAL = """
R [titan] {py_ts} - root - INFO - Saving a full checkpoint at last step, step {it}.
"""
_TT_FINAL_DONE = """
R [titan] {py_ts} - root - INFO - Finished saving the checkpoint (or staging if async is enabled)in {secs_a}.{secs_b:02d} seconds.
R [titan] {py_ts} - root - INFO - Sleeping 2 seconds for other ranks to complete
R [titan] {py_ts} - root - INFO - Training completed
R [titan] {py_ts} - root - INFO - Process group destroyed.
"""

Step = tuple[str, str, str, float, str]

_MEGATRON_STARTUP: tuple[Step, ...] = (
    ("initialization", "node", "torchrun", 1.5, _TORCHRUN_BANNER),
    ("initialization", "r0", "", 2.0, _MG_WORLD),
    ("initialization", "all", "nccl", 4.0, _NCCL_INIT),
    ("initialization", "all", "plog", 4.0, _HCCL_INIT),
    ("initialization", "r0", "", 3.0, _MG_INIT_DONE),
    ("model_loading", "r0", "", 1.0, _MG_MODEL),
    ("model_loading", "dp0", "", 6.0, _MG_PARAMS),
    ("model_loading", "r0", "resume", 25.0, _MG_LOAD),
    ("model_loading", "r0", "fresh", 1.0, _MG_FRESH),
    ("model_loading", "r0", "", 2.0, _MG_MODEL_DONE),
    ("data_loading", "r0", "", 12.0, _MG_DATA),
    ("training", "r0", "", 0.5, _MG_SETUP_DONE),
)
_DEEPSPEED_STARTUP: tuple[Step, ...] = (
    ("initialization", "node0", "", 2.0, _DS_RUNNER),
    ("initialization", "node", "", 3.0, _DS_LAUNCH),
    ("initialization", "all", "", 1.0, _DS_COMM),
    ("initialization", "r0", "", 2.0, _DS_COMM0),
    ("initialization", "all", "nccl", 3.0, _NCCL_INIT),
    ("data_loading", "l0", "", 20.0, _DS_DATA),
    ("model_loading", "all", "", 15.0, _DS_MODEL_ALL),
    ("model_loading", "r0", "", 3.0, _DS_MODEL_R0),
    ("model_loading", "all", "resume", 20.0, _DS_RESUME),
    ("training", "r0", "", 1.0, _DS_TRAIN_START),
)
_HF_STARTUP: tuple[Step, ...] = (
    ("initialization", "node", "torchrun", 1.5, _TORCHRUN_BANNER),
    ("initialization", "all", "", 1.0, _HF_INIT_ALL),
    ("initialization", "r0", "", 1.0, _HF_INIT_R0),
    ("initialization", "all", "nccl", 3.0, _NCCL_INIT),
    ("data_loading", "r0", "", 25.0, _HF_DATA_R0),
    ("data_loading", "l0x", "", 3.0, _HF_DATA_L0X),
    ("model_loading", "r0", "", 1.0, _HF_MODEL_R0),
    ("model_loading", "all", "", 18.0, _HF_MODEL_ALL),
    ("model_loading", "r0", "", 2.0, _HF_MODEL_DONE),
    ("model_loading", "r0", "resume", 15.0, _HF_RESUME),
    ("training", "r0", "", 1.0, _HF_TRAIN_START),
)
_TORCHTITAN_STARTUP: tuple[Step, ...] = (
    ("initialization", "node", "torchrun", 1.5, _TORCHRUN_BANNER),
    ("initialization", "l0", "", 2.0, _TT_INIT),
    ("initialization", "all", "nccl", 3.0, _NCCL_INIT),
    ("data_loading", "l0", "", 6.0, _TT_DATA),
    ("model_loading", "l0", "", 12.0, _TT_MODEL),
    ("model_loading", "l0", "resume", 18.0, _TT_RESUME),
    ("training", "l0", "", 1.0, _TT_TRAIN_START),
)

STARTUP: dict[str, tuple[Step, ...]] = {
    "megatron": _MEGATRON_STARTUP,
    "mindspeed": _MEGATRON_STARTUP,
    "deepspeed": _DEEPSPEED_STARTUP,
    "hf": _HF_STARTUP,
    "torchtitan": _TORCHTITAN_STARTUP,
}
EVAL: dict[str, tuple[Step, ...]] = {
    "megatron": (("evaluation", "last", "end", 0.0, _MG_EVAL),),
    "mindspeed": (("evaluation", "last", "end", 0.0, _MG_EVAL),),
    "deepspeed": (("evaluation", "r0", "", 0.0, _DS_EVAL), ("evaluation", "r0", "end", 0.0, _DS_EVALED)),
    "hf": (("evaluation", "r0", "", 0.0, _HF_EVAL), ("evaluation", "r0", "end", 0.0, _HF_EVALED)),
    "torchtitan": (("evaluation", "l0", "end", 0.0, _TT_EVAL),),
}
SAVE: dict[str, tuple[Step, ...]] = {
    "megatron": (("checkpointing", "r0", "", 0.0, _MG_SAVE), ("checkpointing", "r0", "end", 0.0, _MG_SAVED)),
    "mindspeed": (("checkpointing", "r0", "", 0.0, _MG_SAVE), ("checkpointing", "r0", "end", 0.0, _MG_SAVED)),
    "deepspeed": (("checkpointing", "r0", "", 0.3, _DS_SAVE_R0), ("checkpointing", "all", "", 0.0, _DS_SAVE_ALL),
                  ("checkpointing", "r0", "end", 0.0, _DS_SAVED_R0), ("checkpointing", "all", "end", 0.0, _DS_SAVED_ALL),
                  ("checkpointing", "r0", "end", 0.0, _DS_SAVE_DONE)),
    "hf": (("checkpointing", "r0", "", 0.0, _HF_SAVE), ("checkpointing", "r0", "end", 0.0, _HF_SAVED)),
    "torchtitan": (("checkpointing", "l0", "", 0.0, _TT_SAVE), ("checkpointing", "l0", "end", 0.0, _TT_SAVED)),
}
FINAL: dict[str, tuple[Step, ...]] = {
    "megatron": (("finalization", "last", "", 3.0, _MG_FINAL), ("finalization", "r0", "", 0.0, _MG_SAVE),
                 ("finalization", "r0", "end", 0.0, _MG_SAVED), ("finalization", "node", "torchrun+end", 0.0, _AGENT_DONE)),
    "mindspeed": (("finalization", "last", "", 3.0, _MG_FINAL), ("finalization", "r0", "", 0.0, _MG_SAVE),
                  ("finalization", "r0", "end", 0.0, _MG_SAVED), ("finalization", "node", "torchrun+end", 0.0, _AGENT_DONE)),
    "deepspeed": (("finalization", "r0", "", 1.0, _DS_FINAL), ("finalization", "r0", "", 0.3, _DS_SAVE_R0),
                  ("finalization", "all", "", 0.0, _DS_SAVE_ALL), ("finalization", "r0", "end", 0.0, _DS_SAVED_R0),
                  ("finalization", "all", "end", 0.0, _DS_SAVED_ALL), ("finalization", "r0", "end", 0.0, _DS_SAVE_DONE),
                  ("finalization", "node_all", "end", 0.0, _DS_EXIT)),
    "hf": (("finalization", "r0", "", 0.0, _HF_FINAL), ("finalization", "r0", "end", 0.0, _HF_FINAL_DONE),
           ("finalization", "node", "torchrun+end", 0.0, _AGENT_DONE)),
    "torchtitan": (("finalization", "l0", "", 0.0, _TT_FINAL), ("finalization", "l0", "end", 0.0, _TT_FINAL_DONE),
                   ("finalization", "node", "torchrun+end", 0.0, _AGENT_DONE)),
}
