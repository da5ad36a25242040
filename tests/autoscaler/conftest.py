"""Autoscaler fixtures: the fake Kubernetes API server and a real client pointed at it."""

from __future__ import annotations

import pytest
from kubernetes import client

from autoscaler.backends.kubernetes import KubernetesBackend
from tests.autoscaler.fake_kube import FakeKube

WORKER_LABELS = {"app.kubernetes.io/name": "stapel", "app.kubernetes.io/component": "worker-cpu"}


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: starts real Celery worker processes (slow)")


@pytest.fixture
def kube():
    """A running fake API server with a 3-replica stapel-worker-cpu Deployment."""
    fake = FakeKube()
    fake.add_deployment("stapel-worker-cpu", 3, WORKER_LABELS)
    fake.start()
    yield fake
    fake.stop()


def api_client_for(url: str) -> client.ApiClient:
    """Return a real kubernetes ApiClient talking to url, retrying nothing."""
    configuration = client.Configuration(host=url)
    configuration.retries = 0
    return client.ApiClient(configuration)


@pytest.fixture
def backend(kube):
    """The Kubernetes backend for the cpu pool, talking to the fake server."""
    api = api_client_for(kube.url)
    yield KubernetesBackend(api, kube.namespace, "stapel-worker-cpu", "cpu", timeout_s=5)
    api.close()
