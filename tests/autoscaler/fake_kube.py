"""A small fake Kubernetes API server: the four endpoints the autoscaler calls.

A real HTTP server in a thread; the backend reaches it through the real `kubernetes`
client. It keeps Deployments (replicas, selector) and pods, records every request, can
answer the next requests with an error status, and on a scale-down deletes pods the way
a ReplicaSet does: lowest `controller.kubernetes.io/pod-deletion-cost` first.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from autoscaler.backends.kubernetes import DELETION_COST

SCALE = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)/scale$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    query: dict
    content_type: str | None
    body: object


@dataclass
class FakeKube:
    """The cluster state and the request log, shared with the handler thread."""

    namespace: str = "stapel"
    deployments: dict[str, dict] = field(default_factory=dict)
    pods: dict[str, dict] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    url: str = ""

    def add_deployment(self, name: str, replicas: int, labels: dict[str, str]) -> None:
        """Add a Deployment and its pods (named <name>-<i>), all Running."""
        self.deployments[name] = {"replicas": 0, "labels": labels}
        self._resize(name, replicas)

    def _resize(self, name: str, replicas: int) -> None:
        deployment = self.deployments[name]
        mine = [p for p, pod in self.pods.items() if pod["owner"] == name]
        if replicas < len(mine):
            order = sorted(
                mine, key=lambda p: (int(self.pods[p]["annotations"].get(DELETION_COST, "0")), p)
            )
            for pod in order[: len(mine) - replicas]:
                del self.pods[pod]
        serial = deployment.get("serial", 0)
        for _ in range(replicas - len(mine)):
            self.pods[f"{name}-{serial}"] = {
                "owner": name,
                "labels": dict(deployment["labels"]),
                "annotations": {},
                "phase": "Running",
            }
            serial += 1
        deployment.update(replicas=replicas, serial=serial)

    def selector(self, name: str) -> str:
        return ",".join(f"{k}={v}" for k, v in self.deployments[name]["labels"].items())

    def patches(self, kind: str = "") -> list[Seen]:
        """Return the PATCH requests whose path contains kind."""
        return [r for r in self.requests if r.method == "PATCH" and kind in r.path]

    def start(self) -> str:
        """Serve on a free port in a daemon thread; return the base URL."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def handle(self, seen: Seen) -> tuple[int, dict]:
        """Answer one request: (status, JSON body)."""
        with self.lock:
            self.requests.append(seen)
            if self.fail_next:
                status = self.fail_next.pop(0)
                return status, _status(status, "injected failure")
            if match := SCALE.match(seen.path):
                return self._scale(seen, match.group(2))
            if PODS.match(seen.path) and seen.method == "GET":
                return self._list_pods(seen.query.get("labelSelector", [""])[0])
            if (match := POD.match(seen.path)) and seen.method == "PATCH":
                return self._patch_pod(match.group(2), seen.body)
            return 404, _status(404, "not found")

    def _scale(self, seen: Seen, name: str) -> tuple[int, dict]:
        if name not in self.deployments:
            return 404, _status(404, f"deployments.apps {name!r} not found")
        if seen.method == "PATCH":
            self._resize(name, int(seen.body["spec"]["replicas"]))
        replicas = self.deployments[name]["replicas"]
        return 200, {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "selector": self.selector(name)},
        }

    def _list_pods(self, selector: str) -> tuple[int, dict]:
        wanted = dict(part.split("=", 1) for part in selector.split(",") if part)
        items = [
            _pod(name, pod, self.namespace)
            for name, pod in sorted(self.pods.items())
            if all(pod["labels"].get(k) == v for k, v in wanted.items())
        ]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def _patch_pod(self, name: str, body: dict) -> tuple[int, dict]:
        if name not in self.pods:
            return 404, _status(404, f"pods {name!r} not found")
        annotations = body.get("metadata", {}).get("annotations", {})
        self.pods[name]["annotations"].update(annotations)
        return 200, _pod(name, self.pods[name], self.namespace)


def _pod(name: str, pod: dict, namespace: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": pod["labels"],
            "annotations": pod["annotations"],
        },
        "status": {"phase": pod["phase"]},
    }


def _status(code: int, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code,
    }


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            seen = Seen(
                self.command,
                parts.path,
                parse_qs(parts.query),
                self.headers.get("Content-Type"),
                json.loads(raw) if raw else None,
            )
            status, body = kube.handle(seen)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = _serve

        def log_message(self, *_args) -> None:
            pass

    return Handler
