"""Report text of intervals, verdicts and bottleneck labels, both languages; merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "h.intervals": "95 % intervals",
    "h.intervals_pair": "{config}: input {input} / output {output}",
    "h.cmp_verdicts": "Verdicts with 95 % intervals",
    "note.intervals": ("Each figure with its 95 % interval [low, high], in closed form from the requests of each "
                       "repeat (throughputs: from time bins of the measured window): t interval for a mean, "
                       "distribution-free order-statistic interval (Woodruff) for a percentile, ITL grouped by "
                       "request; over repeats when there are several (docs/metrics.md, \"Intervals and "
                       "verdicts\")."),
    "note.unreliable": ("{mark} unreliable: a p99 from fewer than {n} requests, or a percentile whose interval "
                        "reaches the largest or smallest value measured (that end is not a 95 % bound)."),
    "note.headline_intervals": ("Each figure of a cell measured ok carries its 95 % interval [low, high] (the "
                                "section \"95 % intervals\" gives the method and every percentile)."),
    "note.verdicts": ("A verdict names the faster side only when the 95 % interval of the difference, widened by "
                      "how much each run drifted between its first and second half, excludes 0 and the difference "
                      "is at least {floor}; \"faster\" means higher throughput or lower latency."),
    "col.metric_stat": "metric",
    "col.verdict": "verdict {other} vs {base}",
    "col.bottleneck": "bottleneck",
    "col.goodput": "goodput (req/s)",
    "col.slo_attain": "SLO attainment",
    "col.p50": "p50",
    "col.p90": "p90",
    "col.p99": "p99",
    "col.mean": "mean",
    "vm.request_throughput": "requests/s",
    "vm.output_throughput": "output tok/s",
    "vm.request_goodput": "goodput (req/s)",
    "vm.ttft": "TTFT (ms)",
    "vm.tpot": "TPOT (ms)",
    "vm.itl": "ITL (ms)",
    "vm.e2el": "E2EL (ms)",
    "verdict.faster": "{who} faster by {x} [{lo}, {hi}]",
    "verdict.none": "no difference detectable at this sample size (smallest detectable: {y})",
    "verdict.na": "no verdict: no samples, fewer than two on a side, or a figure of 0",
    "verdict.not_ok": "refused: a cell is not ok",
    "verdict.refused_cache": "refused: prefix cache {a} vs {b}",
    "verdict.refused_other": "refused: a busier host could explain it (other work {a} vs {b} of a core)",
    "verdict.refused_pressure": "refused: a busier host could explain it (CPU pressure {a} vs {b})",
    "verdict.refused_wait": ("refused: a busier host could explain it (the server's threads waited for a CPU {a} "
                             "vs {b} of a core)"),
    "note.refused": ("refused: no verdict where the two sides' prefix-cache states differ, or where a busier host "
                     "could explain the worse side: with less than one core idle (or its CPU pressure over {psi} "
                     "points higher), its other work took more than {points} of a core more, or its server's threads "
                     "waited for a CPU more than {wait} of a core more; where the server's processes are not seen, "
                     "its CPU pressure was over {psi} points higher (docs/metrics.md, \"Run fingerprints and refused "
                     "verdicts\")."),
    "verdict.moved": "refused: the client's delays may have moved this figure (--allow-client-lag judges it)",
    "bn.client": "client-bound",
    "bn.kv": "KV-bound",
    "bn.queueing": "queueing",
    "bn.compute": "compute-bound",
    "bn.bandwidth": "bandwidth-bound",
    "bn.unknown": "unknown",
    "note.band": "Lines: p50; shaded band: p90 to p99 of the same cells.",
    "ev.client": "{reason}",
    "ev.client_cpu": "client CPU {cpu}% of a core per process",
    "ev.kv_demand": "* KV demand {demand} > capacity {capacity}",
    "ev.kv_usage": "KV usage peak {pct}% (server /metrics)",
    "ev.preempt": "{n} preemptions (server /metrics)",
    "ev.waiting": "waiting peak {n} (server /metrics)",
    "ev.ttft_growth": "mean TTFT x{times} vs {load}",
    "ev.roof_compute": "{pct}% of the compute roofline ({out} of {bound} tok/s)",
    "ev.roof_bandwidth": "{pct}% of the bandwidth roofline ({out} of {bound} tok/s)",
    "ev.roof_far": "{pct}% of the roofline; no queueing or KV evidence",
    "ev.not_ok": "cell not ok ({mark})",
    "ev.no_roofline": "no queueing or KV evidence; no roofline (model size or hardware unknown)",
    "ev.no_monitor": "no monitor samples and no bound reached",
    "ev.nothing": "no evidence: no monitor samples, no roofline",
    "axis.ttft_p50_ms": "TTFT p50 (ms); band p90-p99",
    "axis.ttft_median_ms": "TTFT p50 (ms)",
    "axis.tpot_median_ms": "TPOT p50 (ms)",
    "axis.tpot_p50_ms": "TPOT p50 (ms); band p90-p99",
    "plot.ttft_p50": "TTFT (p50) vs load",
    "plot.tpot_p50": "TPOT (p50) vs load",
}

ZH: dict[str, str] = {
    "h.intervals": "95% 置信区间",
    "h.intervals_pair": "{config}：输入 {input} / 输出 {output}",
    "h.cmp_verdicts": "带 95% 置信区间的结论",
    "note.intervals": ("每个数字后为其 95% 置信区间 [下限, 上限]，由每次重复的请求以闭式公式计算（吞吐量用测量窗口的时间分箱）："
                       "均值用 t 区间，百分位用不依赖分布的顺序统计量区间（Woodruff），ITL 按请求分组；有多次重复时"
                       "也计入重复之间的差异（见 docs/metrics.md “Intervals and verdicts”）。"),
    "note.unreliable": "{mark} 不可靠：少于 {n} 个请求得到的 p99，或区间触及所测最大/最小值的百分位（该端不是 95% 界限）。",
    "note.headline_intervals": "测量正常的单元格，每个数字都附有其 95% 置信区间 [下限, 上限]（方法与各百分位见“95% 置信区间”一节）。",
    "note.verdicts": ("只有当差异的 95% 置信区间（再按每次运行前后两半之间的漂移加宽）不含 0 且差异至少为 {floor} 时，"
                      "才判定哪一方更快；“更快”指吞吐更高或延迟更低。"),
    "col.metric_stat": "指标",
    "col.verdict": "结论 {other} 对比 {base}",
    "col.bottleneck": "瓶颈",
    "col.goodput": "有效吞吐（请求/秒）",
    "col.slo_attain": "SLO 达成率",
    "col.p50": "p50",
    "col.p90": "p90",
    "col.p99": "p99",
    "col.mean": "平均",
    "vm.request_throughput": "请求/秒",
    "vm.output_throughput": "输出 token/秒",
    "vm.request_goodput": "有效吞吐（请求/秒）",
    "vm.ttft": "首 token 延迟 TTFT（ms）",
    "vm.tpot": "每 token 时间 TPOT（ms）",
    "vm.itl": "token 间延迟 ITL（ms）",
    "vm.e2el": "端到端延迟 E2EL（ms）",
    "verdict.faster": "{who} 更快 {x} [{lo}, {hi}]",
    "verdict.none": "在此样本量下未检测到差异（可检测的最小差异：{y}）",
    "verdict.na": "无判定：没有样本、某一方少于两个样本，或该数字为 0",
    "verdict.not_ok": "拒绝：有单元不合格",
    "verdict.refused_cache": "拒绝：前缀缓存 {a} 对 {b}",
    "verdict.refused_other": "拒绝：主机更忙可以解释该差异（其他进程占用单核 {a} 对 {b}）",
    "verdict.refused_pressure": "拒绝：主机更忙可以解释该差异（CPU 压力 {a} 对 {b}）",
    "verdict.refused_wait": "拒绝：主机更忙可以解释该差异（服务端线程等待 CPU 单核占比 {a} 对 {b}）",
    "note.refused": ("拒绝：两方的前缀缓存状态不同，或主机更忙可以解释较差一方时不给判定：主机空闲不足一个核（或 CPU 压力"
                     "高出 {psi} 个百分点以上）时，其他进程多占用超过 {points} 个核，或服务端线程等待 CPU 多出 {wait} 个核"
                     "以上；看不到服务端进程时，CPU 压力高出 {psi} 个百分点以上（docs/metrics.md，\"Run fingerprints "
                     "and refused verdicts\"）。"),
    "verdict.moved": "拒绝：客户端延迟可能使该数字偏移（--allow-client-lag 可判定）",
    "bn.client": "客户端瓶颈",
    "bn.kv": "KV 瓶颈",
    "bn.queueing": "排队",
    "bn.compute": "算力瓶颈",
    "bn.bandwidth": "带宽瓶颈",
    "bn.unknown": "未知",
    "note.band": "折线：p50；阴影带：同一批单元的 p90 到 p99。",
    "ev.client": "{reason}",
    "ev.client_cpu": "客户端每进程 CPU 占用 {cpu}% 个核",
    "ev.kv_demand": "* KV 需求 {demand} > 容量 {capacity}",
    "ev.kv_usage": "KV 使用率峰值 {pct}%（服务端 /metrics）",
    "ev.preempt": "{n} 次抢占（服务端 /metrics）",
    "ev.waiting": "排队请求峰值 {n}（服务端 /metrics）",
    "ev.ttft_growth": "平均 TTFT 为 {load} 时的 {times} 倍",
    "ev.roof_compute": "达到算力屋顶线的 {pct}%（{out} / {bound} tok/s）",
    "ev.roof_bandwidth": "达到带宽屋顶线的 {pct}%（{out} / {bound} tok/s）",
    "ev.roof_far": "仅达屋顶线的 {pct}%；无排队或 KV 证据",
    "ev.not_ok": "单元不合格（{mark}）",
    "ev.no_roofline": "无排队或 KV 证据；无屋顶线（模型大小或硬件未知）",
    "ev.no_monitor": "无监控样本，也未达到任何上限",
    "ev.nothing": "无证据：无监控样本，无屋顶线",
    "axis.ttft_p50_ms": "TTFT p50（ms）；阴影 p90-p99",
    "axis.ttft_median_ms": "TTFT p50（ms）",
    "axis.tpot_median_ms": "TPOT p50（ms）",
    "axis.tpot_p50_ms": "TPOT p50（ms）；阴影 p90-p99",
    "plot.ttft_p50": "首 token 延迟（p50）随负载变化",
    "plot.tpot_p50": "每 token 时间（p50）随负载变化",
}
