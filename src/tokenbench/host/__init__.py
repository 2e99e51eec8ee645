"""Host inspection: tuning checks (doctor), the environment recorded with a run, container image tags."""
