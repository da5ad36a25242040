"""Settings read from the environment."""

from __future__ import annotations

import pytest

from autoscaler.config import AutoscalerSettings, PoolLimits


def test_defaults():
    settings = AutoscalerSettings.from_env({})
    assert settings.backend == "dry-run"
    assert settings.pool("cpu").limits == PoolLimits(min=1, max=4, standby=1)
    assert settings.pool("gpu").limits == PoolLimits(min=0, max=2, standby=0, unserved_grace_s=300)
    assert settings.pool("cpu").limits.unserved_grace_s == 60
    assert settings.pool("gpu").deployment == "stapel-worker-gpu"


def test_per_pool_values():
    settings = AutoscalerSettings.from_env(
        {
            "STAPEL_AUTOSCALER_BACKEND": "local",
            "STAPEL_CPU_MIN": "2",
            "STAPEL_CPU_MAX": "6",
            "STAPEL_CPU_STANDBY": "0",
            "STAPEL_CPU_SCALE_DOWN_DELAY_S": "2.5",
            "STAPEL_CPU_POLL_S": "0.5",
            "STAPEL_GPU_MAX": "0",
            "STAPEL_GPU_QUEUED_PER_WORKER": "3",
            "STAPEL_CPU_UNSERVED_GRACE_S": "20",
            "STAPEL_K8S_NAMESPACE": "mt",
        }
    )
    cpu, gpu = settings.pool("cpu"), settings.pool("gpu")
    assert (cpu.limits.min, cpu.limits.max, cpu.limits.standby) == (2, 6, 0)
    assert (cpu.limits.scale_down_delay_s, cpu.poll_s) == (2.5, 0.5)
    assert not gpu.enabled and gpu.limits.queued_per_worker == 3
    assert cpu.limits.unserved_grace_s == 20
    assert settings.namespace == "mt"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"STAPEL_AUTOSCALER_BACKEND": "docker"}, "STAPEL_AUTOSCALER_BACKEND"),
        ({"STAPEL_CPU_MAX": "many"}, "STAPEL_CPU_MAX"),
        ({"STAPEL_CPU_MIN": "5", "STAPEL_CPU_MAX": "2"}, "min <= max"),
        ({"STAPEL_GPU_STANDBY": "-1"}, "must not be negative"),
    ],
)
def test_bad_values(env, message):
    with pytest.raises(ValueError, match=message):
        AutoscalerSettings.from_env(env)
