"""Monitoring: accelerator (npu-smi, nvidia-smi/NVML), server /metrics and host samplers, their
offline parsers, a background runner on the requests' clock, and the per-cell summary; the server's
OpenTelemetry spans (the OTLP receiver, a process of its own, and their reading).

    monitor = Monitor(default_samplers(base_url, engine, pid, names), interval_s=1.0, on_warning=log)
                                       # names: deploy.engines.metric_names()
    with monitor:                      # or monitor.start() ... monitor.stop()
        run_the_cell()
    samples = monitor.stop()           # list[Sample]; also monitor.snapshot() while running
    summary = summarize(samples, start_ns, end_ns, output_tokens)
    warning = queue_cross_check(star, summary)
"""

# The modules are imported by name (tokenbench.monitor.runner.Monitor, ...): importing one of them, the OTLP
# receiver's process included, loads nothing else of the package.
