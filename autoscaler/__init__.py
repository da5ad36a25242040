"""The autoscaler: one control loop per worker pool, `python -m autoscaler`."""
