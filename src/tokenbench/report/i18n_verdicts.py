"""Report text of intervals, verdicts and bottleneck labels, both languages; merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "h.intervals": "95 % intervals",
    "h.intervals_pair": "{config}: input {input} / output {output}",
    "h.cmp_verdicts": "Verdicts with 95 % intervals",
    "note.intervals": ("Each figure with its 95 % interval [low, high]: percentile bootstrap over the requests of "
                       "each repeat (throughputs: over time bins of the measured window) and over repeats when "
                       "there are several; {boots} resamples, fixed seed (docs/metrics.md, \"Intervals and "
                       "verdicts\")."),
    "note.unreliable": "{mark} p99 from fewer than {n} requests: unreliable.",
    "note.verdicts": ("A verdict names the faster side only when the 95 % interval of the difference excludes 0 and "
                      "the difference is at least {floor} (smaller ones are within the run-to-run drift of one "
                      "machine); \"faster\" means higher throughput or lower latency."),
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
    "verdict.na": "no samples",
    "verdict.not_ok": "refused: a cell is not ok",
    "bn.client": "client-bound",
    "bn.kv": "KV-bound",
    "bn.queueing": "queueing",
    "bn.compute": "compute-bound",
    "bn.bandwidth": "bandwidth-bound",
    "bn.unknown": "unknown",
    "note.band": "Lines: p50; shaded band: p90 to p99 of the same cells.",
    "plot.ttft_p50": "TTFT (p50) vs load",
    "plot.tpot_p50": "TPOT (p50) vs load",
}

ZH: dict[str, str] = {
    "h.intervals": "95% 置信区间",
    "h.intervals_pair": "{config}：输入 {input} / 输出 {output}",
    "h.cmp_verdicts": "带 95% 置信区间的结论",
    "note.intervals": ("每个数字后为其 95% 置信区间 [下限, 上限]：在每次重复内对请求做百分位自助法重采样（吞吐量对测量窗口的"
                       "时间分箱重采样），有多次重复时也对重复重采样；{boots} 次重采样，固定随机种子"
                       "（见 docs/metrics.md “Intervals and verdicts”）。"),
    "note.unreliable": "{mark} 少于 {n} 个请求得到的 p99：不可靠。",
    "note.verdicts": ("只有当差异的 95% 置信区间不含 0 且差异至少为 {floor} 时才判定哪一方更快（更小的差异在同一台机器"
                      "多次运行的漂移之内）；“更快”指吞吐更高或延迟更低。"),
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
    "verdict.na": "无样本",
    "verdict.not_ok": "拒绝：有单元不合格",
    "bn.client": "客户端瓶颈",
    "bn.kv": "KV 瓶颈",
    "bn.queueing": "排队",
    "bn.compute": "算力瓶颈",
    "bn.bandwidth": "带宽瓶颈",
    "bn.unknown": "未知",
    "note.band": "折线：p50；阴影带：同一批单元的 p90 到 p99。",
    "plot.ttft_p50": "首 token 延迟（p50）随负载变化",
    "plot.tpot_p50": "每 token 时间（p50）随负载变化",
}
