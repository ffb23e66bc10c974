"""A small Kubernetes controller for l4: when a watched Job finishes, send
l4.training.job.failed|succeeded to the Prefect server that `l4 serve` is connected to.

Standard library only (runs on the plain python:3.11-slim image, see controller.yaml).  A Job
opts in with the label ``l4.io/watch: "true"`` and says where its logs are with the
annotation ``l4.io/job-dir`` (a path on storage the `l4 serve` machine mounts at the same
place); ``l4.io/config-id`` and ``l4.io/job-id`` are optional.  Once the event is sent the
controller marks the Job with the annotation ``l4.io/event-sent``, so a restart never sends
it twice.

Environment: PREFECT_API_URL (required), PREFECT_API_KEY (optional bearer token),
L4_NAMESPACE (default: the pod's own namespace; "*" for all namespaces, which needs a
ClusterRole), L4_POLL_SECONDS (default 10).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
WATCH_LABEL = "l4.io/watch=true"
DIR_ANNOTATION = "l4.io/job-dir"
SENT_ANNOTATION = "l4.io/event-sent"


def outcome(job: dict) -> str | None:
    """'failed' / 'succeeded' for a finished Job that still needs its event, else None."""
    meta = job.get("metadata", {})
    ann = meta.get("annotations") or {}
    if ann.get(SENT_ANNOTATION) or not ann.get(DIR_ANNOTATION):
        return None
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return "succeeded"
        if cond.get("type") == "Failed":
            return "failed"
    return None


def job_event(job: dict, kind: str) -> dict:
    """The event l4 expects (same shape as flows/events.py and deployments/l4-emit.sh)."""
    meta = job["metadata"]
    ann = meta.get("annotations") or {}
    job_id = ann.get("l4.io/job-id") or meta["name"]
    config = ann.get("l4.io/config-id") or None
    job_dir = ann[DIR_ANNOTATION]
    resource = {"prefect.resource.id": f"l4.job.{job_id}", "prefect.resource.name": job_id,
                "l4.job.dir": job_dir, "k8s.namespace": meta.get("namespace", ""),
                "k8s.job": meta["name"]}
    if config:
        resource["l4.config.id"] = config
    return {
        "id": str(uuid.uuid4()),
        "occurred": datetime.now(UTC).isoformat(),
        "event": f"l4.training.job.{kind}",
        "resource": resource,
        "payload": {"job_dir": job_dir, "job_id": job_id, "config_id": config, "baselines": []},
    }


class Kube:
    """Just enough of the Kubernetes API: list Jobs, annotate one (in-cluster credentials)."""

    def __init__(self) -> None:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{host}:{port}"
        with open(f"{SA}/token", encoding="utf-8") as fh:
            self.token = fh.read().strip()
        self.ctx = ssl.create_default_context(cafile=f"{SA}/ca.crt")

    def _call(self, method: str, path: str, body: dict | None = None,
              ctype: str = "application/json") -> dict:
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body else None)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", ctype)
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")

    def jobs(self, namespace: str) -> list[dict]:
        scope = "" if namespace == "*" else f"/namespaces/{namespace}"
        return self._call("GET", f"/apis/batch/v1{scope}/jobs?labelSelector={WATCH_LABEL}")["items"]

    def mark_sent(self, job: dict, kind: str) -> None:
        meta = job["metadata"]
        self._call("PATCH", f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}",
                   {"metadata": {"annotations": {SENT_ANNOTATION: kind}}},
                   ctype="application/merge-patch+json")


def send(event: dict) -> None:
    url = os.environ["PREFECT_API_URL"].rstrip("/") + "/events"
    req = urllib.request.Request(url, method="POST", data=json.dumps([event]).encode())
    req.add_header("Content-Type", "application/json")
    if os.environ.get("PREFECT_API_KEY"):
        req.add_header("Authorization", f"Bearer {os.environ['PREFECT_API_KEY']}")
    with urllib.request.urlopen(req, timeout=15):
        pass


def once(kube: Kube, namespace: str) -> int:
    sent = 0
    for job in kube.jobs(namespace):
        kind = outcome(job)
        if kind is None:
            continue
        name = job["metadata"]["name"]
        try:
            send(job_event(job, kind))
            kube.mark_sent(job, kind)
        except (urllib.error.URLError, OSError) as exc:
            print(f"l4-controller: job {name}: not sent yet ({exc}); will retry", flush=True)
            continue
        print(f"l4-controller: job {name}: sent l4.training.job.{kind}", flush=True)
        sent += 1
    return sent


def main() -> int:
    if not os.environ.get("PREFECT_API_URL"):
        print("l4-controller: PREFECT_API_URL is not set", file=sys.stderr)
        return 2
    namespace = os.environ.get("L4_NAMESPACE")
    if not namespace:
        with open(f"{SA}/namespace", encoding="utf-8") as fh:
            namespace = fh.read().strip()
    poll = float(os.environ.get("L4_POLL_SECONDS", "10"))
    kube = Kube()
    print(f"l4-controller: watching Jobs labelled {WATCH_LABEL} in {namespace}", flush=True)
    while True:
        try:
            once(kube, namespace)
        except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
            print(f"l4-controller: listing Jobs failed ({exc}); retrying", flush=True)
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main())
