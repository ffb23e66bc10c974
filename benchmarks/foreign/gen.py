#!/usr/bin/env python3
"""Clean-room generator of failed distributed LLM-training jobs ("foreign" benchmark).

Usage:
    python benchmarks/foreign/gen.py --out DIR --seeds 0..39
    python benchmarks/foreign/gen.py --list
    python benchmarks/foreign/gen.py --check DIR      # re-read every truth line

Stdlib only, deterministic per seed (random.Random(f"foreign-{seed}")).
See README.md in this directory.
"""
import argparse
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random  # noqa: E402

import faults as FX  # noqa: E402
from catalog import FAULTS  # noqa: E402
from common import HOST_STYLES, K8S_HOST, NPU_HOST_STYLES, STAGES, Sim, make_cfg, ts_iso  # noqa: E402
from styles import FW, launch_ok, launch_start  # noqa: E402

AGENT_LAUNCHERS = ("torchrun-rank", "torchrun-default", "torchrun-plain", "srun-torchrun", "kubectl")


# ----------------------------------------------------------------------------- fault injection

def _slurm(S):
    return S.c.launcher in ("srun", "srun-torchrun")


def _node_teardown(S, node, failures, t, root_lab="sym"):
    """launcher reaction on one node whose workers failed. failures: [(lr, exitcode, is_root)]"""
    c = S.c
    if not failures:
        return
    L = c.launcher
    if L in AGENT_LAUNCHERS:
        FX.child_failed(S, node, failures, t, c.script, kind_lab=root_lab)
    elif L == "pdsh":
        FX.ds_launcher_fail(S, node, failures[0][0], failures[0][1], t)
        if node != 0:
            FX.sym(S, 0, "pdsh@%s: %s: ssh exited with exit code %d" % (S.nodes[0].host, S.nodes[node].host, 1 if failures[0][1] >= 0 else 255), "pdsh_ssh_exit", t=t)
    elif L == "srun":
        ec = failures[0][1]
        what = {-6: "Aborted (core dumped)", -9: "Killed", -11: "Segmentation fault (core dumped)", -15: "Terminated", -7: "Bus error (core dumped)"}.get(ec, "Exited with exit code %d" % ec)
        if len(failures) == 1:
            FX.sym(S, 0, "srun: error: %s: task %d: %s" % (S.nodes[node].host, S.g(node, failures[0][0]), what), "srun_task_exit", t=t)
        else:
            gs = sorted(S.g(node, f[0]) for f in failures)
            FX.sym(S, 0, "srun: error: %s: tasks %s: %s" % (S.nodes[node].host, "%d-%d" % (gs[0], gs[-1]) if gs[-1] - gs[0] + 1 == len(gs) else ",".join(map(str, gs)), what), "srun_task_exit", t=t)
    elif L == "mpirun":
        pass
    if L == "srun-torchrun":
        FX.sym(S, 0, "srun: error: %s: task %d: Exited with exit code 1" % (S.nodes[node].host, node), "srun_task_exit", t=t + 2)


def _mpirun_summary(S, node, lr, ec, t):
    if ec is not None and ec < 0:
        txt = ["--------------------------------------------------------------------------",
               "mpirun noticed that process rank %d with PID %d on node %s exited on signal %d (%s)." % (S.g(node, lr), S.pid(node, lr), S.nodes[node].host, -ec, {6: "Aborted", 9: "Killed", 11: "Segmentation fault", 15: "Terminated", 7: "Bus error"}[-ec]),
               "--------------------------------------------------------------------------"]
        kind = "mpirun_noticed_signal"
    else:
        txt = ["--------------------------------------------------------------------------",
               "Primary job  terminated normally, but 1 process returned",
               "a non-zero exit code. Per user-direction, the job has been aborted.",
               "--------------------------------------------------------------------------",
               "--------------------------------------------------------------------------",
               "mpirun detected that one or more processes exited with non-zero status, thus causing",
               "the job to be terminated. The first process to do so was:",
               "",
               "  Process name: [[%d,1],%d]" % (S.c.slurm_job % 65536, S.g(node, lr)),
               "  Exit code:    %d" % (ec or 1),
               "--------------------------------------------------------------------------"]
        kind = "mpirun_nonzero_exit"
    for _k, l in enumerate(txt):
        key = l.startswith("mpirun")
        S.out(0, l, label=("sym", kind if key else kind + ":context"), t=t)


