"""Fault text builders, propagation to peers and launcher teardown."""
from common import ts_ascend, ts_elastic, ts_glog, ts_py
from styles import agent_log

# ----------------------------------------------------------------------------- helpers


class X:
    """fault context"""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def ind(S, X, text, kind, lr=None, node=None, t=None):
    node = X.node if node is None else node
    g = S.g(node, X.lr if lr is None else lr)
    S.out(node, text, rank=g, label=("ind", kind), t=t)


def sym(S, node, text, kind, rank=None, t=None):
    S.out(node, text, rank=rank, label=("sym", kind), t=t)


def tb_lines(frames, exc):
    out = ["Traceback (most recent call last):"]
    for f, ln, fn, code in frames:
        out.append('  File "%s", line %d, in %s' % (f, ln, fn))
        out.append("    " + code)
    return out, exc


def emit_tb(S, X, frames, exc, kind, lr=None, node=None, who="ind", t=None):
    """traceback: frames as <kind>:context, the exception line(s) as <kind> (first line) and context."""
    node = X.node if node is None else node
    rank = S.g(node, X.lr if lr is None else lr)
    lab = "ind" if who == "ind" else "sym"
    pre, _ = tb_lines(frames, None)
    for l in pre:
        S.out(node, l, rank=rank, label=(lab, kind + ":context"), t=t)
    S.out(node, exc, rank=rank, label=(lab, kind), t=t)


def cuda_tail(S, X, kind, lr=None):
    for l in ["CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
              "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."]:
        ind(S, X, l, kind + ":context", lr=lr)


def cpp_frames(S, site, what, where="c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43"):
    lib = "%s/torch/lib" % site
    r = S.r
    a = r.randint(0x7f0000000000, 0x7fffffffffff) & ~0xfff
    return ["Exception raised from %s (most recent call first):" % where,
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x%x in %s/libc10.so)" % (a + 0x96, lib),
            "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x64 (0x%x in %s/libc10.so)" % (a + 0x4e3b4, lib),
            "frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118 (0x%x in %s/libc10_cuda.so)" % (a + 0x3f118, lib),
            "frame #3: <unknown function> + 0x%x (0x%x in %s/libtorch_cuda.so)" % (0x1042a6c, a + 0x1042a6c, lib),
            "frame #4: <unknown function> + 0xdc253 (0x%x in /lib/x86_64-linux-gnu/libstdc++.so.6)" % (a + 0x1dc253),
            "frame #5: <unknown function> + 0x94ac3 (0x%x in /lib/x86_64-linux-gnu/libc.so.6)" % (a + 0x2094ac3),
            "frame #6: <unknown function> + 0x126850 (0x%x in /lib/x86_64-linux-gnu/libc.so.6)" % (a + 0x2126850),
            ""]


def nccl_pre(S, node, lr, tid_off=0):
    pid = S.pid(node, lr)
    return "%s:%d:%d [%d]" % (S.nodes[node].host, pid, pid + 200 + tid_off, lr)


def pg_not_destroyed(S, X, lr=None):
    if S.c.torch >= "2.4":
        ind(S, X, "[W%s ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())" % ts_glog(S.lt(X.node))[1:], "pg_not_destroyed:context", lr=lr)


def gpu_monitor(S, X, msg, kind):
    """some clusters run a sidecar that echoes kernel messages into the job log"""
    ind(S, X, "[%s] [node-health] %s kernel: %s" % (ts_py(S.lt(X.node)), S.nodes[X.node].host, msg), kind, lr=0)


def bus(S, X, lr=None):
    return ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"][(X.lr if lr is None else lr) % 8]


