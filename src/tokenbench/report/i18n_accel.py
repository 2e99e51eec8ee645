"""Report texts of the accelerator and cost sections, the power mark and the bottleneck labels read from
the accelerator and host samples (English and Chinese; merged into i18n.TEXT). Formulas: docs/monitoring.md,
docs/metrics.md ("Cost")."""

from __future__ import annotations

EN: dict[str, str] = {
    "h.accel": "Accelerator and host over each cell",
    "h.accel_config": "{config}",
    "h.cost": "Cost per million tokens",
    "accel.intro": ("Each figure covers the cell's measured window only (first measured send to last measured "
                    "byte; warmup, drains and idle time left out). Utilisation is mean / max %; memory is used "
                    "(mean) / peak / capacity in GiB; power is mean / max W (the mean time-weighted); energy "
                    "from NVML's total-energy counter where the GPU has one, else power samples integrated "
                    "(trapezoids) on tokenbench's clock. With several devices the first row is their sum."),
    "accel.all": "all {n}",
    "accel.src.counter": "energy counter",
    "accel.src.power": "power samples",
    "accel.host_note": "Host energy: {note}.",
    "col.device": "device",
    "col.accel_util": "util % (mean / max)",
    "col.accel_mem": "memory GiB (used / peak / capacity)",
    "col.accel_power": "power W (mean / max)",
    "col.energy_j": "energy J",
    "col.j_per_token": "J / output token",
    "col.j_per_request": "J / request",
    "col.tokens_per_j": "tokens / J",
    "col.energy_source": "energy from (coverage)",
    "col.host_cpu": "host CPU % (mean / max)",
    "col.server_proc": "server process CPU % / RSS MiB",
    "col.host_energy_j": "host energy J (RAPL)",
    "col.host_j_per_token": "host J / output token",
    "mark.sparse": ("{mark} {cell}: power and energy are not a measurement of the whole window: the power "
                    "samples cover {coverage}% of its {window} s, the longest gap between them is {gap} s (the "
                    "interval is {interval} s); a figure needs 90 % and no gap over two intervals"),
    "mark.sparse_counter": ("{mark} {cell}: energy is not a measurement of the whole window: the energy "
                            "counter's readings around an edge of its {window} s lie {gap} s apart (the interval "
                            "is {interval} s), and its value at the edge is interpolated between them; a figure "
                            "needs readings no more than two intervals apart"),
    "mark.name.sparse": "power samples do not cover the window (power, energy)",
    "bn.accelerator": "accelerator busy",
    "bn.host": "host CPU-bound",
    "ev.accel_busy": "accelerator utilisation {pct}% (max {max}%) over the measured window",
    "ev.host_cpu": "host CPU {pct}% of all cores over the measured window (no accelerator sampled)",
    "bn.contention": "CPU shared with other work",
    "ev.host_others": ("other work took {other}% of one core, the server {server}%, the client {client}% (host CPU "
                       "{pct}% of {cpus} CPUs; CPU pressure {psi})"),
    "ev.server_cpu": ("host CPU {pct}% of {cpus} CPUs: the server took {server}% of one core, the client {client}%, "
                      "other work {other}% (CPU pressure {psi})"),
    "ev.host_unsplit": ("host CPU {pct}% of {cpus} CPUs, the client {client}% of one core: the server's processes "
                        "are not seen here, so its share and other work's are not told apart"),
    "ev.quiet_split": ("nothing saturated: host CPU {pct}% of {cpus} CPUs (the server {server}% of one core, the "
                       "client {client}%, other work {other}%); no queueing or KV evidence, no roofline"),
    "ev.monitor_quiet": ("accelerator {util}% busy, host CPU {cpu}%: nothing saturated; no queueing or KV "
                         "evidence, no roofline"),
    "cost.intro.device": ("At {price} per device-hour (--price-per-hour, stated with the run): the server's "
                          "price per hour is that x its devices."),
    "cost.intro.node": "At {price} per node-hour (--price-per-hour, --price-basis node): one node serves the cells.",
    "cost.config": "{config}:",
    "cost.devices_seen": "{n} (the devices the monitor sampled: a server given by --base-url states none)",
    "cost.by.spans": "prefill / decode time, the server's spans ({pct}% to input)",
    "cost.by.histograms": "prefill / decode time, the server's means ({pct}% to input)",
    "cost.by.tokens": "token share ({pct}% to input)",
    "col.usd_per_hour": "$ / hour",
    "col.usd_per_m_out": "$ / M output tokens (all cost)",
    "col.usd_per_m_in_split": "$ / M input tokens (split)",
    "col.usd_per_m_out_split": "$ / M output tokens (split)",
    "col.split_by": "split by",
    "col.out_per_usd": "output tokens / $",
    "col.per_usd": "output tokens per $",
}