def _kill_all(S, skip, t, reason=None, lab="sym"):
    """scheduler-driven cancellation of every step on nodes not in skip"""
    c = S.c
    if _slurm(S):
        FX.sym(S, 0, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", "srun_step_aborted", t=t)
        for i in range(S.n):
            if i in skip:
                continue
            tail = " DUE TO %s" % reason if reason else ""
            S.out(i, "slurmstepd: error: *** STEP %d.0 ON %s CANCELLED AT %s%s ***" % (c.slurm_job, S.nodes[i].host, ts_iso(S.lt(i, t)), tail),
                  label=(lab, "slurm_step_cancelled"), t=t)
            if S.agent:
                FX.agent_signal(S, i, t + 0.5)
        for i in range(S.n):
            if i in skip:
                continue
            if i < 12 or i == S.n - 1:
                FX.sym(S, 0, "srun: error: %s: %s: Terminated" % (S.nodes[i].host, FX.task_range(S, i) if c.launcher == "srun" else "task %d" % i), "srun_task_exit", t=t + 1)
        if reason is None:
            FX.sym(S, 0, "srun: Terminating StepId=%d.0" % c.slurm_job, "srun_step_aborted", t=t + 1)
    elif c.launcher == "mpirun":
        pass
    else:
        for i in range(S.n):
            if i in skip:
                continue
            FX.agent_signal(S, i, t)


def inject(S, F, stage, it, node, lr, save_it=None):
    marks = [len(nl.lines) for nl in S.nodes]
    faulty = _inject(S, F, stage, it, node, lr, save_it)
    # lines emitted for the fault are ordered by (simulated) time of emission per node
    for nl, m in zip(S.nodes, marks, strict=False):
        tail = sorted(range(m, len(nl.lines)), key=lambda k: nl.times[k])
        nl.lines[m:] = [nl.lines[k] for k in tail]
        nl.times[m:] = [nl.times[k] for k in tail]
    return faulty


def _inject(S, F, stage, it, node, lr, save_it=None):
    c = S.c
    r = S.r
    X = FX.X(node=node, lr=lr, g=S.g(node, lr), stage=stage, it=it, save_it=save_it, host=S.nodes[node].host)
    t_f = S.t
    R = FX.BUILDERS[F["id"]](S, X)
    kill_now = (_slurm(S) and c.kill_on_bad_exit) or c.launcher == "mpirun"
    prop = R["prop"]
    faulty = [node]

    # --------------------------------------------------------- scheduler cancellations
    if prop == "preempt":
        faulty = list(range(S.n))
        if _slurm(S):
            S.out(0, "slurmstepd: error: *** JOB %d ON %s CANCELLED AT %s DUE TO %s ***" % (c.slurm_job, S.nodes[0].host, ts_iso(S.lt(0, t_f)), R["reason"]),
                  label=("ind", "slurm_job_cancelled_" + R["reason"].lower().replace(" ", "_")), t=t_f)
        _kill_all(S, set(), t_f + r.uniform(0.1, 2), reason=R["reason"], lab="ind")
        return faulty

    # --------------------------------------------------------- every rank failed by itself
    if R.get("all"):
        faulty = list(range(S.n))
        for i in range(S.n):
            _node_teardown(S, i, [(l, 1, l == 0) for l in range(c.rpn)], t_f + r.uniform(1, 5))
        if c.launcher == "mpirun":
            _mpirun_summary(S, 0, 0, 1, t_f + 3)
        return faulty

    # --------------------------------------------------------- rendezvous (agent level) failure
    if prop == "rdzv":
        d = R["delay"]
        _node_teardown_agent_only = True  # noqa: F841
        for i in range(S.n):
            if i == node:
                continue
            tt = t_f + 600 + r.uniform(0, 5)
            pre, _ = FX.tb_lines([("%s/torch/distributed/launcher/api.py" % c.site, 255, "launch_agent", "result = agent.run()"),
                                  ("%s/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py" % c.site, 1133, "next_rendezvous", "self._op_executor.run(join_op, deadline, self._get_deadline)"),
                                  ("%s/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py" % c.site, 667, "run", "raise RendezvousTimeoutError")], None)
            for l in pre:
                S.out(i, l, label=("sym", "rendezvous_timeout:context"), t=tt)
            S.out(i, "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", label=("sym", "rendezvous_timeout"), t=tt)
        if _slurm(S):
            for i in range(S.n):
                FX.sym(S, 0, "srun: error: %s: task %d: Exited with exit code 1" % (S.nodes[i].host, i), "srun_task_exit", t=t_f + d)
        return faulty

    # --------------------------------------------------------- silent node loss
    if R.get("silent"):
        S.nodes[node].alive = False
        t_det = t_f + r.uniform(15, 90)
        victims = [i for i in range(S.n) if i != node]
        neigh = {(node + 1) % S.n, (node - 1) % S.n} - {node}
        slurm_kill_t = t_f + r.uniform(200, 320) if (_slurm(S) and node != 0) else None
        wd_t = t_f + c.timeout_s
        killed_before_wd = slurm_kill_t is not None and slurm_kill_t < wd_t
        if slurm_kill_t is not None:
            FX.sym(S, 0, "srun: error: Node failure on %s" % S.nodes[node].host, "srun_node_failure", t=slurm_kill_t - 30)
        for i in victims:
            fails = []
            if i in neigh:
                for l in range(c.rpn):
                    if r.random() < 0.6 or l == 0:
                        for txt, k in FX.ib_peer_block(S, i, l, S.nodes[node].ip):
                            S.out(i, txt, rank=S.g(i, l), label=("sym", k), t=t_det)
                        if not killed_before_wd or True:
                            S.out(i, FX.nccl_remote_error_exc(S), rank=S.g(i, l), label=("sym", "nccl_remote_error"), t=t_det + 1)
                            S.out(i, "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.", rank=S.g(i, l), label=("sym", "nccl_remote_error:context"), t=t_det + 1)
                        fails.append((l, 1, not fails))
            elif not killed_before_wd:
                _wd_node(S, i, range(c.rpn), wd_t, stage, fails)
            if fails and not killed_before_wd:
                _node_teardown(S, i, fails, (t_det if i in neigh else wd_t) + 3)
        if slurm_kill_t is not None:
            S.out(0, "slurmstepd: error: *** JOB %d ON %s CANCELLED AT %s DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***" % (c.slurm_job, S.nodes[0].host, ts_iso(S.lt(0, slurm_kill_t))), label=("sym", "slurm_job_cancelled_node_failure"), t=slurm_kill_t)
            if S.agent:
                for i in victims:
                    FX.agent_signal(S, i, slurm_kill_t + 1)
        return faulty

    # --------------------------------------------------------- crash or hang of one rank
    hang = R.get("hang")
    d0 = R.get("delay", 0)
    t_c = t_f + d0 + r.uniform(0.5, 4)
    extra = R.get("extra_failed", [])
    culprit_lrs = [lr] + list(extra)
    agent_like = c.launcher in AGENT_LAUNCHERS or c.launcher == "pdsh"
    # victims: (node, lr) pairs
    victims = [(i, l) for i in range(S.n) for l in range(c.rpn) if (i, l) != (node, lr) and not (i == node and l in extra)]
    if not hang and agent_like:
        victims = [(i, l) for (i, l) in victims if i != node]
    optype = R.get("optype") or r.choice(FX.OPTYPE[stage])
    seq = S.seq
    numel = r.choice([1, 1, 466119168, 9801523, 544997376, 19008]) if stage == "training" else 1
    if prop in ("init_wd", "init_hccl"):
        seq = 1
    if not hang:
        # culprit-side teardown
        ec = R.get("exit", 1)
        slurm_oom = R.get("slurm_oom")
        if R.get("agent_sigterm") and c.launcher in AGENT_LAUNCHERS:
            FX.agent_signal(S, node, t_c, lab="ind")
        elif c.launcher == "mpirun":
            _mpirun_summary(S, node, lr, ec, t_c)
        else:
            _node_teardown(S, node, [(l, ec if l == lr else 1, l == lr) for l in culprit_lrs], t_c, root_lab="ind" if R.get("agent_ind") else "sym")
        if slurm_oom and _slurm(S):
            S.out(node, "slurmstepd: error: Detected 1 oom_kill event in StepId=%d.0. Some of the step tasks have been OOM Killed." % c.slurm_job,
                  label=("ind", "slurm_oom_kill_event"), t=t_c)
        if kill_now:
            _kill_all(S, {node}, t_c + r.uniform(1, 30))
            return faulty
        if prop == "none":
            launch_ok(S, [i for i in range(S.n) if i != node])
            return faulty
    else:
        if R.get("culprit_wd"):
            L = FX.wd_block(S, node, lr, t_f + c.timeout_s + r.uniform(-3, 3), seq + 1, "ALLREDUCE", 1)
            for txt, k in L:
                S.out(node, txt, rank=S.g(node, lr), label=("ind", "culprit_" + k if not k.endswith(":context") else "culprit_" + k), t=t_f + c.timeout_s)

    # peers
    t_prop = {"wd": t_f + d0 + c.timeout_s, "init_wd": t_f + c.timeout_s, "hccl": t_f + c.timeout_s, "init_hccl": t_f + d0,
              "ib": t_f + r.uniform(10, 60), "gloo": t_f + r.uniform(0.5, 3), "store": t_f + r.uniform(0.5, 5),
              "dcp": t_f + r.uniform(0.5, 5)}[prop]
    if hang and prop == "wd":
        t_prop = t_f + c.timeout_s
    per_node = {}
    for (i, l) in victims:
        per_node.setdefault(i, []).append(l)
    big = S.n >= 96
    neigh = {(node + 1) % S.n, (node - 1) % S.n}
    for i in sorted(per_node):
        lrs = per_node[i]
        fails = []
        tt = t_prop + r.uniform(0, 4)
        if prop in ("wd", "init_wd") or (prop == "ib" and i not in neigh):
            _wd_node(S, i, lrs, (t_f + c.timeout_s) if prop == "ib" else tt, stage, fails, seq=seq, optype=optype, numel=numel, short=big)
        elif prop == "ib":
            for l in lrs:
                for txt, k in FX.ib_peer_block(S, i, l, S.nodes[node].ip):
                    S.out(i, txt, rank=S.g(i, l), label=("sym", k), t=tt)
                S.out(i, FX.nccl_remote_error_exc(S), rank=S.g(i, l), label=("sym", "nccl_remote_error"), t=tt)
                fails.append((l, 1, not fails))
        elif prop in ("hccl",):
            for l in lrs:
                for txt, k in FX.hccl_block(S, i, l, tt, S.g(node, lr)):
                    S.out(i, txt, rank=S.g(i, l), label=("sym", k), t=tt)
                fails.append((l, 1, not fails))
        elif prop == "init_hccl":
            for l in lrs:
                S.out(i, "EI0006: %s Getting socket times out. Reason: 1. The remote does not initiate a connect request. some NPUs in the cluster are abnormal.    2. The remote does not initiate a connect request because the collective communication operator is started too late or is not started by some NPU in the cluster.    3. The communication link is disconnected. (For example, the IP addresses are not on the same network segment or the TLS configurations are inconsistent.)" % FX.ts_ascend(S.lt(i, tt)),
                      rank=S.g(i, l), label=("sym", "hccl_ei0006_get_socket_timeout"), t=tt)
                S.out(i, "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64", rank=S.g(i, l), label=("sym", "hccl_error_processgroup"), t=tt)
                fails.append((l, 1, not fails))
        else:
            blk = {"gloo": lambda l: FX.gloo_block(S, i, l, S.nodes[node].ip), "store": lambda l: FX.store_block(S, i, l),
                   "dcp": lambda l: FX.dcp_block(S, i, l, S.g(node, lr))}[prop]
            for l in lrs:
                for txt, k in blk(l):
                    S.out(i, txt, rank=S.g(i, l), label=("sym", k), t=tt)
                fails.append((l, 1, not fails))
        if fails:
            if c.launcher == "mpirun":
                continue
            _node_teardown(S, i, fails, tt + r.uniform(1, 6))
    if hang and c.launcher in AGENT_LAUNCHERS and node not in per_node:
        pass
    if c.launcher == "mpirun" and hang:
        i0 = sorted(per_node)[0]
        _mpirun_summary(S, i0, per_node[i0][0], -6, t_prop + 5)
    return faulty


def _wd_node(S, i, lrs, t, stage, fails, seq=None, optype=None, numel=1, short=False):
    seq = S.seq if seq is None else seq
    optype = optype or S.r.choice(FX.OPTYPE[stage])
    for l in lrs:
        for txt, k in FX.wd_block(S, i, l, t + S.r.uniform(0, 2), seq, optype, numel, short=short):
            S.out(i, txt, rank=S.g(i, l), label=("sym", k), t=t)
        fails.append((l, -6, not fails))


# ----------------------------------------------------------------------------- one run

def run(cfg, rng, hosts, t0, fault=None, stage=None, plan=None):
    S = Sim(cfg, rng, hosts, t0)
    S.t0 = t0
    S.fw = FW[cfg.fw](S)
    S.it_done = cfg.start_iter
    fw = S.fw
    c = cfg
    res = {"faulty": [], "iteration": None}
    launch_start(S)

    def benign_tick():
        for i in range(S.n):
            if rng.random() < c.benign_rate:
                S.benign(i, rank=S.g(i, rng.randrange(c.rpn)))

    for ph in fw.phases:
        if fault and stage == ph:
            node, lr = plan["node"], plan["lr"]
            res["faulty"] = inject(S, fault, ph, None, node, lr)
            return S, res
        getattr(fw, ph)()
        benign_tick()
        S.adv(rng.uniform(2, 30))

    it = c.start_iter
    fid = fault["id"] if fault else None
    mode = fault["mode"] if fault else None
    slow_from = lead_from = crash_it = None
    fp16_scale = 65536
    if fault and stage == "training":
        if mode == "slow":
            slow_from = plan["it"]
            crash_it = slow_from + plan["k"] * c.log_interval
        elif fid in FX.LEAD or fid == "fp16_loss_scale_floor":
            lead_from = plan["it"]
            crash_it = lead_from + (17 if fid == "fp16_loss_scale_floor" else plan["k"] * c.log_interval)
        else:
            crash_it = plan["it"]
    lead_k = 0
    while it < c.end_iter:
        it += 1
        dt = c.step_time * rng.uniform(0.97, 1.03)
        factor = 1.0
        if crash_it is not None and it == crash_it:
            res["iteration"] = plan["it"]
            res["faulty"] = inject(S, fault, "training", plan["it"], plan["node"], plan["lr"])
            return S, res
        if slow_from is not None and it >= slow_from:
            factor = 1.0 + (it - slow_from + 1) / (crash_it - slow_from) * rng.uniform(1.5, 3)
        if lead_from is not None and it >= lead_from:
            X = FX.X(node=plan["node"], lr=plan["lr"], g=S.g(plan["node"], plan["lr"]))
            if fid == "fp16_loss_scale_floor":
                FX.fp16_lead(S, X, it, fp16_scale)
                fp16_scale = max(1, fp16_scale // 2)
            elif (it % c.log_interval == 0 and rng.random() < 0.5) or it == lead_from:
                FX.LEAD[fid](S, X, lead_k)
                lead_k += 1
                factor = rng.uniform(1.2, 2.5)
        S.adv(dt * factor)
        if it % c.log_interval == 0:
            pr = fw.progress_rank()
            before = len(S.nodes[pr // c.rpn].lines)
            fw.progress(it, dt * factor)
            if factor > 1.05 and slow_from is not None:
                nl = S.nodes[pr // c.rpn]
                for k in range(before, len(nl.lines)):
                    if nl.lines[k][1] is None:
                        nl.lines[k] = (nl.lines[k][0], ("sym", "slow_iteration"))
            if c.hb and it % c.hb_every == 0:
                for i in range(S.n):
                    if slow_from is not None and it >= slow_from and i == plan["node"]:
                        S.out(i, fw.heartbeat(i, it, dt, slow=factor), rank=S.g(i, 0), label=("ind", "slow_compute"))
                    else:
                        S.out(i, fw.heartbeat(i, it, dt), rank=S.g(i, 0))
            benign_tick()
        if c.save_interval and it % c.save_interval == 0:
            fw.save_begin(it)
            if fault and stage == "checkpointing" and it == plan["it"]:
                res["faulty"] = inject(S, fault, "checkpointing", it, plan["node"], plan["lr"], save_it=it)
                return S, res
            S.adv(rng.uniform(8, 90))
            fw.save_end(it)
        if c.eval_interval and it % c.eval_interval == 0:
            fw.eval_begin(it)
            if fault and stage == "evaluation" and it == plan["it"]:
                res["faulty"] = inject(S, fault, "evaluation", it, plan["node"], plan["lr"])
                return S, res
            S.adv(rng.uniform(20, 120))
            fw.eval_end(it)
        S.it_done = it
        S.seq += 3
    fw.final_begin()
    if fault and stage == "finalization":
        res["faulty"] = inject(S, fault, "finalization", None, plan["node"], plan["lr"], save_it=S.it_done)
        return S, res
    S.adv(rng.uniform(10, 60))
    fw.final_end()
    launch_ok(S)
    return S, res


# ----------------------------------------------------------------------------- one case

def hosts_for(cfg, n, offset):
    if cfg.k8s:
        return [K8S_HOST[0](i, offset) for i in range(n)]
    st = (NPU_HOST_STYLES if cfg.fw == "mindspeed" else HOST_STYLES)[cfg.host_style]
    return [st(i, offset) for i in range(n)]


def pick_fault(seed, rng):
    order = sorted(FAULTS, key=lambda f: f["id"])
    return order[(seed * 17 + 5) % len(order)] if rng.random() < 0.85 else rng.choice(order)


def plan_fault(cfg, rng, fault, stage, n):
    c = cfg
    cul = fault["culprit"]
    if cul == "rank0":
        node = 0
    elif cul == "last":
        node = n - 1
    else:
        node = rng.randrange(n)
    lr = 0 if cul == "rank0" else rng.randrange(c.rpn)
    plan = {"node": node, "lr": lr, "k": rng.randint(5, 12) if fault["mode"] == "slow" else rng.randint(3, 8)}
    span = c.end_iter - c.start_iter
    if stage == "training":
        lo = c.start_iter + max(2, span // 6)
        hi = c.end_iter - 14 * c.log_interval - 20
        plan["it"] = rng.randint(lo, max(lo, hi))
    elif stage in ("checkpointing", "evaluation"):
        iv = c.save_interval if stage == "checkpointing" else c.eval_interval
        cands = [x for x in range(c.start_iter + iv, c.end_iter + 1) if x % iv == 0]
        plan["it"] = rng.choice(cands[len(cands) // 3:] or cands)
    return plan


def printed_iteration(it, log_interval):
    """The number the job prints for the iteration in progress (l4's contract: an
    iteration is named by the number the job prints).  With a log interval of 10, a
    fault in step 13885 falls in the interval the job would have reported as 13890;
    nothing in the logs can name 13885 itself.  ``iteration_exact`` keeps the step."""
    if it is None:
        return None
    return -(-it // log_interval) * log_interval


def make_case(seed):
    rng = random.Random(f"foreign-{seed}")
    fault = pick_fault(seed, rng)
    stage = rng.choice(fault["stages"])
    fw = rng.choice(fault["fws"])
    cfg = make_cfg(rng, fw, seed, fault)
    fid = fault["id"]
    # configuration constraints needed by some faults
    if fid == "rdzv_store_unreachable" and cfg.launcher not in AGENT_LAUNCHERS:
        cfg.launcher = "torchrun-plain" if fw != "torchtitan" else "torchrun-rank"
        cfg.k8s = False
    if fid == "pod_evicted_sigterm":
        cfg.launcher, cfg.k8s = "kubectl", True
    if fid == "fp16_loss_scale_floor":
        cfg.fp16 = True
    if fid == "tp_heads_not_divisible":
        cfg.heads = rng.choice([52, 20, 40])
        cfg.tp = 8 if cfg.heads != 20 else rng.choice([8, 3])
        cfg.rpn = 8
        cfg.world = cfg.n_nodes * cfg.rpn
    if fault["mode"] == "slow":
        cfg.hb, cfg.hb_every, cfg.hb_word = True, cfg.log_interval, rng.choice([0, 3])
    if stage == "checkpointing" and (cfg.end_iter - cfg.start_iter) < 2 * cfg.save_interval:
        cfg.save_interval = max(cfg.log_interval, (cfg.end_iter - cfg.start_iter) // 4 // cfg.log_interval * cfg.log_interval)
    if stage == "evaluation":
        if not cfg.eval_interval or (cfg.end_iter - cfg.start_iter) < 2 * cfg.eval_interval:
            cfg.eval_interval = cfg.save_interval
        if not any(x % cfg.eval_interval == 0 for x in range(cfg.start_iter + cfg.eval_interval, cfg.end_iter + 1)):
            # a short resumed run can hold no evaluation at all (development seed 466): then
            # evaluate as often as the checkpointing rule above would save
            span = cfg.end_iter - cfg.start_iter
            cfg.eval_interval = max(cfg.log_interval, span // 4 // cfg.log_interval * cfg.log_interval)
    if stage == "finalization" and fid == "hub_upload_5xx":
        cfg.push_to_hub = True
    cfg.world = cfg.n_nodes * cfg.rpn
    cfg.dp = max(1, cfg.world // (cfg.tp * cfg.pp))
    config_id = "cfg-%s-%04x" % (fw, rng.randrange(1 << 16))
    day0 = 1704067200 + rng.randrange(0, 640) * 86400
    t0 = day0 + rng.uniform(0, 86400)
    n = cfg.n_nodes
    plan = plan_fault(cfg, rng, fault, stage, n)
    off = rng.randrange(0, 200)
    hosts = hosts_for(cfg, n, off)
    S, res = run(cfg, random.Random(f"foreign-{seed}-run"), hosts, t0, fault, stage, plan)
    job = {"job_id": "job-%d-%06x" % (seed, rng.randrange(1 << 24)), "config_id": config_id, "status": "failed", "framework": fw}
    # baselines
    baselines = []
    nb = rng.choice([1, 2, 2])
    for b in range(nb):
        bc = copy.copy(cfg)
        if n >= 8 and rng.random() < 0.35:
            bc.n_nodes = max(2, n // rng.choice([2, 4]))
        bc.world = bc.n_nodes * bc.rpn
        bc.dp = max(1, bc.world // (bc.tp * bc.pp))
        if fid == "tp_heads_not_divisible":
            bc.tp = next(x for x in (8, 4, 2, 1) if cfg.heads % x == 0)
        if fault["mode"] == "preempt" and b == 0:
            pass
        boff = off + 300 + 157 * (b + 1)
        bh = hosts_for(bc, bc.n_nodes, boff)
        bt0 = t0 - rng.uniform(2, 40) * 86400
        BS, _ = run(bc, random.Random(f"foreign-{seed}-base{b}"), bh, bt0)
        bjob = {"job_id": "job-%d-b%d-%06x" % (seed, b, rng.randrange(1 << 24)), "config_id": config_id, "status": "succeeded", "framework": fw}
        baselines.append((BS, bjob))
    return fault, stage, cfg, S, res, job, baselines, config_id


def write_run(S, job, d):
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "job.json"), "w") as f:
        json.dump(job, f, indent=1)
    for nl in S.nodes:
        with open(os.path.join(d, "logs", nl.host + ".log"), "w", encoding="utf-8") as f:
            f.write("\n".join(t for t, _ in nl.lines) + "\n")


def generate(seed, out):
    fault, stage, cfg, S, res, job, baselines, config_id = make_case(seed)
    d = os.path.join(out, "case-%d" % seed)
    write_run(S, job, os.path.join(d, "failed"))
    bnames = []
    for k, (BS, bjob) in enumerate(baselines):
        write_run(BS, bjob, os.path.join(d, "baseline-%d" % k))
        bnames.append("baseline-%d" % k)
    inds, syms = [], []
    expect = []
    for nl in S.nodes:
        for k, (txt, lab) in enumerate(nl.lines):
            if lab is None:
                continue
            ref = {"file": "logs/%s.log" % nl.host, "line": k + 1, "kind": lab[1]}
            (inds if lab[0] == "ind" else syms).append(ref)
            expect.append((ref, txt))
    truth = {"job_id": job["job_id"], "config_id": config_id, "framework": cfg.fw, "seed": seed, "n_nodes": len(S.nodes),
             "fault": {"id": fault["id"], "category": fault["category"], "root_cause": fault["root_cause"], "source": fault["source"]},
             "faulty_nodes": [S.nodes[i].host for i in res["faulty"]],
             "stage": stage, "iteration": printed_iteration(res["iteration"], cfg.log_interval) if stage == "training" else None,
             "iteration_exact": res["iteration"] if stage == "training" else None,
             "indicators": inds, "symptoms": syms, "baselines": bnames,
             "launcher": cfg.launcher}
    with open(os.path.join(d, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    # self-check: re-read every truth line
    cache = {}
    for ref, txt in expect:
        p = os.path.join(d, "failed", ref["file"])
        if p not in cache:
            with open(p, encoding="utf-8") as f:
                cache[p] = f.read().split("\n")
        got = cache[p][ref["line"] - 1]
        assert got == txt, (seed, ref, got, txt)
    return truth


def check_dir(out):
    bad = 0
    n = 0
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        tp = os.path.join(d, "truth.json")
        if not os.path.exists(tp):
            continue
        n += 1
        t = json.load(open(tp))
        errs = []
        if t["stage"] not in STAGES:
            errs.append("stage")
        if (t["stage"] == "training") != (t["iteration"] is not None):
            errs.append("iteration rule")
        cache = {}
        for ref in t["indicators"] + t["symptoms"]:
            p = os.path.join(d, "failed", ref["file"])
            if p not in cache:
                if not os.path.exists(p):
                    errs.append("missing " + ref["file"])
                    continue
                cache[p] = open(p, encoding="utf-8").read().split("\n")
            L = cache[p]
            if not (1 <= ref["line"] <= len(L)) or not L[ref["line"] - 1].strip():
                errs.append("bad line %s" % ref)
        for h in t["faulty_nodes"]:
            if not os.path.exists(os.path.join(d, "failed", "logs", h + ".log")):
                errs.append("faulty node without log " + h)
        for b in t["baselines"]:
            j = json.load(open(os.path.join(d, b, "job.json")))
            if j["status"] != "succeeded" or j["config_id"] != t["config_id"]:
                errs.append("baseline " + b)
        if errs:
            bad += 1
            print(name, errs[:5])
    print("checked %d cases, %d with problems" % (n, bad))
    return bad == 0


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if ".." in part:
            a, b = part.split("..")
            out.extend(range(int(a), int(b) + 1))
        elif "-" in part[1:]:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--seeds", default="0..39")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check")
    a = ap.parse_args()
    if a.list:
        for f in sorted(FAULTS, key=lambda f: (f["category"], f["id"])):
            print("%-38s %-9s %-45s %s" % (f["id"], f["category"], ",".join(f["stages"]), f["source"]))
        print("%d fault kinds" % len(FAULTS))
        return
    if a.check:
        sys.exit(0 if check_dir(a.check) else 1)
    if not a.out:
        ap.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    for s in parse_seeds(a.seeds):
        t = generate(s, a.out)
        print("case-%d %-10s %-38s %-14s nodes=%-3d it=%s ind=%d sym=%d" % (s, t["framework"], t["fault"]["id"], t["stage"], t["n_nodes"], t["iteration"], len(t["indicators"]), len(t["symptoms"])))
    check_dir(a.out)


if __name__ == "__main__":
    main()
