#!/usr/bin/env python3
"""foreign4: clean-room generator of synthetic FAILED multi-node LLM training logs.

Usage:
  python3 gen.py --out DIR --seeds 0..39
  python3 gen.py --check DIR
  python3 gen.py --list
Stdlib only; deterministic per seed.
"""
import argparse
import json
import math
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults as FA  # noqa: E402
from styles import STYLES  # noqa: E402

STAGES = ("initialization", "data_loading", "model_loading", "training", "checkpointing", "evaluation", "finalization")
RESERVED = 9000
T_BASE = 1725148800  # 2024-09-01T00:00:00Z


def order():
    ids = [f["id"] for f in FA.CATALOGUE]
    rr = random.Random("foreign4-order")
    rr.shuffle(ids)
    return ids


class Node:
    def __init__(self, name, idx, ip, skew, pid0, cid):
        self.name, self.idx, self.ip, self.skew, self.pid0, self.cid = name, idx, ip, skew, pid0, cid
        self.lines = []
        self.marks = {}
        self.cut_at = None  # (t, fraction) power loss: drop everything after t, cut last line


def host_names(rng, scheme, n, salt):
    off = rng.randrange(0, 400)
    if scheme == "gpu":
        return ["gpu-%s-%03d" % (salt, off + i) for i in range(n)]
    if scheme == "nid":
        return ["nid%06d" % (1000 + off * 4 + i) for i in range(n)]
    if scheme == "ip":
        a = rng.randrange(0, 200)
        return ["ip-10-%d-%d-%d" % (a, (off + i) // 250, (off + i) % 250 + 2) for i in range(n)]
    if scheme == "hpe":
        return ["x%dc%ds%db%dn0" % (1000 + off // 64, (off + i) // 8 % 8, (off + i) % 8, i % 2) for i in range(n)]
    if scheme == "k8s":
        return ["%s-worker-%d" % (salt, i) for i in range(n)]
    return ["cn%04d" % (off + i) for i in range(n)]


class Run:
    def __init__(self, P, rng, hosts, baseline):
        self.P = P
        self.rng = rng
        self.baseline = baseline
        self.seq = 0
        self.cur_t = 0.0
        self.culprit_l = None
        self.truth = {}
        self.final_loss = P["loss_end"]
        skews = P["skews"]
        self.nodes = []
        for i, h in enumerate(hosts):
            ip = "10.%d.%d.%d" % (P["net"], (i + 8) // 250, (i + 8) % 250 + 2)
            sk = skews[i % len(skews)] if P["skew_on"] else 0.0
            if i == 0:
                sk = 0.0
            self.nodes.append(Node(h, i, ip, sk, 20000 + rng.randrange(0, 40000), "%08x" % rng.randrange(16 ** 8)))
        self.S = STYLES[P["style"]](self)
        self.cur_step = P["start"]

    def emit(self, node, t, text, mark=None):
        self.seq += 1
        node.lines.append((t, self.seq, text, mark))

    def uuid(self, s):
        rr = random.Random("uuid-%s-%s" % (self.P["job_seed"], s))
        h = "%032x" % rr.getrandbits(128)
        return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])

    def loss(self, step):
        P = self.P
        x = step / max(1, P["total"])
        return P["loss_end"] + (P["loss0"] - P["loss_end"]) * math.exp(-6 * x) + 0.02 * math.sin(step * 0.37)

    # ---- phases ------------------------------------------------------
    def startup(self, t0):
        S = self.S
        ts = []
        for n in self.nodes:
            ts.append(S.preamble(n, t0 + n.idx * 0.013))
        t = max(ts)
        if self.P["start"] > 0:
            t = max(S.load_ckpt(n, t, self.P["start"]) for n in self.nodes)
        t = max(S.train_start(n, t, self.P["start"] + 1) for n in self.nodes)
        self.t_train = t
        return t

    def train_to(self, last, t, skip_last_events=False, slow=None):
        """Run steps cur_step+1 .. last; log at multiples of k; returns time after step `last`."""
        P, S = self.P, self.S
        k = P["k"]
        s = self.cur_step
        first = (s == P["start"])
        while s < last:
            nxt = min(last, (s // k + 1) * k)
            nsteps = nxt - s
            dt = P["dt"]
            if slow is not None and nxt > slow[0]:
                dt = P["dt"] * (1 + slow[1] * (nxt - slow[0]) / max(1, last - slow[0]))
            if first:
                t += P["dt"] * 3
            t += dt * nsteps * (1 + 0.02 * math.sin(nxt))
            s = nxt
            if s % k == 0:
                for n in S.loggers():
                    S.step_line(n, t, s, self.loss(s), dt, first)
                if P["gc_every"] and (s // k) % P["gc_every"] == 0:
                    for n in S.loggers():
                        S.benign_mid(n, t)
                ev = not (skip_last_events and s == last)
                if ev and s % P["eval_every"] == 0 and s != P["total"]:
                    t += 1
                    t2 = t + P["eval_s"]
                    for n in self.nodes:
                        S.eval_lines(n, t2, s, self.loss(s))
                    t = t2
                if ev and s % P["ckpt_every"] == 0 and s != P["total"]:
                    self.ckpt(t, s)
                    t += P["ckpt_s"] + 1
            first = False
        self.cur_step = s
        return t

    def ckpt(self, t, s):
        for n in self.nodes:
            self.S.ckpt_begin(n, t, s)
        for n in self.nodes:
            self.S.ckpt_end(n, t + self.P["ckpt_s"], s, self.P["ckpt_s"])

    # ---- render ------------------------------------------------------
    def render(self, outdir):
        os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
        items = {"indicators": [], "symptoms": []}
        for n in self.nodes:
            lines = sorted(n.lines, key=lambda x: (x[0], x[1]))
            if n.cut_at is not None:
                tc, frac = n.cut_at
                lines = [x for x in lines if x[0] <= tc]
            texts = []
            for i, (t, _, text, mark) in enumerate(lines):
                # split embedded newlines so line numbers stay exact
                parts = text.split("\n")
                for j, p in enumerate(parts):
                    texts.append(p)
                    if mark is not None and (j == 0 or mark[1].startswith("jax")):
                        items[mark[0]].append({"node": n.name, "file": "logs/%s.log" % n.name, "line": len(texts), "text": p, "kind": mark[1]})
            body = "\n".join(texts)
            if n.cut_at is not None and texts:
                last = texts[-1]
                cut = max(1, int(len(last) * n.cut_at[1]))
                body = "\n".join(texts[:-1] + [last[:cut]])
                # drop truth items pointing at the cut line (none expected)
                for key in items:
                    items[key] = [it for it in items[key] if not (it["node"] == n.name and it["line"] == len(texts))]
            else:
                body += "\n"
            with open(os.path.join(outdir, "logs", "%s.log" % n.name), "w") as f:
                f.write(body)
        return items


def parse_seeds(s):
    out = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        if ".." in part:
            a, b = part.split("..")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def make_params(seed, fault):
    rng = random.Random("foreign4-%d" % seed)
    style = rng.choice(fault["styles"])
    P = {"style": style, "job_seed": seed}
    r = random.Random("foreign4-%d-scale" % seed)
    n_nodes = r.choice([2, 2, 3, 4, 4, 4, 8, 8, 8, 16, 16, 32, 64])
    if r.random() < 0.05:
        n_nodes = 128
    if style == "horovod-mpirun":
        n_nodes = min(n_nodes, 16)
    P["n_nodes"] = n_nodes
    P["rpn"] = r.choice([8, 8, 8, 4, 2, 1]) if style != "maxtext-jax" else r.choice([8, 8, 4])
    if style == "mindspeed-npu":
        P["rpn"] = r.choice([8, 8, 16 // 2, 4])
    if style == "mindspeed-npu" and n_nodes >= 64:
        n_nodes = P["n_nodes"] = 64
        P["rpn"] = min(P["rpn"], 4)
    P["world"] = n_nodes * P["rpn"]
    big = n_nodes >= 64
    P["k"] = 1 if style == "maxtext-jax" else r.choice([1, 5, 10, 10, 20, 25, 50, 100])
    if big and P["k"] < 10 and style != "maxtext-jax":
        P["k"] = 10
    P["eval_every"] = P["k"] * r.choice([5, 10, 20]) * (10 if style == "maxtext-jax" else 1)
    P["ckpt_every"] = P["eval_every"] * r.choice([1, 2]) if style != "titan-slurm" else P["k"] * r.choice([10, 20, 50])
    if style == "maxtext-jax":
        P["ckpt_every"] = r.choice([50, 100, 200])
    n_int = r.randint(12, 40) if not big else r.randint(6, 12)
    if n_nodes >= 128:
        n_int = r.randint(4, 8)
    P["resumed"] = r.random() < 0.35
    P["start"] = (r.randint(2, 40) * 250) // P["ckpt_every"] * P["ckpt_every"] if P["resumed"] else 0
    if P["resumed"] and P["start"] == 0:
        P["start"] = P["ckpt_every"] * r.randint(5, 30)
    P["run_len"] = n_int * P["k"]
    P["total"] = P["start"] + P["run_len"] + r.randint(0, 3) * P["k"]
    P["total"] = (P["total"] // P["k"]) * P["k"]
    if P["total"] <= P["start"] + 2 * P["k"]:
        P["total"] = P["start"] + 3 * P["k"]
    P["dt"] = round(r.uniform(0.6, 9.0), 3)
    P["eval_s"] = round(r.uniform(5, 40), 2)
    P["ckpt_s"] = round(r.uniform(4, 60), 2)
    P["ckpt_load_s"] = round(r.uniform(5, 90), 2)
    P["skew_on"] = r.random() < 0.7
    P["skews"] = [round(r.uniform(-30, 30), 3) for _ in range(16)]
    P["net"] = r.randrange(0, 250)
    P["scheme"] = r.choice(["gpu", "nid", "ip", "hpe", "cn"] if style != "determined" else ["k8s", "gpu", "ip"])
    P["salt"] = r.choice(["h100", "a100", "dgx", "trn", "llm", "pt"])
    P["log_all_ranks"] = P["rpn"] <= 4 or r.random() < 0.5
    P["noise_refused"] = r.random() < 0.7
    P["noise_warn"] = r.random() < 0.8
    P["gc_every"] = r.choice([0, 5, 10]) if style == "titan-slurm" else 0
    mdl = r.choice([("llama3_8b", 8030261248, 4096, 32, 32), ("llama3_70b", 70553706496, 8192, 80, 64),
                    ("llama2_7b", 6738415616, 4096, 32, 32), ("qwen2_14b", 14167290880, 5120, 48, 40)])
    P["model_name"], P["params"], P["dim"], P["layers"], P["heads"] = mdl
    P["model_name"] = {"titan-slurm": "Llama 3 8B" if "8b" in mdl[0] else mdl[0]}.get(style, mdl[0])
    P["tokenizer"] = "./assets/tokenizer/original/tokenizer.model"
    P["dataset"] = "c4"
    P["data_path"] = r.choice(["/lustre/fsw/data/c4_en", "/mnt/datasets/c4", "/data/pretrain/c4-en"])
    P["ckpt_dir"] = r.choice(["./outputs/checkpoint", "/lustre/ckpt/%s" % mdl[0], "/mnt/shared/ckpt/run-%04d" % (seed % 10000)])
    P["hf_path"] = "/mnt/models/%s" % mdl[0]
    P["det_ckpt"] = "%08x-%04x" % (r.getrandbits(32), r.getrandbits(16))
    P["lbs"] = r.choice([1, 2, 4])
    P["seq"] = r.choice([2048, 4096, 8192])
    P["gbs"] = P["lbs"] * P["world"]
    P["warmup"] = r.choice([200, 500, 2000])
    P["lr"] = r.choice([3e-4, 1.5e-4, 1e-4])
    P["flop_tok"] = 6 * P["params"]
    peak = 3.5e14 if style == "mindspeed-npu" else 9.89e14
    mfu = r.uniform(0.28, 0.5)
    while True:
        P["dt"] = round(P["lbs"] * P["seq"] * P["flop_tok"] / (peak * mfu), 3)
        if P["dt"] <= 30 or (P["seq"] <= 2048 and P["lbs"] == 1):
            break
        if P["lbs"] > 1:
            P["lbs"] //= 2
        else:
            P["seq"] //= 2
    P["gbs"] = P["lbs"] * P["world"]
    P["mem0"] = round(r.uniform(2, 12), 2)
    P["mem_peak"] = round(r.uniform(40, 72), 2)
    P["loss0"] = round(r.uniform(7, 11), 3)
    P["loss_end"] = round(r.uniform(1.8, 2.6), 3)
    P["numel"] = r.choice([1, 131072000, 65536000, 262144])
    P["tp"] = min(P["rpn"], r.choice([1, 2, 4, 8]))
    P["pp"] = 1
    P["slurm_job"] = r.randint(100000, 9999999)
    P["mpi_jobid"] = r.randint(1000, 65000)
    P["coord_port"] = r.choice([1234, 6379, 12345])
    P["jax"] = r.choice(["0.4.35", "0.4.38", "0.5.0"])
    P["trial"] = r.randint(10, 9000)
    P["exp"] = P["trial"] - r.randint(1, 9)
    P["alloc"] = "%08x-%04x-%04x" % (r.getrandbits(32), r.getrandbits(16), r.getrandbits(16))
    P["n_shards"] = r.choice([512, 1024, 2048])
    P["t0"] = T_BASE + r.randrange(0, 300 * 86400)
    return P


def gen_case(seed, outroot):
    ids = order()
    fid = ids[seed % len(ids)]
    fault = FA.BY_ID[fid]
    P = make_params(seed, fault)
    rng = random.Random("foreign4-%d-run" % seed)
    cdir = os.path.join(outroot, "case-%d" % seed)
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    cfg = "cfg-%s-%05d" % (P["style"].split("-")[0], seed)
    hosts = host_names(random.Random("foreign4-%d-hosts" % seed), P["scheme"], P["n_nodes"], P["salt"])
    run = Run(P, rng, hosts, False)
    if fault.get("needs_resume") and P["start"] == 0:
        P["start"] = P["ckpt_every"] * 4
        P["total"] += P["start"]
        run.cur_step = P["start"]
    t = run.startup(P["t0"])
    FA.inject(fault, run, t)
    items = run.render(os.path.join(cdir, "failed"))
    job_id = "job-%d-%05d" % (P["slurm_job"] % 100000, seed)
    with open(os.path.join(cdir, "failed", "job.json"), "w") as f:
        json.dump({"job_id": job_id, "config_id": cfg, "status": "failed", "framework": run.S.framework}, f, indent=1)
    nb = 1 + (seed % 2)
    bl = []
    for k in range(nb):
        br = random.Random("foreign4-%d-base%d" % (seed, k))
        n_b = max(2, P["n_nodes"] if k == 0 else P["n_nodes"] // 2) if P["n_nodes"] > 1 else 1
        n_b = min(n_b, P["n_nodes"])
        PB = dict(P)
        PB["n_nodes"] = n_b
        PB["world"] = n_b * P["rpn"]
        PB["gbs"] = PB["lbs"] * PB["world"]
        PB["t0"] = P["t0"] - br.randrange(2, 40) * 86400
        PB["slurm_job"] = P["slurm_job"] - br.randrange(100, 5000)
        PB["trial"] = P["trial"] - br.randrange(10, 90)
        PB["start"] = 0 if br.random() < 0.6 else P["start"]
        PB["total"] = PB["start"] + P["run_len"]
        PB["total"] -= PB["total"] % P["k"]
        PB["job_seed"] = "%d-b%d" % (seed, k)
        bh = host_names(random.Random("foreign4-%d-bhosts%d" % (seed, k)), P["scheme"], n_b, P["salt"])
        brun = Run(PB, br, bh, True)
        bt = brun.startup(PB["t0"])
        FA.healthy(brun, bt)
        bname = "baseline-%d" % k
        brun.render(os.path.join(cdir, bname))
        with open(os.path.join(cdir, bname, "job.json"), "w") as f:
            json.dump({"job_id": "job-%d-%05d-b%d" % (PB["slurm_job"] % 100000, seed, k), "config_id": cfg, "status": "succeeded", "framework": brun.S.framework}, f, indent=1)
        bl.append(bname)
    tr = run.truth
    truth = {"job_id": job_id, "config_id": cfg, "framework": run.S.framework, "seed": seed, "n_nodes": P["n_nodes"],
             "fault": {"id": fault["id"], "category": fault["cat"], "root_cause": fault["root"], "source": fault["src"]},
             "faulty_nodes": [n.name for n in tr["culprits"]],
             "stage": tr["stage"], "iteration": tr["iteration"], "iteration_exact": tr["iteration_exact"],
             "indicators": items["indicators"], "symptoms": items["symptoms"],
             "baselines": bl, "launcher": run.S.launcher, "style": run.S.name}
    with open(os.path.join(cdir, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    return truth


KEYS = ["job_id", "config_id", "framework", "seed", "n_nodes", "fault", "faulty_nodes", "stage", "iteration",
        "iteration_exact", "indicators", "symptoms", "baselines", "launcher", "style"]


def check(root):
    bad = 0
    ncase = 0
    for d in sorted(os.listdir(root)):
        if not d.startswith("case-"):
            continue
        ncase += 1
        cdir = os.path.join(root, d)
        errs = []
        try:
            tr = json.load(open(os.path.join(cdir, "truth.json")))
        except Exception as e:  # noqa
            print("%s: truth.json unreadable: %s" % (d, e))
            bad += 1
            continue
        for k in KEYS:
            if k not in tr:
                errs.append("missing key %s" % k)
        for k in ("id", "category", "root_cause", "source"):
            if k not in tr.get("fault", {}):
                errs.append("missing fault.%s" % k)
        if tr.get("fault", {}).get("category") not in ("hardware", "user", "platform", "framework"):
            errs.append("bad category")
        if tr.get("stage") not in STAGES:
            errs.append("bad stage %r" % tr.get("stage"))
        jj = json.load(open(os.path.join(cdir, "failed", "job.json")))
        if jj.get("status") != "failed" or set(jj) != {"job_id", "config_id", "status", "framework"}:
            errs.append("bad failed/job.json")
        logs = os.listdir(os.path.join(cdir, "failed", "logs"))
        if len(logs) != tr.get("n_nodes"):
            errs.append("n_nodes %s != %d log files" % (tr.get("n_nodes"), len(logs)))
        for fn in tr.get("faulty_nodes", []):
            if fn + ".log" not in logs:
                errs.append("faulty node %s has no log" % fn)
        if not tr.get("faulty_nodes"):
            errs.append("no faulty nodes")
        cache = {}
        for key in ("indicators", "symptoms"):
            for it in tr.get(key, []):
                for f in ("node", "file", "line", "text", "kind"):
                    if f not in it:
                        errs.append("%s item missing %s" % (key, f))
                p = os.path.join(cdir, "failed", it["file"])
                if p not in cache:
                    cache[p] = open(p).read().split("\n") if os.path.exists(p) else None
                L = cache[p]
                if L is None:
                    errs.append("%s: no file %s" % (key, it["file"]))
                elif not (1 <= it["line"] <= len(L)) or L[it["line"] - 1] != it["text"]:
                    errs.append("%s: line %d of %s does not hold %r" % (key, it["line"], it["file"], it["text"][:60]))
                if it["file"] != "logs/%s.log" % it["node"]:
                    errs.append("file/node mismatch")
        for b in tr.get("baselines", []):
            bj = json.load(open(os.path.join(cdir, b, "job.json")))
            if bj.get("status") != "succeeded" or bj.get("config_id") != tr["config_id"]:
                errs.append("bad %s/job.json" % b)
            if not os.listdir(os.path.join(cdir, b, "logs")):
                errs.append("%s has no logs" % b)
        if not tr.get("baselines"):
            errs.append("no baselines")
        if errs:
            bad += 1
            print("%s: %d problem(s): %s" % (d, len(errs), "; ".join(errs[:5])))
    print("checked %d case(s): %d bad" % (ncase, bad))
    return bad == 0 and ncase > 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--seeds", default="0..39")
    ap.add_argument("--check")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--allow-reserved", action="store_true")
    a = ap.parse_args()
    if a.list:
        ids = order()
        print("%d fault kinds (seed s -> entry s mod %d of this order)" % (len(ids), len(ids)))
        for i, fid in enumerate(ids):
            f = FA.BY_ID[fid]
            print("%2d  %-28s %-9s %-15s %s" % (i, fid, f["cat"], f["stage"], ",".join(f["styles"])))
        return 0
    if a.check:
        return 0 if check(a.check) else 1
    if not a.out:
        ap.error("--out, --check or --list required")
    seeds = parse_seeds(a.seeds)
    if any(s >= RESERVED for s in seeds) and not a.allow_reserved:
        print("seeds >= %d are reserved (held out); pass --allow-reserved" % RESERVED, file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    for s in seeds:
        gen_case(s, a.out)
    print("wrote %d case(s) to %s" % (len(seeds), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
