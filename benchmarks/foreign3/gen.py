#!/usr/bin/env python3
"""foreign3: clean-room generator of FAILED multi-node LLM training job logs
(accelerate/LLaMA-Factory/ms-swift, torchrun --tee, SageMaker MPI, Kubeflow
PyTorchJob, SkyPilot/Ray) with truth annotations.  Stdlib only, deterministic."""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from engine import Job, ceil_to  # noqa: E402
from faults import CATALOGUE, HOOKS, F  # noqa: E402
from styles import STYLES  # noqa: E402

RESERVED = 9000
N = len(CATALOGUE)
_ORDER = list(range(N))
random.Random("foreign3-order").shuffle(_ORDER)

STAGE_AT = {
    "gpu_ecc_at_startup": "startup", "flash_attn_abi_mismatch": "startup", "deepspeed_batch_mismatch": "startup",
    "nvidia_driver_too_old": "startup", "fabric_manager_down": "startup", "rendezvous_dns_failure": "pre",
    "nccl_wrong_interface": "pg", "master_port_in_use": "startup",
}


def spec_for_seed(seed):
    return CATALOGUE[_ORDER[seed % N]]


# ------------------------------------------------------------------ configuration
def host_names(rng, style, n, cfg):
    if style == "sagemaker-mpi":
        return [f"algo-{i+1}" for i in range(n)]
    if style == "kubeflow-pytorchjob":
        j = cfg["jobname"]
        return [f"{j}-master-0"] + [f"{j}-worker-{i}" for i in range(n - 1)]
    if style == "skypilot-ray":
        c = cfg["sky_cluster"]
        return [f"{c}-head"] + [f"{c}-worker{i}" for i in range(1, n)]
    scheme = rng.randrange(6)
    base = rng.randrange(1, 300)
    if scheme == 0:
        return [f"gpu-node-{base+i:03d}" for i in range(n)]
    if scheme == 1:
        return [f"dgx-h100-{base+i:02d}" for i in range(n)]
    if scheme == 2:
        r = rng.randrange(1, 20)
        return [f"hpc-r{r + (base+i)//16:02d}n{(base+i)%16:02d}" for i in range(n)]
    if scheme == 3:
        a, b = rng.randrange(0, 255), rng.randrange(0, 200)
        return [f"ip-10-{a}-{b + (i*7)//250}-{(11+i*7)%250+2}" for i in range(n)]
    if scheme == 4:
        return [f"node{base+i:04d}" for i in range(n)]
    zone = rng.choice(["a", "b", "c"])
    return [f"gn{zone}{base+i:03d}.cluster.local" for i in range(n)]


def ips_for(rng, n):
    a, b = rng.randrange(0, 250), rng.randrange(0, 200)
    start = rng.randrange(2, 100)
    out = []
    for i in range(n):
        v = start + i * rng.choice([1, 1, 2])
        out.append(f"10.{a}.{b + v // 250}.{v % 250 + 2}")
    return out