def ckpt_file(S, X):
    c = S.c
    if c.fw == "deepspeed":
        return "%s/global_step%d/bf16_zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (c.ckpt_dir, X.save_it, X.g)
    if c.fw == "hf":
        return "%s/checkpoint-%d/model-0000%d-of-00003.safetensors" % (c.ckpt_dir, X.save_it, X.g % 3 + 1)
    if c.fw == "torchtitan":
        return "%s/step-%d/__%d_0.distcp" % (c.ckpt_dir, X.save_it, X.g)
    return "%s/iter_%07d/__%d_0.distcp" % (c.ckpt_dir, X.save_it, X.g) if c.word == 0 else "%s/iter_%07d/mp_rank_%02d_%03d/distrib_optim.pt" % (c.ckpt_dir, X.save_it, X.g % max(1, c.tp), X.g // max(1, c.tp) % max(1, c.pp))


# ----------------------------------------------------------------------------- fault builders
# each returns dict(prop=..., exit=int, sig=str|None, agent_ind=bool)


def f_gpu_xid79_fell_off_bus(S, X):
    c = S.c
    if S.r.random() < 0.6:
        gpu_monitor(S, X, "NVRM: Xid (PCI:0000:%s:00): 79, pid=%d, name=python, GPU has fallen off the bus." % (bus(S, X), S.pid(X.node, X.lr)), "xid79")
        gpu_monitor(S, X, "NVRM: GPU 0000:%s:00.0: GPU has fallen off the bus." % bus(S, X), "xid79:context")
    pre = "[E%s ProcessGroupNCCL.cpp:1515] " % ts_glog(S.lt(X.node))[1:] if c.torch >= "2.3" else "[E ProcessGroupNCCL.cpp:916] "
    ind(S, X, pre + "[PG 0 Rank %d] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure" % X.g, "cuda_unspecified_launch_failure")
    cuda_tail(S, X, "cuda_unspecified_launch_failure")
    for l in cpp_frames(S, c.site, ""):
        ind(S, X, l, "cuda_unspecified_launch_failure:context")
    ind(S, X, "terminate called after throwing an instance of 'c10::DistBackendError'", "terminate_dist_backend")
    ind(S, X, "  what():  [PG 0 Rank %d] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure" % X.g, "cuda_unspecified_launch_failure")
    return dict(prop=S.r.choice(["wd", "ib"]), exit=-6)


def f_gpu_ecc_dbe(S, X):
    if S.r.random() < 0.5:
        gpu_monitor(S, X, "NVRM: Xid (PCI:0000:%s:00): 48, pid=%d, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 1." % (bus(S, X), S.pid(X.node, X.lr)), "xid48")
    emit_tb(S, X, S.fw.frames(X.stage), "RuntimeError: CUDA error: uncorrectable ECC error encountered", "cuda_ecc_uncorrectable")
    cuda_tail(S, X, "cuda_ecc_uncorrectable")
    pg_not_destroyed(S, X)
    return dict(prop="wd", exit=1)


def f_gpu_row_remap_contained_ecc(S, X):
    gpu_monitor(S, X, "NVRM: Xid (PCI:0000:%s:00): 94, pid=%d, name=python, Contained: SM (0x1). RST: No, D-RST: No" % (bus(S, X), S.pid(X.node, X.lr)), "xid94")
    if S.r.random() < 0.7:
        gpu_monitor(S, X, "NVRM: Xid (PCI:0000:%s:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x%012x) marked for remapping, reset gpu to activate." % (bus(S, X), S.r.randint(2**30, 2**36)), "xid63")
    emit_tb(S, X, S.fw.frames("training"), "RuntimeError: CUDA error: uncorrectable ECC error encountered", "cuda_ecc_uncorrectable")
    cuda_tail(S, X, "cuda_ecc_uncorrectable")
    return dict(prop="wd", exit=1)


def f_nvlink_uncorrectable(S, X):
    c = S.c
    if S.r.random() < 0.6:
        gpu_monitor(S, X, "NVRM: Xid (PCI:0000:%s:00): 74, pid=%d, name=python, NVLink: fatal error detected on link 9(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)" % (bus(S, X), S.pid(X.node, X.lr)), "xid74")
    lrs = [X.lr] + ([(X.lr + 1) % c.rpn] if c.rpn > 1 else [])
    for lr in lrs:
        p = nccl_pre(S, X.node, lr)
        ind(S, X, "%s enqueue.cc:1559 NCCL WARN Cuda failure 'unspecified launch failure'" % p, "nccl_cuda_failure", lr=lr)
        ind(S, X, "%s NCCL INFO group.cc:221 -> 1" % p, "nccl_cuda_failure:context", lr=lr)
    for lr in lrs:
        emit_tb(S, X, S.fw.frames("training"), "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2006, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version %s" % c.nccl_ver, "nccl_unhandled_cuda_error", lr=lr)
        ind(S, X, "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'unspecified launch failure'", "nccl_unhandled_cuda_error:context", lr=lr)
    return dict(prop="wd", exit=1, extra_failed=lrs[1:])


def _ib_completion(S, node, lr, peer_ip, status=12, err=129, opcode=0, dirn="Send"):
    return "%s ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer %s<%d> with status=%d opcode=%d len=0 vendor err %d (%s) localGid ::ffff:%s remoteGids::ffff:%s" % (
        nccl_pre(S, node, lr, 41), peer_ip, S.r.randint(30000, 60000), status, opcode, err, dirn, S.nodes[node].ip, peer_ip)


def nccl_remote_error_exc(S):
    return ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version %s" % S.c.nccl_ver)


def f_ib_port_flap(S, X):
    peer = S.nodes[(X.node + 1) % S.n].ip
    ind(S, X, _ib_completion(S, X.node, X.lr, peer), "ib_completion_error_status12")
    ind(S, X, "%s NCCL INFO transport/net.cc:1302 -> 6" % nccl_pre(S, X.node, X.lr, 41), "ib_completion_error_status12:context")
    ind(S, X, "%s NCCL INFO proxy.cc:698 -> 6" % nccl_pre(S, X.node, X.lr, 41), "ib_completion_error_status12:context")
    emit_tb(S, X, S.fw.frames("training") if X.stage == "training" else S.fw.frames(X.stage), nccl_remote_error_exc(S), "nccl_remote_error")
    ind(S, X, "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\nLast error:\nNET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Send)" % (peer, S.r.randint(30000, 60000)), "nccl_remote_error:context")
    return dict(prop="ib", exit=1)


def ib_flap_lead(S, X, k):
    """intermittent port errors printed by the culprit before the fatal error"""
    p = nccl_pre(S, X.node, X.lr, 7)
    dev = "mlx5_%d:1" % (X.lr // 2 % 4)
    ind(S, X, "%s NCCL WARN NET/IB : %s Got async event : port error" % (p, dev), "ib_port_error_event")
    if k % 2 == 0:
        ind(S, X, "%s NCCL WARN NET/IB : %s Got async event : port active" % (p, dev), "ib_port_error_event:context")


def f_ib_wq_access_violation(S, X):
    p = nccl_pre(S, X.node, X.lr, 7)
    ind(S, X, "%s NCCL WARN NET/IB : mlx5_%d:1 Got async event : local access violation work queue error" % (p, X.lr // 2 % 4), "ib_wq_access_violation")
    ind(S, X, "mlx5: %s: got completion with error:" % S.nodes[X.node].host, "mlx5_cqe_error")
    for l in ["00000000 00000000 00000000 00000000", "00000000 00000000 00000000 00000000", "00000000 00000000 00000000 00000000", "00000000 00008914 10003d55 0000d0d2"]:
        ind(S, X, l, "mlx5_cqe_error:context")
    peer = S.nodes[(X.node - 1) % S.n].ip
    ind(S, X, _ib_completion(S, X.node, X.lr, peer, status=4, err=81, dirn="Recv"), "ib_completion_error_status4")
    ind(S, X, "%s NCCL INFO transport/net.cc:1302 -> 6" % nccl_pre(S, X.node, X.lr, 41), "ib_completion_error_status4:context")
    emit_tb(S, X, S.fw.frames("training"), nccl_remote_error_exc(S), "nccl_remote_error")
    ind(S, X, "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\nLast error:\nNET/IB : Got completion from peer %s with status=4 opcode=1 len=0 vendor err 81 (Recv)" % peer, "nccl_remote_error:context")
    return dict(prop="ib", exit=1)


def f_ib_nic_unreachable_init(S, X):
    c = S.c
    p = nccl_pre(S, X.node, X.lr, 3)
    dev = "mlx5_%d" % (X.lr // 2 % 4)
    ind(S, X, "%s NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:%s<0>" % (p, S.nodes[X.node].ip), "nccl_ib_devices:context")
    ind(S, X, "%s misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out errno 110" % p, "ibv_modify_qp_timeout")
    ind(S, X, "%s NCCL INFO transport/net_ib.cc:%d -> 2" % (p, 1067), "ibv_modify_qp_timeout:context")
    ind(S, X, "%s NCCL WARN NET/IB : %s:1 port state is DOWN, retrying" % (p, dev), "ib_port_down")
    emit_tb(S, X, S.fw.frames("initialization"), "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version %s" % c.nccl_ver, "nccl_system_error")
    ind(S, X, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \nLast error:\nCall to ibv_modify_qp failed with error Connection timed out", "nccl_system_error:context")
    return dict(prop="init_wd", exit=1)


def f_node_power_loss(S, X):
    return dict(prop="ib", exit=None, silent=True)


def f_gpu_hang_no_error(S, X):
    return dict(prop="wd", exit=-15, hang=True)


def f_gpu_straggler_throttle(S, X):
    return dict(prop="wd", exit=-15, hang=True)


def f_npu_task_timeout(S, X):
    t = S.lt(X.node)
    for k in range(S.r.randint(1, 3)):
        ind(S, X, "EH9999: %s  wait for compute device to finish failed, runtime result = 107020.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]" % ts_ascend(t + k * 0.001), "npu_wait_device_107020")
        ind(S, X, "        TraceBack (most recent call last):\n (function npuSynchronizeDevice)", "npu_wait_device_107020:context")
        ind(S, X, "[W NPUStream.cpp:365] Warning: NPU warning, error code is 107020[Error]: .", "npu_warning_107020")
        ind(S, X, "EH9999: Inner Error!", "npu_inner_error")
        ind(S, X, "        rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]", "rt_device_sync_task_timeout")
    emit_tb(S, X, S.fw.frames("training"), "RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUStream.cpp:370 NPU error, error code is 107020", "npu_sync_error_107020")
    return dict(prop="hccl", exit=1)


def f_npu_device_driver_error(S, X):
    for l, k in [("        tsd client wait response fail, device response code[1]. unknown device error.[FUNC:WaitRsp][FILE:process_mode_manager.cpp][LINE:290]", "tsd_device_error"),
                 ("        Fail to get sq reg virtual addr, deviceId=%d, sqId=40.[FUNC:Setup][FILE:stream.cc][LINE:1102]" % X.lr, "npu_stream_setup:context"),
                 ("        stream setup failed, retCode=0x7020010.[FUNC:SyncGetDevMsg][FILE:api_impl.cc][LINE:4643]", "npu_stream_setup:context"),
                 ("        rtGetDevMsg execute failed, reason=[driver error:internal error][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]", "npu_driver_internal_error")]:
        ind(S, X, l, k)
    emit_tb(S, X, S.fw.frames(X.stage), "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64", "hccl_error_processgroup")
    ind(S, X, "[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR02200 DIST call hccl api failed." % (ts_ascend(S.lt(X.node))[:19], S.pid(X.node, X.lr), X.lr, X.g), "hccl_api_failed")
    return dict(prop="hccl", exit=1)


def f_hccl_connect_fail_init(S, X):
    t = S.lt(X.node)
    bad_ip = "192.168.%d.%d" % (S.r.randint(0, 9), S.r.randint(2, 250))
    ind(S, X, "[ERROR] HCCL(%d,python):%s [%d][hccl_socket_manager.cc:412][Init][Socket]socket bind ip[%s] port[60000] failed, errno[99]" % (S.pid(X.node, X.lr), ts_ascend(t), S.pid(X.node, X.lr), bad_ip), "hccl_socket_bind_failed")
    ind(S, X, "EI0006: %s Getting socket times out. Reason: 1. The remote does not initiate a connect request. some NPUs in the cluster are abnormal.    2. The remote does not initiate a connect request because the collective communication operator is started too late or is not started by some NPU in the cluster.    3. The communication link is disconnected. (For example, the IP addresses are not on the same network segment or the TLS configurations are inconsistent.)" % ts_ascend(t + 1200), "hccl_ei0006_get_socket_timeout")
    ind(S, X, "        Solution: 1. Check the rank service processes with other errors or no errors in the cluster.2. If this error is reported for all NPUs, check whether the time difference between the earliest and latest errors is greater than the connect timeout interval (120s by default). If so, adjust the timeout interval by using the HCCL_CONNECT_TIMEOUT environment variable.3. Check the connectivity of the communication link between nodes. (For details, see the TLS command and HCCN connectivity check examples.)", "hccl_ei0006_get_socket_timeout:context")
    emit_tb(S, X, S.fw.frames("initialization"), "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64", "hccl_error_processgroup")
    ind(S, X, "[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR02200 DIST call hccl api failed." % (ts_ascend(t + 1200)[:19], S.pid(X.node, X.lr), X.lr, X.g), "hccl_api_failed")
    return dict(prop="init_hccl", exit=1, delay=1200)


def f_host_oom_killed(S, X):
    if X.stage == "data_loading" or (X.stage == "training" and S.r.random() < 0.4):
        emit_tb(S, X, S.fw.frames(X.stage), "RuntimeError: DataLoader worker (pid %d) is killed by signal: Killed. " % S.r.randint(10000, 99999), "dataloader_worker_killed")
        return dict(prop="wd", exit=1, slurm_oom=True)
    return dict(prop="wd", exit=-9, sig="SIGKILL", agent_ind=True, slurm_oom=True)


def f_pod_evicted_sigterm(S, X):
    return dict(prop="wd", exit=-15, agent_sigterm=True, agent_ind=True)


def f_dataloader_shm_bus_error(S, X):
    ind(S, X, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).", "dataloader_bus_error")
    frames = S.fw.frames(X.stage if X.stage != "data_loading" else "training") + [
        ("%s/torch/utils/data/dataloader.py" % S.c.site, 1329, "_next_data", "idx, data = self._get_data()"),
        ("%s/torch/utils/data/dataloader.py" % S.c.site, 1285, "_get_data", "success, data = self._try_get_data()"),
        ("%s/torch/utils/data/dataloader.py" % S.c.site, 1146, "_try_get_data", "raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e")]
    if S.r.random() < 0.5:
        emit_tb(S, X, frames, "RuntimeError: DataLoader worker (pid %d) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit." % S.r.randint(10000, 99999), "dataloader_killed_bus_error")
    else:
        emit_tb(S, X, frames, "RuntimeError: DataLoader worker (pid(s) %d) exited unexpectedly" % S.r.randint(10000, 99999), "dataloader_exited_unexpectedly")
    return dict(prop="wd", exit=1)


def f_nccl_shm_sigbus_init(S, X):
    c = S.c
    p = nccl_pre(S, X.node, X.lr, 11)
    seg = "/dev/shm/nccl-%s" % "".join(S.r.choice("abcdefghijkLMNOPQRstuvwXYZ0123456789") for _ in range(6))
    ind(S, X, "%s NCCL WARN Error: failed to extend %s to %d bytes" % (p, seg, 9637892), "nccl_shm_extend_failed")
    ind(S, X, "%s NCCL WARN Error while creating shared memory segment %s (size %d)" % (p, seg, 9637888), "nccl_shm_create_failed")
    ind(S, X, "%s NCCL INFO transport/shm.cc:114 -> 2" % p, "nccl_shm_create_failed:context")
    emit_tb(S, X, S.fw.frames("initialization"), "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version %s" % c.nccl_ver, "nccl_system_error")
    ind(S, X, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \nLast error:\nError while creating shared memory segment %s (size %d)" % (seg, 9637888), "nccl_system_error:context")
    return dict(prop="init_wd", exit=1)


def _oserror_save(S, X, errno, msg, kind):
    c = S.c
    f = ckpt_file(S, X)
    if c.fw == "hf" and S.r.random() < 0.6:
        emit_tb(S, X, S.fw.frames("checkpointing"), "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: %d, kind: %s, message: \"%s\" })" % (errno, {28: "StorageFull", 5: "Uncategorized", 116: "StaleNetworkFileHandle", 122: "FilesystemQuotaExceeded"}[errno], msg), kind)
        return
    if errno in (28, 122) and S.r.random() < 0.5:
        emit_tb(S, X, S.fw.frames("checkpointing"), "RuntimeError: [enforce fail at inline_container.cc:%d] . PytorchStreamWriter failed writing file data/%d: file write failed" % (S.r.choice([595, 778]), S.r.randint(1, 400)), kind + "_stream_writer")
        ind(S, X, "\nDuring handling of the above exception, another exception occurred:\n", kind + ":context")
    emit_tb(S, X, S.fw.frames("checkpointing"), "OSError: [Errno %d] %s: '%s'" % (errno, msg, f), kind)


def f_ckpt_enospc(S, X):
    _oserror_save(S, X, 28, "No space left on device", "enospc")
    return dict(prop=S.r.choice(["wd", "gloo"]), exit=1)


def f_ckpt_stale_nfs(S, X):
    c = S.c
    if X.stage == "data_loading":
        emit_tb(S, X, S.fw.frames("data_loading"), "OSError: [Errno 116] Stale file handle: '%s/shard_%05d.bin'" % (c.data_dir, S.r.randint(0, 2047)), "estale")
    else:
        _oserror_save(S, X, 116, "Stale file handle", "estale")
    return dict(prop="wd", exit=1)


def f_ckpt_eio(S, X):
    if S.r.random() < 0.5:
        ind(S, X, "[%s] [node-health] %s kernel: LustreError: 11-0: fsw-OST00%02x-osc-ffff9c2a3b6e1000: operation ost_write to node 10.%d.%d.%d@o2ib failed: rc = -5" % (ts_py(S.lt(X.node)), S.nodes[X.node].host, S.r.randint(0, 255), S.r.randint(1, 9), S.r.randint(1, 250), S.r.randint(1, 250)), "lustre_ost_write_failed", lr=0)
    _oserror_save(S, X, 5, "Input/output error", "eio")
    return dict(prop="wd", exit=1)


def f_ckpt_quota(S, X):
    _oserror_save(S, X, 122, "Disk quota exceeded", "edquot")
    return dict(prop="wd", exit=1)


def f_ckpt_storage_stall(S, X):
    return dict(prop="wd", exit=-15, hang=True, optype="_ALLGATHER_BASE")


def f_rdzv_store_unreachable(S, X):
    c = S.c
    h0 = S.nodes[0].host if X.node != 0 else "%s.cluster.local" % S.nodes[0].host
    t = 900 if c.torch >= "2.3" else 1800
    tt = S.t + t
    for k in range(S.r.randint(1, 4)):
        S.out(X.node, "[W socket.cpp:%d] [c10d] The client socket has failed to connect to [%s]:%d (errno: %s)." % (S.r.choice([601, 663]), h0, c.master_port, S.r.choice(["113 - No route to host", "110 - Connection timed out"])), label=("ind", "c10d_connect_failed"), t=S.t + 2 + k * 300)
    S.out(X.node, "[E%s socket.cpp:957] [c10d] The client socket has timed out after %ds while trying to connect to (%s, %d)." % (ts_glog(S.lt(X.node, tt))[1:], t, h0, c.master_port), label=("ind", "c10d_client_socket_timeout"), t=tt)
    pre, _ = tb_lines([("%s/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py" % c.site, 159, "_create_tcp_store", "store = TCPStore(")], None)
    for l in pre:
        S.out(X.node, l, label=("ind", "dist_network_error:context"), t=tt)
    S.out(X.node, "torch.distributed.DistNetworkError: The client socket has timed out after %ds while trying to connect to (%s, %d)." % (t, h0, c.master_port), label=("ind", "dist_network_error"), t=tt)
    S.out(X.node, "\nThe above exception was the direct cause of the following exception:\n", label=("ind", "rendezvous_connection_error:context"), t=tt)
    pre, _ = tb_lines([("%s/torch/distributed/run.py" % c.site, 870, "main", "run(args)"),
                       ("%s/torch/distributed/launcher/api.py" % c.site, 255, "launch_agent", "result = agent.run()"),
                       ("%s/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py" % c.site, 1148, "_create_tcp_store", "raise RendezvousConnectionError(")], None)
    for l in pre:
        S.out(X.node, l, label=("ind", "rendezvous_connection_error:context"), t=tt)
    S.out(X.node, "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.", label=("ind", "rendezvous_connection_error"), t=tt)
    return dict(prop="rdzv", exit=None, delay=t, agent_only=True)


def f_hub_upload_5xx(S, X):
    c = S.c
    ind(S, X, "Upload 3 LFS files:  33%|███▎      | 1/3 [01:12<02:24, 72.11s/it]", "hub_upload_progress:context")
    emit_tb(S, X, S.fw.frames("finalization") + [("%s/huggingface_hub/utils/_http.py" % c.site, 477, "hf_raise_for_status", "raise _format(HfHubHTTPError, str(e), response) from e")],
            "huggingface_hub.errors.HfHubHTTPError: %s for url: https://huggingface.co/api/models/%s/%s/commit/main (Request ID: Root=1-%x-%x)" % (
                S.r.choice(["502 Server Error: Bad Gateway", "503 Server Error: Service Unavailable", "504 Server Error: Gateway Time-out"]),
                S.r.choice(["acme-ml", "org-llm", "lab"]), c.model, S.r.randint(2**28, 2**31), S.r.randint(2**60, 2**63)), "hub_http_5xx")
    return dict(prop="none", exit=1)


def f_corrupt_cached_safetensors(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames("model_loading") + [("%s/transformers/modeling_utils.py" % c.site, 556, "load_state_dict", "with safe_open(checkpoint_file, framework=\"pt\") as f:")],
            "safetensors_rust.SafetensorError: Error while deserializing header: %s" % S.r.choice(["MetadataIncompleteBuffer", "HeaderTooLarge", "InvalidHeaderDeserialization"]), "safetensors_header_error")
    return dict(prop=S.r.choice(["wd", "store"]), exit=1)


def f_dataset_prefix_missing(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames("data_loading") + [("%s/megatron/core/datasets/indexed_dataset.py" % c.repo, 476, "initialize", "self.index = _IndexReader(get_idx_path(self.path_prefix), self.multimodal)"),
                                                 ("%s/megatron/core/datasets/indexed_dataset.py" % c.repo, 253, "__init__", "with open(idx_path, \"rb\") as stream:")],
            "FileNotFoundError: [Errno 2] No such file or directory: '%s/%s_text_document.idx'" % (c.data_dir, c.model.split("-")[0]), "dataset_idx_missing")
    return dict(prop=S.r.choice(["wd", "gloo"]), exit=1)


def f_dataset_index_mismatch(S, X):
    c = S.c
    ind(S, X, "INFO:megatron.core.datasets.indexed_dataset:Load the _IndexReader from %s/%s_text_document.idx" % (c.data_dir, c.model.split("-")[0]), "dataset_load_index:context")
    n = S.r.randint(10**6, 9 * 10**6)
    emit_tb(S, X, S.fw.frames("data_loading") + [("%s/megatron/core/datasets/gpt_dataset.py" % c.repo, 451, "_build_document_sample_shuffle_indices", "sample_index = helpers.build_sample_idx("),
                                                 ],
            "IndexError: index %d is out of bounds for axis 0 with size %d" % (n + 1, n), "dataset_index_out_of_bounds")
    return dict(prop="wd", exit=1)


def f_ckpt_shape_mismatch(S, X):
    c = S.c
    a = S.r.choice([1536, 3072, 4096, 6144])
    emit_tb(S, X, S.fw.frames("model_loading") + [("%s/torch/nn/modules/module.py" % c.site, 2215, "load_state_dict", "raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format(")],
            "RuntimeError: Error(s) in loading state_dict for %s:" % {"megatron": "GPTModel", "hf": "LlamaForCausalLM", "deepspeed": "LlamaForCausalLM", "torchtitan": "Transformer"}[c.fw], "state_dict_size_mismatch")
    ind(S, X, "\tsize mismatch for %s: copying a param with shape torch.Size([%d, 4096]) from checkpoint, the shape in current model is torch.Size([%d, 4096])." % (
        "decoder.layers.0.self_attention.linear_qkv.weight" if c.fw == "megatron" else "model.layers.0.self_attn.k_proj.weight", a, a * 2), "state_dict_size_mismatch_detail")
    return dict(prop="wd", exit=1)


def f_ds_missing_zero_shard(S, X):
    c = S.c
    f = "%s/global_step%d/bf16_zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (c.ckpt_dir, c.start_iter, X.g)
    emit_tb(S, X, S.fw.frames("model_loading") + [("%s/deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py" % c.site, 28, "load", "partition = torch.load(path, map_location=map_location)"),
                                                  ("%s/torch/serialization.py" % c.site, 1065, "load", "with _open_file_like(f, 'rb') as opened_file:")],
            "FileNotFoundError: [Errno 2] No such file or directory: '%s'" % f, "zero_shard_missing")
    return dict(prop="wd", exit=1)


def _oom(S, X, stage):
    c = S.c
    gib = S.r.choice([1.25, 2.5, 3.91, 7.82, 16.0])
    if c.torch >= "2.3":
        m = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total capacity of 79.15 GiB of which %.2f GiB is free. Including non-PyTorch memory, this process has %.2f GiB memory in use. Of the allocated memory %.2f GiB is allocated by PyTorch, and %.2f GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)" % (
            gib, X.lr, gib * 0.4, 78.1, 71.3, 5.2)
    else:
        m = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB (GPU %d; 79.15 GiB total capacity; 71.30 GiB already allocated; %.2f GiB free; 76.51 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF" % (gib, X.lr, gib * 0.4)
    emit_tb(S, X, S.fw.frames(stage), m, "cuda_oom")
    pg_not_destroyed(S, X)


def f_cuda_oom_train(S, X):
    _oom(S, X, "training")
    return dict(prop="wd", exit=1)


def f_cuda_oom_eval(S, X):
    _oom(S, X, "evaluation")
    return dict(prop="wd", exit=1)


def f_nan_grad_norm(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames("training") + [("%s/megatron/core/distributed/param_and_grad_buffer.py" % c.repo, 142, "check_for_nan_in_grad", "assert not norm_is_nan, (")],
            "AssertionError: Rank %d: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: %d, node: %s" % (X.g, X.lr, S.nodes[X.node].host), "nan_grad_norm")
    return dict(prop="wd", exit=1)


def fp16_lead(S, X, it, scale):
    S.out(0, "[%s] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: %d, reducing to %d" % (ts_py(S.lt(0)), scale, max(1, scale // 2)), rank=0, label=("ind", "fp16_overflow_skip"))


def f_fp16_loss_scale_floor(S, X):
    c = S.c
    for i in range(S.n):
        for lr in range(c.rpn):
            emit_tb(S, X, S.fw.frames("training") + [("%s/deepspeed/runtime/fp16/loss_scaler.py" % c.site, 175, "update_scale", "raise Exception(")],
                    "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "loss_scale_at_minimum", node=i, lr=lr)
    return dict(prop="none", exit=1, all=True)


def f_eval_uneven_batches_hang(S, X):
    return dict(prop="wd", exit=-6, hang=True, culprit_wd=True, optype="ALLREDUCE")


def f_illegal_memory_access(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames("training"), "RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_illegal_memory_access")
    cuda_tail(S, X, "cuda_illegal_memory_access")
    ind(S, X, "", "cuda_illegal_memory_access:context")
    ind(S, X, "terminate called after throwing an instance of 'c10::Error'", "terminate_c10_error")
    ind(S, X, "  what():  CUDA error: an illegal memory access was encountered", "cuda_illegal_memory_access")
    for l in cpp_frames(S, c.site, ""):
        ind(S, X, l, "cuda_illegal_memory_access:context")
    return dict(prop="wd", exit=-6)


def f_python_segfault(S, X):
    c = S.c
    ind(S, X, "Fatal Python error: Segmentation fault", "python_segfault")
    ind(S, X, "", "python_segfault:context")
    ind(S, X, "Thread 0x%016x (most recent call first):" % S.r.randint(2**46, 2**47), "python_segfault:context")
    ind(S, X, '  File "/usr/lib/python%s/threading.py", line 324 in wait' % c.py, "python_segfault:context")
    ind(S, X, '  File "/usr/lib/python%s/threading.py", line 607 in wait' % c.py, "python_segfault:context")
    ind(S, X, "", "python_segfault:context")
    ind(S, X, "Current thread 0x%016x (most recent call first):" % S.r.randint(2**46, 2**47), "python_segfault:context")
    for f, ln, fn, _code in reversed(S.fw.frames(X.stage)):
        ind(S, X, '  File "%s", line %d in %s' % (f, ln, fn), "python_segfault:context")
    ind(S, X, "", "python_segfault:context")
    ind(S, X, "Extension modules: numpy.core._multiarray_umath, torch._C, torch._C._fft, torch._C._linalg, torch._C._nn, torch._C._sparse, torch._C._special, yaml._yaml, sentencepiece._sentencepiece (total: 41)", "python_segfault:context")
    return dict(prop="wd", exit=-11, sig="SIGSEGV")


def f_dataloader_worker_segfault(S, X):
    c = S.c
    ind(S, X, "ERROR: Unexpected segmentation fault encountered in worker.", "dataloader_segfault")
    frames = S.fw.frames(X.stage if X.stage != "data_loading" else "training") + [
        ("%s/torch/utils/data/dataloader.py" % c.site, 1329, "_next_data", "idx, data = self._get_data()"),
        ("%s/torch/utils/data/_utils/signal_handling.py" % c.site, 67, "handler", "_error_if_any_worker_fails()")]
    emit_tb(S, X, frames, "RuntimeError: DataLoader worker (pid %d) is killed by signal: Segmentation fault. " % S.r.randint(10000, 99999), "dataloader_killed_segfault")
    return dict(prop="wd", exit=1)


def f_slurm_preempted(S, X):
    return dict(prop="preempt", exit=None, reason="PREEMPTION")


def f_slurm_time_limit(S, X):
    return dict(prop="preempt", exit=None, reason="TIME LIMIT")


def f_tp_heads_not_divisible(S, X):
    c = S.c
    for i in range(S.n):
        for lr in range(c.rpn):
            emit_tb(S, X, S.fw.frames("initialization")[:1] + [("%s/megatron/training/initialize.py" % c.repo, 72, "initialize_megatron", "validate_args(args, args_defaults)"),
                                                            ("%s/megatron/training/arguments.py" % c.repo, 521, "validate_args", "assert args.num_attention_heads % args.tensor_model_parallel_size == 0")]
                    if S.r.random() < 0.5 else S.fw.frames("model_loading")[:1] + [("%s/megatron/core/utils.py" % c.repo, 45, "ensure_divisibility", "assert numerator % denominator == 0, \"{} is not divisible by {}\".format(numerator, denominator)")],
                    "AssertionError: %d is not divisible by %d" % (c.heads, c.tp), "heads_not_divisible_by_tp", node=i, lr=lr)
    return dict(prop="none", exit=1, all=True)


def f_npu_hccl_notify_timeout_culprit_hang(S, X):
    return dict(prop="hccl", exit=-15, hang=True)


def f_ds_zero3_inflight_param(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames(X.stage) + [("%s/deepspeed/runtime/zero/parameter_offload.py" % c.site, 375, "_pre_forward_module_hook", "self.pre_sub_module_forward_function(module)"),
                                          ("%s/deepspeed/runtime/zero/partitioned_param_coordinator.py" % c.site, 316, "fetch_sub_module", "assert param.ds_status == ZeroParamStatus.AVAILABLE, param.ds_summary()")],
            "AssertionError: {'id': %d, 'status': 'INFLIGHT', 'numel': %d, 'ds_numel': %d, 'shape': (32000, 4096), 'ds_shape': (32000, 4096), 'requires_grad': True, 'grad_shape': None, 'persist': False, 'active_sub_modules': {%d}}" % (
                S.r.randint(1, 900), 131072000, 131072000, S.r.randint(1, 9)), "zero3_param_inflight")
    return dict(prop="wd", exit=1)


def f_dcp_save_writer_error(S, X):
    c = S.c
    emit_tb(S, X, S.fw.frames("checkpointing") + [("%s/torch/distributed/checkpoint/filesystem.py" % c.site, 468, "_write_files_from_queue", "_write_item(stream, data, write_item, storage_key)")],
            "RuntimeError: [enforce fail at inline_container.cc:%d] . unexpected pos %d vs %d" % (S.r.choice([664, 603]), S.r.randint(500, 9000), S.r.randint(100, 499)), "inline_container_unexpected_pos")
    return dict(prop="dcp", exit=1)


def f_dcp_save_hang(S, X):
    return dict(prop="wd", exit=-15, hang=True, optype="_ALLGATHER_BASE")


BUILDERS = {k[2:]: v for k, v in list(globals().items()) if k.startswith("f_") and callable(v)}
LEAD = {"ib_port_flap": ib_flap_lead}


# ----------------------------------------------------------------------------- propagation
OPTYPE = {"training": ["ALLREDUCE", "_REDUCE_SCATTER_BASE", "_ALLGATHER_BASE", "ALLREDUCE"],
          "checkpointing": ["BARRIER", "ALLGATHER", "_ALLGATHER_BASE", "GATHER"], "evaluation": ["ALLREDUCE", "BARRIER"],
          "model_loading": ["BROADCAST", "BARRIER"], "data_loading": ["BARRIER", "ALLREDUCE"], "initialization": ["BARRIER", "ALLREDUCE"],
          "finalization": ["BARRIER", "ALLGATHER"]}


def wd_block(S, node, lr, t, seq, optype, numel, short=False):
    """watchdog timeout lines of one victim rank; returns list of (text, kind)"""
    c = S.c
    g = S.g(node, lr)
    to = c.timeout_s * 1000
    ran = to + S.r.randint(3, 900)
    work = "WorkNCCL(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d) ran for %d milliseconds before timing out." % (seq, optype, numel, numel * (c.world if "GATHER" in optype else 1), to, ran)
    L = []
    lt = S.lt(node, t)
    if c.torch == "2.1":
        L.append(("[E ProcessGroupNCCL.cpp:475] [Rank %d] Watchdog caught collective operation timeout: %s" % (g, work), "nccl_watchdog_timeout"))
        if short:
            return L
        L.append(("[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.", "nccl_watchdog_timeout:context"))
        L.append(("[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.", "nccl_watchdog_timeout:context"))
        L.append(("[E ProcessGroupNCCL.cpp:916] [Rank %d] NCCL watchdog thread terminated with exception: [Rank %d] Watchdog caught collective operation timeout: %s" % (g, g, work), "nccl_watchdog_terminated"))
        L.append(("terminate called after throwing an instance of 'std::runtime_error'", "terminate_called"))
        L.append(("  what():  [Rank %d] NCCL watchdog thread terminated with exception: [Rank %d] Watchdog caught collective operation timeout: %s" % (g, g, work), "nccl_watchdog_terminated:context"))
        return L
    pg = "[PG 0 Rank %d]" if c.torch == "2.3" else "[PG ID 0 PG GUID 0(default_pg) Rank %d]"
    pg = pg % g
    E = lambda: "[%s " % ts_glog(lt + S.r.uniform(0, 0.01))
    L.append((E() + "ProcessGroupNCCL.cpp:616] [Rank %d] Watchdog caught collective operation timeout: %s" % (g, work), "nccl_watchdog_timeout"))
    L.append((E() + "ProcessGroupNCCL.cpp:1785] %s Exception (either an error or timeout) detected by watchdog at work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (pg, seq, seq + S.r.randint(0, 3), seq - 1), "nccl_watchdog_last_completed"))
    if short:
        return L
    L.append((E() + "ProcessGroupNCCL.cpp:630] [Rank %d] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data." % g, "nccl_watchdog_timeout:context"))
    L.append((E() + "ProcessGroupNCCL.cpp:636] [Rank %d] To avoid data inconsistency, we are taking the entire process down." % g, "nccl_watchdog_timeout:context"))
    L.append((E() + "ProcessGroupNCCL.cpp:1595] %s Process group watchdog thread terminated with exception: [Rank %d] Watchdog caught collective operation timeout: %s" % (pg, g, work), "nccl_watchdog_terminated"))
    fr = cpp_frames(S, c.site, "", "checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618")
    fr[2] = fr[2].split(": ")[0] + ": c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3b6e71a8d2 in %s/torch/lib/libtorch_cuda.so)" % c.site
    fr[3] = "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3b6e721333 in %s/torch/lib/libtorch_cuda.so)" % c.site
    fr[4] = "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f3b6e7236fc in %s/torch/lib/libtorch_cuda.so)" % c.site
    for l in fr[:-1]:
        L.append((l, "nccl_watchdog_terminated:context"))
    L.append(("", "nccl_watchdog_terminated:context"))
    L.append(("terminate called after throwing an instance of 'c10::DistBackendError'", "terminate_called"))
    L.append(("  what():  %s Process group watchdog thread terminated with exception: [Rank %d] Watchdog caught collective operation timeout: %s" % (pg, g, work), "nccl_watchdog_terminated:context"))
    return L


def hccl_block(S, node, lr, t, culprit_g):
    lt = S.lt(node, t)
    remote = str(culprit_g) if S.r.random() < 0.6 else ("unknown" if S.r.random() < 0.5 else "4294967295")
    L = [("[W NPUStream.cpp:%d] Warning: NPU warning, error code is 507048[Error]: [Error]: The execution of the internal task times out. " % S.r.choice([409, 435]), "npu_task_timeout_507048"),
         ("EI0002: [PID: %d] %s The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [%s]. base information: [streamID:[%d], taskID[%d], tag[AllReduce_%s%%enp189s0f0_60000_0_%d], AlgType(level 0-1-2):[fullmesh-ring-NHR].] task information: []" % (
             S.pid(node, lr), ts_ascend(lt), remote, S.r.randint(1, 9), S.r.randint(10, 99999), S.nodes[0].ip, S.r.randint(10**12, 10**13)), "hccl_notify_wait_timeout_ei0002"),
         ("        Possible Cause: 1. An exception occurs during the execution on some NPUs in the cluster. As a result, collective communication operation failed.2. The execution speed on some NPU in the cluster is too slow to complete a communication operation within the timeout interval. (default 1800s, You can set the interval by using HCCL_EXEC_TIMEOUT.)3. The number of training samples of each NPU is inconsistent.4. Packet loss or other connectivity problems occur on the communication link.", "hccl_notify_wait_timeout_ei0002:context"),
         ("        Solution: 1. If this error is reported on part of these ranks, check other ranks to see whether other errors have been reported earlier.2. If this error is reported for all ranks, check whether the error reporting time is consistent (the maximum difference must not exceed 1800s). If not, locate the cause or adjust the locate the cause or set the HCCL_EXEC_TIMEOUT environment variable to a larger value.", "hccl_notify_wait_timeout_ei0002:context"),
         ("        TraceBack (most recent call last):", "hccl_notify_wait_timeout_ei0002:context"),
         ("Traceback (most recent call last):", "npu_sync_error_507048:context"),
         ("  File \"%s/%s\", line 231, in <module>" % (S.c.repo, S.c.script), "npu_sync_error_507048:context"),
         ("RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048", "npu_sync_error_507048"),
         ("[ERROR] %s (PID:%d, Device:%d, RankID:%d) ERR00100 PTA call acl api failed" % (ts_ascend(lt)[:19], S.pid(node, lr), lr, S.g(node, lr)), "pta_acl_api_failed")]
    return L


def ib_peer_block(S, node, lr, culprit_ip):
    L = [(_ib_completion(S, node, lr, culprit_ip, dirn=S.r.choice(["Recv", "Send"])), "ib_completion_error_peer"),
         ("%s NCCL INFO transport/net.cc:1302 -> 6" % nccl_pre(S, node, lr, 41), "ib_completion_error_peer:context"),
         ("%s NCCL INFO proxy.cc:698 -> 6" % nccl_pre(S, node, lr, 41), "ib_completion_error_peer:context"),
         ("%s NCCL INFO proxy.cc:878 -> 6 [Progress Thread]" % nccl_pre(S, node, lr, 41), "ib_completion_error_peer:context")]
    return L


def gloo_block(S, node, lr, culprit_ip):
    c = S.c
    return [("Traceback (most recent call last):", "gloo_connection_closed:context"),
            ('  File "%s/torch/distributed/distributed_c10d.py", line %d, in barrier' % (c.site, 4166), "gloo_connection_closed:context"),
            ("    work.wait()", "gloo_connection_closed:context"),
            ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [%s]:%d" % (culprit_ip, S.r.randint(20000, 60000)), "gloo_connection_closed")]


def dcp_block(S, node, lr, culprit_g):
    c = S.c
    return [("Traceback (most recent call last):", "dcp_checkpoint_exception:context"),
            ('  File "%s/torch/distributed/checkpoint/utils.py", line 219, in reduce_scatter' % c.site, "dcp_checkpoint_exception:context"),
            ("    raise result", "dcp_checkpoint_exception:context"),
            ("torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([%d])" % culprit_g, "dcp_checkpoint_exception"),
            ("Traceback (most recent call last): (RANK %d)" % culprit_g, "dcp_checkpoint_exception:context"),
            ('  File "%s/torch/distributed/checkpoint/utils.py", line 192, in reduce_scatter' % c.site, "dcp_checkpoint_exception:context"),
            ("    local_data = map_fun()", "dcp_checkpoint_exception:context"),
            ("RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 704 vs 598", "dcp_checkpoint_exception:context")]


def store_block(S, node, lr):
    c = S.c
    return [("Traceback (most recent call last):", "c10d_store_error:context"),
            ('  File "%s/torch/distributed/distributed_c10d.py", line 4166, in barrier' % c.site, "c10d_store_error:context"),
            ("    work = default_pg.barrier(opts=opts)", "c10d_store_error:context"),
            ("torch.distributed.DistNetworkError: [../torch/csrc/distributed/c10d/TCPStore.cpp:%d] Connection reset by peer" % S.r.choice([119, 133]), "c10d_store_connection_reset")]


# ----------------------------------------------------------------------------- teardown
def child_failed(S, node, failures, t, script, kind_lab="sym"):
    """torchrun agent: SIGTERM to the survivors, 'failed (exitcode' and the ChildFailedError summary.
    failures: list of (lr, exitcode, is_root) ; returns nothing"""
    c = S.c
    lab = kind_lab
    failed = {f[0] for f in failures}
    for lr in range(c.rpn):
        if lr not in failed:
            sym(S, node, agent_log(S, node, "W", "elastic/multiprocessing/api.py:%d" % (897 if c.torch >= "2.4" else 836), "Sending process %d closing signal SIGTERM" % S.pid(node, lr), t), "agent_sigterm_workers", t=t)
    root = failures[0]
    S.out(node, agent_log(S, node, "E", "elastic/multiprocessing/api.py:%d" % (869 if c.torch >= "2.4" else 826), "failed (exitcode: %d) local_rank: %d (pid: %d) of binary: /usr/bin/python%s" % (root[1], root[0], S.pid(node, root[0]), c.py[0]), t + 1),
          label=(lab, "agent_worker_failed"), t=t)
    fr = [("/usr/local/bin/torchrun", 8, "<module>", "sys.exit(main())"),
          ("%s/torch/distributed/elastic/multiprocessing/errors/__init__.py" % c.site, 355, "wrapper", "return f(*args, **kwargs)"),
          ("%s/torch/distributed/run.py" % c.site, 919, "main", "run(args)"),
          ("%s/torch/distributed/run.py" % c.site, 910, "run", "elastic_launch("),
          ("%s/torch/distributed/launcher/api.py" % c.site, 138, "__call__", "return launch_agent(self._config, self._entrypoint, list(args))"),
          ("%s/torch/distributed/launcher/api.py" % c.site, 269, "launch_agent", "raise ChildFailedError(")]
    pre, _ = tb_lines(fr, None)
    for l in pre:
        S.out(node, l, label=("sym", "child_failed_error:context"), t=t)
    S.out(node, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", label=("sym", "child_failed_error"), t=t)
    S.out(node, "=" * 60, label=("sym", "child_failed_error:context"), t=t)
    S.out(node, "%s FAILED" % script, label=("sym", "child_failed_error:context"), t=t)
    S.out(node, "-" * 60, label=("sym", "child_failed_error:context"), t=t)

    def block(idx, f):
        lr, ec, _ = f
        sig = {-6: "Signal 6 (SIGABRT) received by PID %d", -9: "Signal 9 (SIGKILL) received by PID %d", -11: "Signal 11 (SIGSEGV) received by PID %d", -15: "Signal 15 (SIGTERM) received by PID %d", -7: "Signal 7 (SIGBUS) received by PID %d"}
        tbl = (sig[ec] % S.pid(node, lr)) if ec in sig else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        k = lab if lab == "ind" else "sym"
        kk = "worker_sigkill" if (lab == "ind" and ec == -9) else ("worker_sigterm" if lab == "ind" else "child_failed_error")
        rows = ["[%d]:" % idx, "  time      : %s" % ts_elastic(S.lt(node, t)), "  host      : %s" % S.nodes[node].host,
                "  rank      : %d (local_rank: %d)" % (S.g(node, lr), lr), "  exitcode  : %d (pid: %d)" % (ec, S.pid(node, lr)),
                "  error_file: <N/A>", "  traceback : %s" % tbl]
        for j, r in enumerate(rows):
            key = (j == 4)
            S.out(node, r, label=(k, kk if key else kk + ":context"), t=t)
    others = failures[1:]
    if others:
        S.out(node, "Failures:", label=("sym", "child_failed_error:context"), t=t)
        for j, f in enumerate(others):
            block(j + 1, f)
    else:
        S.out(node, "Failures:\n  <NO_OTHER_FAILURES>", label=("sym", "child_failed_error:context"), t=t)
    S.out(node, "-" * 60, label=("sym", "child_failed_error:context"), t=t)
    S.out(node, "Root Cause (first observed failure):", label=("sym", "child_failed_error:context"), t=t)
    block(0, root)
    S.out(node, "=" * 60, label=("sym", "child_failed_error:context"), t=t)


def agent_signal(S, node, t, sig=15, lab="sym"):
    c = S.c
    k = "agent_received_sigterm" if lab == "sym" else "agent_received_sigterm"
    S.out(node, agent_log(S, node, "W", "elastic/agent/server/api.py:%d" % (704 if c.torch >= "2.4" else 680), "Received Signals.SIGTERM death signal, shutting down workers", t), label=(lab, k), t=t)
    for lr in range(c.rpn):
        S.out(node, agent_log(S, node, "W", "elastic/multiprocessing/api.py:%d" % (897 if c.torch >= "2.4" else 836), "Sending process %d closing signal SIGTERM" % S.pid(node, lr), t), label=("sym", "agent_sigterm_workers"), t=t)
    fr = [("/usr/local/bin/torchrun", 8, "<module>", "sys.exit(main())"),
          ("%s/torch/distributed/run.py" % c.site, 910, "run", "elastic_launch("),
          ("%s/torch/distributed/launcher/api.py" % c.site, 260, "launch_agent", "result = agent.run()"),
          ("%s/torch/distributed/elastic/agent/server/api.py" % c.site, 696, "run", "result = self._invoke_run(role)"),
          ("%s/torch/distributed/elastic/multiprocessing/api.py" % c.site, 84, "_terminate_process_handler", "raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)")]
    pre, _ = tb_lines(fr, None)
    for l in pre:
        S.out(node, l, label=("sym", "signal_exception:context"), t=t)
    S.out(node, "torch.distributed.elastic.multiprocessing.api.SignalException: Process %d got signal: %d" % (S.pid(node, -1), sig), label=(lab, "signal_exception"), t=t)


def ds_launcher_fail(S, node, lr_failed, ec, t):
    c = S.c
    for lr in range(c.rpn):
        sym(S, node, "[%s] [INFO] [launch.py:316:sigkill_handler] Killing subprocess %d" % (ts_py(S.lt(node, t)), S.pid(node, lr)), "ds_launcher_kill_subprocess", t=t)
    sym(S, node, "[%s] [ERROR] [launch.py:322:sigkill_handler] ['/usr/bin/python', '-u', '%s', '--local_rank=%d', '--deepspeed', 'ds_config.json'] exits with return code = %d" % (ts_py(S.lt(node, t)), c.script, lr_failed, ec), "ds_launcher_exit_code", t=t)


def task_range(S, node):
    a = S.g(node, 0)
    b = a + S.c.rpn - 1
    return ("task %d" % a) if a == b else ("tasks %d-%d" % (a, b))