ZH: dict[str, str] = {
    "h.accel": "各测试点的加速卡与主机",
    "h.accel_config": "{config}",
    "h.cost": "每百万 token 成本",
    "accel.intro": ("每个数字只覆盖该测试点的测量窗口（从第一个测量请求发出到最后一个测量字节到达；不含预热、"
                    "单元之间的排空与空闲）。利用率为平均 / 最大 %；显存为已用（平均）/ 峰值 / 容量（GiB）；"
                    "功率为平均 / 最大 W（平均按时间加权）；能耗优先取 NVML 总能耗计数器，否则在 tokenbench "
                    "的时钟上对功率样本做梯形积分。多卡时第一行为各卡之和。"),
    "accel.all": "全部 {n} 卡",
    "accel.src.counter": "能耗计数器",
    "accel.src.power": "功率样本",
    "accel.host_note": "主机能耗：{note}。",
    "col.device": "设备",
    "col.accel_util": "利用率 %（平均 / 最大）",
    "col.accel_mem": "显存 GiB（已用 / 峰值 / 容量）",
    "col.accel_power": "功率 W（平均 / 最大）",
    "col.energy_j": "能耗 J",
    "col.j_per_token": "每输出 token 能耗 J",
    "col.j_per_request": "每请求能耗 J",
    "col.tokens_per_j": "每焦耳 token 数",
    "col.energy_source": "能耗来源（覆盖率）",
    "col.host_cpu": "主机 CPU %（平均 / 最大）",
    "col.server_proc": "服务进程 CPU % / RSS MiB",
    "col.host_energy_j": "主机能耗 J（RAPL）",
    "col.host_j_per_token": "主机每输出 token 能耗 J",
    "mark.sparse": ("{mark} {cell}：功率与能耗不是整个窗口的测量：功率样本只覆盖其 {window} 秒中的 {coverage}%，"
                    "样本间最长间隔 {gap} 秒（采样间隔 {interval} 秒）；需要覆盖 90 % 且间隔不超过两个采样间隔"),
    "mark.sparse_counter": ("{mark} {cell}：能耗不是整个窗口的测量：能耗计数器在其 {window} 秒窗口某一端前后的两次读数"
                            "相隔 {gap} 秒（采样间隔 {interval} 秒），窗口端点处的值由两者插值得到；需要两次读数相隔不超过"
                            "两个采样间隔"),
    "mark.name.sparse": "功率样本未覆盖测量窗口（功率、能耗）",
    "bn.accelerator": "加速卡繁忙",
    "bn.host": "主机 CPU 瓶颈",
    "ev.accel_busy": "测量窗口内加速卡利用率 {pct}%（最大 {max}%）",
    "ev.host_cpu": "测量窗口内主机 CPU 占全部核的 {pct}%（未采样加速卡）",
    "bn.contention": "CPU 被其他负载占用",
    "ev.host_others": "其他进程占用单核的 {other}%，服务端 {server}%，客户端 {client}%（主机 CPU 占 {cpus} 个 CPU 的 {pct}%；CPU 压力 {psi}）",
    "ev.server_cpu": "主机 CPU 占 {cpus} 个 CPU 的 {pct}%：服务端占用单核的 {server}%，客户端 {client}%，其他进程 {other}%（CPU 压力 {psi}）",
    "ev.host_unsplit": "主机 CPU 占 {cpus} 个 CPU 的 {pct}%，客户端占单核的 {client}%：此处看不到服务端进程，无法区分其占用与其他负载",
    "ev.quiet_split": "均未饱和：主机 CPU 占 {cpus} 个 CPU 的 {pct}%（服务端占单核的 {server}%，客户端 {client}%，其他进程 {other}%）；无排队或 KV 证据，无屋顶线",
    "ev.monitor_quiet": "加速卡繁忙 {util}%，主机 CPU {cpu}%：均未饱和；无排队或 KV 证据，无屋顶线",
    "cost.intro.device": "按每卡每小时 {price}（--price-per-hour，随运行记录）：服务端每小时价格 = 该价格 × 卡数。",
    "cost.intro.node": "按每节点每小时 {price}（--price-per-hour，--price-basis node）：一个节点承担各测试点。",
    "cost.config": "{config}：",
    "cost.devices_seen": "{n}（监控采样到的卡数：--base-url 给出的服务端未说明卡数）",
    "cost.by.spans": "按 prefill / decode 时间，服务端 span（{pct}% 计入输入）",
    "cost.by.histograms": "按 prefill / decode 时间，服务端均值（{pct}% 计入输入）",
    "cost.by.tokens": "按 token 占比（{pct}% 计入输入）",
    "col.usd_per_hour": "每小时 $",
    "col.usd_per_m_out": "每百万输出 token $（全部成本）",
    "col.usd_per_m_in_split": "每百万输入 token $（分摊）",
    "col.usd_per_m_out_split": "每百万输出 token $（分摊）",
    "col.split_by": "分摊依据",
    "col.out_per_usd": "每 $ 输出 token 数",
    "col.per_usd": "每 $ 输出 token 数",
}