def make_cfg(rng, seed, spec, style):
    needs = spec.get("needs", {})
    cfg = {}
    cfg["style"] = style
    cfg["torch"] = rng.choice(["2.1.2", "2.3.1", "2.4.1", "2.5.1"] if style != "torchrun-tee" else ["2.0.1", "2.1.2", "2.1.2", "2.3.1", "2.4.1"])
    cfg["pyver"] = rng.choice(["3.10", "3.10", "3.11"])
    env = rng.choice(["/usr/local/lib/python{v}/dist-packages", "/opt/conda/lib/python{v}/site-packages", "/home/{u}/miniconda3/envs/train/lib/python{v}/site-packages"])
    user = rng.choice(["ubuntu", "alice", "mlops", "zhang", "svc-train"])
    cfg["site"] = env.format(v=cfg["pyver"], u=user)
    cfg["python"] = "/usr/bin/python3" if "dist-packages" in env else cfg["site"].split("/lib/")[0] + "/bin/python"
    cfg["torchrun_bin"] = cfg["python"].rsplit("/", 1)[0].replace("/usr/bin", "/usr/local/bin") + "/torchrun"
    cfg["accelerate_bin"] = cfg["torchrun_bin"].replace("torchrun", "accelerate")
    cfg["vendor"] = needs.get("vendor", "nvidia")
    if cfg["vendor"] == "amd":
        cfg["rocm"] = rng.choice(["6.0", "6.1", "6.2"])
        cfg["nccl"] = rng.choice(["2.18.3", "2.20.5"]) + "+hip" + cfg["rocm"]
        cfg["gpu_mem"] = 191.98
    else:
        cfg["nccl"] = rng.choice(["2.18.1", "2.19.3", "2.20.5", "2.21.5"]) + "+cuda" + rng.choice(["12.1", "12.4"])
        cfg["gpu_mem"] = rng.choice([79.14, 79.33, 93.09, 39.39])
    cfg["cuda_drv"] = rng.choice([12020, 12040, 12050])
    cfg["ib"] = needs.get("ib", rng.random() < 0.6)
    cfg["iface"] = rng.choice(["eth0", "bond0", "ens6f0", "ib0"]) if style != "sagemaker-mpi" else "eth0"
    cfg["nccl_debug"] = needs.get("nccl_debug", rng.random() < 0.45)
    cfg["benign_c10"] = rng.random() < 0.5
    cfg["benign_py"] = rng.random() < 0.8
    cfg["commid"] = f"{rng.randrange(16**16):016x}"
    cfg["flavour"] = rng.choice(["lf", "lf", "swift"]) if style in ("accelerate", "sagemaker-mpi") else "none"
    if style == "sagemaker-mpi":
        cfg["flavour"] = "lf"
    model = rng.choice([("meta-llama/Meta-Llama-3-8B-Instruct", 8030261248, "llama", 4), ("Qwen/Qwen2.5-7B-Instruct", 7615616512, "qwen2", 4),
                        ("mistralai/Mistral-7B-v0.3", 7248023552, "mistral", 3), ("Qwen/Qwen2.5-14B", 14770033664, "qwen2", 8),
                        ("meta-llama/Llama-3.1-70B", 70553706496, "llama", 30), ("google/gemma-2-9b", 9241705984, "gemma2", 4)])
    cfg["hub_model"] = model[0]
    cfg["n_params"] = model[1] if style != "skypilot-ray" else rng.choice([123587328, 353822720, 774030080])
    cfg["arch_type"] = {"llama": "llama", "qwen2": "qwen2", "mistral": "mistral", "gemma2": "gemma2"}[model[2]]
    cfg["arch"] = model[2]
    cfg["shards"] = model[3]
    cfg["model_path"] = rng.choice(["/models/", "/mnt/shared/models/", "/data/hf/"]) + model[0].split("/")[1]
    cfg["out_dir"] = rng.choice(["saves/", "/mnt/shared/output/", "/output/"]) + model[0].split("/")[1].lower() + "/full/sft"
    cfg["ckpt_dir"] = rng.choice(["/mnt/ckpt/", "/checkpoints/", "/fsx/ckpt/"]) + f"run-{rng.randrange(1000, 9999)}"
    cfg["data_dir"] = rng.choice(["/mnt/data/sft", "/fsx/datasets/pretrain", "/data/corpus"])
    cfg["dataset"] = rng.choice(["alpaca_zh_custom", "sharegpt_multiturn", "internal_sft_v3", "math_cot_mix"])
    cfg["hf_cache"] = rng.choice(["/mnt/shared/.cache/huggingface", "/fsx/hf_cache"])
    cfg["n_examples"] = rng.randrange(20000, 900000)
    cfg["n_eval"] = rng.choice([500, 1000, 2000, 4096])
    cfg["epochs"] = rng.choice([1, 2, 3])
    cfg["mbs"] = rng.choice([1, 2, 4, 8])
    cfg["gas"] = rng.choice([1, 2, 4, 8, 16])
    cfg["seq"] = rng.choice([2048, 4096, 8192])
    cfg["mem_gib"] = round(rng.uniform(30, 78), 2)
    cfg["eval_secs"] = round(rng.uniform(8, 90), 4)
    cfg["save_secs"] = round(rng.uniform(20, 200), 1)
    cfg["eval_iters"] = rng.choice([20, 50, 100, 200])
    cfg["old_kernel"] = rng.random() < 0.3
    cfg["logfmt"] = rng.choice(["logging", "loguru"])
    cfg["ansi"] = rng.random() < 0.5
    cfg["rdzv_retry"] = rng.choice([0, 0, 1, 2, 3])
    cfg["port"] = rng.choice([29500, 29500, 23456, 6000, 29400])
    cfg["fsdp"] = rng.choice(["full_shard", "hybrid_shard", "shard_grad_op"])
    cfg["n_tokens"] = rng.randrange(50, 2000) * 1e9
    cfg["n_shards"] = rng.randrange(16, 4096)
    cfg["tz_offset_h"] = rng.choice([0, 0, 0, 8, -7, 2, 9]) if style != "sagemaker-mpi" else 0
    cfg["ns"] = rng.choice(["ml-team", "default", "llm-train", "research"])
    cfg["jobname"] = rng.choice(["llama-ft", "qwen-sft", "pretrain-7b", "mistral-dpo", "sft-run"]) + f"-{rng.randrange(16**4):04x}"
    cfg["sky_cluster"] = f"sky-{rng.randrange(16**4):04x}-{user}"
    cfg["sky_job"] = rng.randrange(1, 40)
    cfg["compile"] = rng.random() < 0.5 or spec["id"] == "inductor_compile_failure"
    cfg["instance"] = rng.choice(["ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"])
    cfg["script"] = {"accelerate": rng.choice(["src/train.py", "swift/cli/sft.py"]), "sagemaker-mpi": "train.py"}.get(style, rng.choice(["train.py", "pretrain.py", "main.py"]))
    if style == "accelerate" and cfg["flavour"] == "swift":
        cfg["script"] = "swift/cli/sft.py"
    elif style == "accelerate":
        cfg["script"] = "src/train.py"
    cfg["script_path"] = {"sagemaker-mpi": "/opt/ml/code/", "kubeflow-pytorchjob": "/workspace/", "skypilot-ray": "/home/sky/sky_workdir/"}.get(style, rng.choice(["/workspace/", f"/home/{user}/llm/"])) + cfg["script"]
    cfg["hp_args"] = f"--model_name_or_path {cfg['model_path']} --per_device_train_batch_size {cfg['mbs']} --bf16 True"
    cfg["mpi_jobid"] = rng.randrange(10000, 65000)
    cfg["train_seed"] = rng.choice([42, 1234, 3407])
    cfg["nccl_timeout_s"] = rng.choice([600, 600, 1800, 1200])
    cfg["store_timeout_s"] = rng.choice([300, 900, 1800])
    cfg["seq_base"] = rng.randrange(200, 90000)
    cfg["k8s_nodes"] = [f"gke-gpu-pool-{rng.randrange(16**4):04x}-{rng.randrange(16**3):03x}" for _ in range(130)]
    # ---- scale & schedule
    r = rng.random()
    if r < 0.05:
        cfg["n_nodes"] = 128
    elif r < 0.25:
        cfg["n_nodes"] = rng.choice([2, 2, 3, 4])
    else:
        cfg["n_nodes"] = rng.choice([4, 6, 8, 8, 12, 16, 16, 24, 32, 48, 64])
    cfg["rpn"] = rng.choice([1, 2, 4, 8, 8, 8, 8])
    if cfg["n_nodes"] >= 48:
        cfg["rpn"] = min(cfg["rpn"], 4 if cfg["n_nodes"] < 128 else 2)
    if style == "sagemaker-mpi" and cfg["n_nodes"] * cfg["rpn"] > 256:
        cfg["n_nodes"] = 32
    k = rng.choice([1, 5, 10, 10, 20, 25, 50, 100])
    if style == "skypilot-ray":
        k = rng.choice([1, 10, 10, 20])
    cfg["log_k"] = k
    n_int = rng.randrange(20, 120) if cfg["n_nodes"] < 128 else rng.randrange(12, 25)
    span = k * n_int
    if style == "accelerate":
        span = min(span, 3000)
        span = max(k * 12, span - span % k)
    cfg["eval_every"] = k * rng.randrange(3, 9)
    cfg["save_every"] = cfg["eval_every"] * rng.choice([1, 2])
    if cfg["save_every"] > span // 2:
        cfg["save_every"] = max(k, (span // 3) // k * k)
        cfg["eval_every"] = cfg["save_every"]
    resume = needs.get("resume", rng.random() < 0.35)
    cfg["resume_from"] = cfg["save_every"] * rng.randrange(3, 40) if resume else 0
    cfg["total"] = cfg["resume_from"] + span
    cfg["dt"] = round(rng.uniform(0.35, 9.0), 3)
    cfg["t0"] = 1672531200 + rng.randrange(0, 3 * 365 * 86400)
    cfg["per_node_stats"] = style in ("torchrun-tee", "kubeflow-pytorchjob") and cfg["n_nodes"] <= 32 and rng.random() < 0.7
    cfg["crlf"] = style in ("kubeflow-pytorchjob", "torchrun-tee") and rng.random() < 0.15
    return cfg


# ------------------------------------------------------------------ driver
def metrics(cfg, step, plan, rng):
    loss = 1.05 + 2.4 * math.exp(-step / (cfg["total"] * 0.35 + 50)) + rng.uniform(-0.04, 0.04)
    total = cfg["total"]
    lr = 2e-5 * 0.5 * (1 + math.cos(math.pi * step / total))
    gn = round(rng.uniform(0.25, 1.4), 6 if cfg["flavour"] != "none" else 3)
    dt = cfg["dt"] * rng.uniform(0.96, 1.06)
    if plan and plan["id"] == "fp16_loss_scale_floor" and step > plan["step"] - 3 * cfg["log_k"]:
        loss = loss * rng.uniform(3, 9) if step < plan["step"] - cfg["log_k"] else float("nan")
        gn = float("nan") if loss != loss else gn * 40
    base = dt
    slow_node = None
    if plan and plan["id"] == "straggler_node" and step >= plan["began"]:
        dt *= plan["slow"]
        slow_node = cfg["_slow_node"]
    return {"loss": loss, "lr": float(f"{lr:.12g}"), "gn": gn, "dt": dt, "acc": min(0.95, 0.5 + step / (total * 2.5)),
            "mfu": 40 * cfg["dt"] / dt + rng.uniform(-0.5, 0.5), "base_dt": base, "slow_node": slow_node}


def run_job(job, plan):
    """Drive phases; fire the fault when `plan` says so. Returns (faulty idx, step) or None."""
    st, cfg, rng = job.style, job.cfg, job.rng
    Fc = F(job, plan["spec"]) if plan else None

    def fire(t, step):
        return plan["spec"]["fn"](Fc, t, step)

    t = cfg["t0"] + rng.uniform(0, 5)
    ends = []
    for n in job.nodes:
        if plan and plan["at"] == "pre" and n.idx == plan.get("pre_node"):
            ends.append(t)
            continue
        ends.append(st.startup(job, n, t + rng.random() * 4))
    t = max(ends) + 1
    if plan and plan["stage"] == "initialization" and plan["at"] in ("pre", "startup"):
        return fire(t, None)
    for n in job.nodes:
        st.nccl_init(job, n, t + rng.random())
    t += 3
    if plan and plan["stage"] == "initialization":
        return fire(t, None)
    t = st.model_loading(job, t)
    if plan and plan["stage"] == "model_loading":
        return fire(t, None)
    t = st.data_loading(job, t)
    if plan and plan["stage"] == "data_loading":
        return fire(t, None)
    start, total, k = cfg["resume_from"], cfg["total"], cfg["log_k"]
    t = st.train_begin(job, t, start, total)
    hook = HOOKS.get(plan["id"]) if plan else None
    m = None
    for step in range(start + 1, total + 1):
        m = metrics(cfg, step, plan, rng)
        if plan and plan["stage"] == "training" and step == plan["step"]:
            return fire(t + m["dt"] * rng.uniform(0.1, 0.9), step)
        t += m["dt"]
        st.step(job, step, t, m)
        if hook:
            hook(Fc, step, t)
        if step % k == 0:
            st.log_interval(job, step, t, m)
        if step % cfg["eval_every"] == 0 and step < total:
            t = st.eval_begin(job, step, t + 0.01)
            if plan and plan["stage"] == "evaluation" and step == plan["step"]:
                return fire(t + cfg["eval_secs"] * rng.uniform(0.1, 0.8), step)
            t += cfg["eval_secs"]
            t = st.eval_end(job, step, t, m)
        if step % cfg["save_every"] == 0 and step < total:
            t = st.save_begin(job, step, t + 0.01)
            if plan and plan["stage"] == "checkpointing" and step == plan["step"]:
                return fire(t + 0.5, step)
            t += cfg["save_secs"]
            t = st.save_end(job, step, t)
    if plan and plan["stage"] == "finalization":
        return fire(t + 1, total)
    t = st.train_end(job, t, m)
    for n in job.nodes:
        st.success_epilogue(job, n, t + rng.random())
    return None


def make_plan(rng, spec, cfg, n_nodes):
    stage = spec["stage"]
    plan = {"spec": spec, "id": spec["id"], "stage": stage, "at": STAGE_AT.get(spec["id"], "startup"), "step": None}
    start, total, k = cfg["resume_from"], cfg["total"], cfg["log_k"]
    span = total - start
    if stage == "training":
        if spec.get("needs", {}).get("first_step"):
            plan["step"] = start + 1
        else:
            plan["step"] = start + int(span * rng.uniform(0.35, 0.92)) + 1
        plan["began"] = plan["step"]
        if spec["id"] == "straggler_node":
            plan["began"] = max(start + 2, plan["step"] - k * rng.randrange(4, 12))
            plan["slow"] = rng.uniform(1.8, 3.5)
            cfg["_slow_node"] = rng.randrange(n_nodes)
        if spec["id"] == "ib_link_flapping":
            plan["began"] = max(start + 2, plan["step"] - rng.randrange(3, 9) * k - rng.randrange(k))
            flaps = sorted({rng.randrange(plan["began"], plan["step"]) for _ in range(rng.randrange(2, 5))} | {plan["began"]})
            cfg["_flap_steps"] = set(flaps)
            cfg["_flap_node"] = rng.randrange(n_nodes)
            cfg["_flap_hca"] = rng.choice(["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"])
    elif stage == "evaluation":
        evs = [s for s in range(start + 1, total) if s % cfg["eval_every"] == 0]
        plan["step"] = evs[int(len(evs) * rng.uniform(0.3, 0.99))]
    elif stage == "checkpointing":
        svs = [s for s in range(start + 1, total) if s % cfg["save_every"] == 0]
        plan["step"] = svs[int(len(svs) * rng.uniform(0.3, 0.99))]
    if plan["at"] == "pre":
        plan["pre_node"] = rng.randrange(1, n_nodes) if n_nodes > 1 else 0
    return plan


def generate_case(seed, out_dir):
    rng = random.Random(f"foreign3-{seed}")
    spec = spec_for_seed(seed)
    style = rng.choice(spec["styles"])
    cfg = make_cfg(rng, seed, spec, style)
    if spec["id"] == "rendezvous_dns_failure" or spec["id"] == "nccl_wrong_interface":
        cfg["n_nodes"] = max(cfg["n_nodes"], 2)
    n = cfg["n_nodes"]
    cfg["n_nodes"] = n
    plan = make_plan(rng, spec, cfg, n)
    names = host_names(rng, style, n, cfg)
    ips = ips_for(rng, n)
    ips = [h[3:].replace("-", ".") if h.startswith("ip-10-") else ip for h, ip in zip(names, ips, strict=False)]
    skew_on = rng.random() < 0.75
    skews = [0.0] + [round(rng.uniform(-30, 30), 3) if skew_on else 0.0 for _ in range(n - 1)]
    if skew_on:
        skews[0] = round(rng.uniform(-4, 4), 3)
    config_id = f"cfg-{rng.randrange(16**8):08x}"
    prefix = {"accelerate": "acc", "torchrun-tee": "trt", "sagemaker-mpi": "sm", "kubeflow-pytorchjob": "kf", "skypilot-ray": "sky"}[style]
    job_id = f"{prefix}-{seed:05d}-{rng.randrange(16**6):06x}"
    case_dir = os.path.join(out_dir, f"case-{seed}")
    if plan["at"] == "pre":
        cfg["_pre_culprit"] = plan["pre_node"]

    # ---- failed run
    jrng = random.Random(f"foreign3-{seed}-failed")
    job = Job(jrng, STYLES[style](cfg), cfg, names, ips, skews, "failed")
    if spec["id"] == "rendezvous_dns_failure":
        # the culprit is chosen by the plan (its agent never starts workers)
        spec["fn"]
        job.rng = jrng
    faulty = run_job(job, plan) if spec["id"] != "rendezvous_dns_failure" else _run_dns(job, plan)
    if faulty is None:
        raise RuntimeError(f"seed {seed}: fault {spec['id']} never fired")
    files = job.render(crlf=cfg["crlf"])
    framework = {"accelerate": "accelerate+" + ("llamafactory" if cfg["flavour"] == "lf" else "ms-swift"),
                 "torchrun-tee": "pytorch" + ("-rocm" if cfg["vendor"] == "amd" else ""),
                 "sagemaker-mpi": "smdistributed+transformers", "kubeflow-pytorchjob": "pytorch",
                 "skypilot-ray": "pytorch(nanogpt)"}[style]
    _write_run(case_dir, "failed", {"job_id": job_id, "config_id": config_id, "status": "failed", "framework": framework}, files)
    indicators, symptoms = [], []
    for name in names:
        for it in files[name][1]:
            item = {k: it[k] for k in ("node", "file", "line", "text", "kind")}
            (indicators if it["role"] == "indicator" else symptoms).append(item)

    # ---- baselines
    baselines = []
    nb = 1 + (rng.random() < 0.5)
    for b in range(nb):
        brng = random.Random(f"foreign3-{seed}-baseline-{b}")
        bn = n if brng.random() < 0.6 else max(1, brng.randrange(max(1, n // 2), n + 1))
        bnames = host_names(brng, style, bn, cfg) if brng.random() < 0.6 else names[:bn]
        bips = ips_for(brng, bn)
        bips = [h[3:].replace("-", ".") if h.startswith("ip-10-") else ip for h, ip in zip(bnames, bips, strict=False)]
        bskews = [0.0] + [round(brng.uniform(-30, 30), 3) if skew_on else 0.0 for _ in range(bn - 1)]
        bcfg = dict(cfg)
        bcfg["t0"] = cfg["t0"] - brng.randrange(2, 40) * 86400
        bjob = Job(brng, STYLES[style](bcfg), bcfg, bnames, bips, bskews, "baseline")
        run_job(bjob, None)
        bfiles = bjob.render(crlf=cfg["crlf"])
        bid = f"{prefix}-{seed:05d}-{brng.randrange(16**6):06x}"
        _write_run(case_dir, f"baseline-{b}", {"job_id": bid, "config_id": config_id, "status": "succeeded", "framework": framework}, bfiles)
        baselines.append(f"baseline-{b}")

    k = cfg["log_k"]
    if spec["stage"] in ("training",):
        began = plan.get("began", plan["step"])
        iteration, exact = ceil_to(began, k), began
    elif spec["stage"] in ("evaluation", "checkpointing"):
        iteration = exact = plan["step"]
    else:
        iteration = exact = None
    truth = {
        "job_id": job_id, "config_id": config_id, "framework": framework, "seed": seed, "n_nodes": n,
        "fault": {"id": spec["id"], "category": spec["category"], "root_cause": spec["root_cause"], "source": spec["source"]},
        "faulty_nodes": [names[i] for i in faulty], "stage": spec["stage"], "iteration": iteration, "iteration_exact": exact,
        "indicators": indicators, "symptoms": symptoms, "baselines": baselines,
        "launcher": STYLES[style].launcher, "style": style,
    }
    with open(os.path.join(case_dir, "truth.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(dump_truth(truth))
    return truth


def dump_truth(truth):
    """Pretty top level, one indicator/symptom item per line (keeps big cases small)."""
    parts = []
    for k, v in truth.items():
        if k in ("indicators", "symptoms"):
            if not v:
                parts.append(f' "{k}": []')
            else:
                body = ",\n".join("  " + json.dumps(it, ensure_ascii=False) for it in v)
                parts.append(f' "{k}": [\n{body}\n ]')
        else:
            parts.append(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _run_dns(job, plan):
    job.cfg["_dns_node"] = plan["pre_node"]
    import faults
    spec = plan["spec"]

    def fn(Fc, t, step, _orig=faults.rdzv_dns):
        Fc.pick_node = lambda allow0=True: plan["pre_node"]
        return _orig(Fc, t, step)
    plan = dict(plan)
    plan["spec"] = dict(spec, fn=fn)
    return run_job(job, plan)


def _write_run(case_dir, sub, meta, files):
    d = os.path.join(case_dir, sub, "logs")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(case_dir, sub, "job.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    for name, (data, _items) in files.items():
        with open(os.path.join(d, f"{name}.log"), "wb") as f:
            f.write(data)


# ------------------------------------------------------------------ check / list
def split_lines(data: bytes):
    out = []
    for ln in data.decode("utf-8").split("\n"):
        out.append(ln[:-1] if ln.endswith("\r") else ln)
    return out


REQUIRED = ["job_id", "config_id", "framework", "seed", "n_nodes", "fault", "faulty_nodes", "stage", "iteration",
            "iteration_exact", "indicators", "symptoms", "baselines"]
STAGES = {"initialization", "model_loading", "data_loading", "training", "evaluation", "checkpointing", "finalization"}


def check(out_dir):
    bad = 0
    cases = sorted(d for d in os.listdir(out_dir) if d.startswith("case-"))
    for c in cases:
        cd = os.path.join(out_dir, c)
        with open(os.path.join(cd, "truth.json"), encoding="utf-8") as f:
            tr = json.load(f)
        errs = [f"missing key {k}" for k in REQUIRED if k not in tr]
        if tr.get("stage") not in STAGES:
            errs.append("bad stage")
        if tr["fault"]["category"] not in ("hardware", "user", "platform", "framework"):
            errs.append("bad category")
        cache = {}
        for kind in ("indicators", "symptoms"):
            for it in tr[kind]:
                p = os.path.join(cd, "failed", it["file"])
                if p not in cache:
                    with open(p, "rb") as f:
                        cache[p] = split_lines(f.read())
                lines = cache[p]
                if not (1 <= it["line"] <= len(lines)) or lines[it["line"] - 1] != it["text"]:
                    errs.append(f"{kind} {it['file']}:{it['line']} text mismatch")
        for fn in tr["faulty_nodes"]:
            if not os.path.exists(os.path.join(cd, "failed", "logs", fn + ".log")):
                errs.append(f"faulty node {fn} has no log")
        if tr["stage"] == "training" and tr["iteration"] is None:
            errs.append("training without iteration")
        if not tr["indicators"] and tr["fault"]["id"] not in ("node_power_loss", "gpu_hang_silent", "straggler_node", "eval_hang_storage"):
            errs.append("no indicators")
        for b in tr["baselines"]:
            with open(os.path.join(cd, b, "job.json")) as f:
                bj = json.load(f)
            if bj["config_id"] != tr["config_id"] or bj["status"] != "succeeded":
                errs.append(f"{b} job.json mismatch")
        size = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(cd) for x in fs)
        if size > 6 * 1024 * 1024:
            errs.append(f"case too large: {size}")
        if errs:
            bad += 1
            print(f"{c}: " + "; ".join(errs[:5]) + (f" (+{len(errs)-5})" if len(errs) > 5 else ""))
    print(f"checked {len(cases)} cases, {bad} with problems")
    return bad == 0


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if ".." in part:
            a, b = part.split("..")
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out")
    ap.add_argument("--seeds", default="0..39")
    ap.add_argument("--check")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--allow-reserved", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for _i, s in enumerate(CATALOGUE):
            print(f"{s['id']:<30} {s['category']:<9} {s['stage']:<15} {','.join(s['styles'])}")
            print(f"    {s['root_cause']}")
            print(f"    sources: {' '.join(s['source'])}")
        print(f"{len(CATALOGUE)} fault kinds, {len(STYLES)} styles")
        return 0
    if a.check:
        return 0 if check(a.check) else 1
    if not a.out:
        ap.error("--out, --check or --list required")
    seeds = parse_seeds(a.seeds)
    if any(s >= RESERVED for s in seeds) and not a.allow_reserved:
        print(f"seeds >= {RESERVED} are reserved (held out); pass --allow-reserved", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    for s in seeds:
        generate_case(s, a.out)
    print(f"generated {len(seeds)} cases in {time.time() - t0:.1f}s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
