"""Report text of the load axes and of the frontier, both languages; merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    # load axes (report/load_plots.py)
    "dim.concurrency": "concurrency",
    "dim.users": "users",
    "dim.rate": "request rate",
    "axis.dim.concurrency": "concurrency (requests in flight)",
    "axis.dim.users": "users (concurrent sessions)",
    "axis.dim.rate": "request rate (requests/s)",
    "axis.dim.rate_cap": "request rate (requests/s), at most {cap} in flight",
    "axis.dim.rate_caps": "request rate (requests/s); each series names its in-flight cap",
    "plot.dim.throughput": "Output throughput vs {dim}",
    "plot.dim.ttft_p50": "TTFT (p50) vs {dim}",
    "plot.dim.tpot_p50": "TPOT (p50) vs {dim}",
    # the frontier (report/frontier.py)
    "h.frontier": "Frontier: speed per user vs throughput per device",
    "h.frontier_pair": "input {input} / output {output}",
    "plot.frontier": "Frontier {pair}: tok/s per user vs tok/s per device",
    "plot.frontier_kw": "Frontier {pair}: tok/s per user vs tok/s per kW",
    "axis.per_user": "output tok/s per user (1000 / mean TPOT)",
    "axis.per_user_stream": "output tok/s per user (≈ output tok/s / concurrency)",
    "axis.per_device": "output tok/s per device",
    "axis.per_kw": "output tok/s per kW of accelerator power",
    "fr.key_front": "frontier",
    "fr.key_dominated": "dominated",
    "fr.key_derived": "derived (≈)",
    "fr.tip": "{point}: {user} tok/s per user, {device} tok/s per device ({n} devices); {status}",
    "fr.not_judged": "not judged: the cell is not ok",
    "fr.on_front": "on the frontier",
    "fr.dominated": "dominated by {by}",
    "fr.dominated_clearly": "dominated by {by}, beyond both intervals",
    "col.devices": "devices",
    "col.per_user": "tok/s per user",
    "col.per_device": "tok/s per device",
    "col.per_joule": "tokens per joule",
    "col.per_kw": "tok/s per kW",
    "col.frontier": "frontier",
    "fr.derived": ("{mark} derived, not measured as such: tok/s per user as output tok/s / concurrency, for every "
                   "point of a pair when some point gives no TPOT (it includes the wait for the first token, so it "
                   "reads lower than 1000 / TPOT); output tok/s as concurrency x output tokens / mean E2EL (Little's "
                   "law; E2EL = TTFT + (output - 1) x TPOT when not given)."),
    "fr.missing.no_speed": "{cell}: no point (no TPOT, and no output tok/s of a closed loop to derive the speed per "
                           "user from).",
    "fr.missing.no_throughput": "{cell}: no point (no output tok/s, and no latencies of a closed loop to derive it "
                                "from).",
    "fr.missing.not_ok": "{cell}: no point (the cell is not ok and stored no figure to place it by).",
    "fr.intro": ("Each point is one cell (a server config at one load): x = output tokens/s each user sees, 1000 / "
                 "mean TPOT (ms); y = output tokens/s per device (output tok/s / devices, devices = TP x DP x PP of "
                 "the profile, or as the imported file states). Whiskers: 95 % intervals (none for imported "
                 "figures, which carry no requests). A point is dominated when another is at least as good on both "
                 "axes and better on one; dominated points are grey, the dashed line joins the frontier. Where the "
                 "monitor sampled accelerator power, tokens per joule = output tokens / accelerator energy over the "
                 "measured window (J), and a second plot puts tok/s per kW on y; where the run states a price "
                 "(--price-per-hour), output tokens per $ = output tok/s x 3600 / the server's $ per hour "
                 "(docs/metrics.md, \"Frontier\", \"Cost\")."),
    "def.per_user": "output speed per user",
    "def.per_user.f": "1000 / mean TPOT (ms), tokens/s; its interval from mean TPOT's",
    "def.per_device": "output throughput per device",
    "def.per_device.f": "output tok/s / devices (TP x DP x PP)",
    "def.per_joule": "tokens per joule",
    "def.per_joule.f": ("output tokens / accelerator energy over the measured window (J), so 1 / it is the energy "
                        "per output token; tok/s per kW = 1000 x that"),
}

ZH: dict[str, str] = {
    "dim.concurrency": "并发",
    "dim.users": "用户数",
    "dim.rate": "请求速率",
    "axis.dim.concurrency": "并发数（在途请求数）",
    "axis.dim.users": "用户数（并发会话）",
    "axis.dim.rate": "请求速率（请求/秒）",
    "axis.dim.rate_cap": "请求速率（请求/秒），在途请求上限 {cap}",
    "axis.dim.rate_caps": "请求速率（请求/秒）；各序列名注明在途上限",
    "plot.dim.throughput": "输出吞吐随{dim}变化",
    "plot.dim.ttft_p50": "首 token 延迟（p50）随{dim}变化",
    "plot.dim.tpot_p50": "每 token 时间（p50）随{dim}变化",
    "h.frontier": "前沿：单用户速度与单卡吞吐",
    "h.frontier_pair": "输入 {input} / 输出 {output}",
    "plot.frontier": "前沿 {pair}：单用户 tok/s 与单卡 tok/s",
    "plot.frontier_kw": "前沿 {pair}：单用户 tok/s 与每千瓦 tok/s",
    "axis.per_user": "单用户输出 tok/s（1000 / 平均 TPOT）",
    "axis.per_user_stream": "单用户输出 tok/s（≈ 输出 tok/s / 并发）",
    "axis.per_device": "单卡输出 tok/s",
    "axis.per_kw": "每千瓦加速卡功率的输出 tok/s",
    "fr.key_front": "前沿",
    "fr.key_dominated": "被支配",
    "fr.key_derived": "推算值（≈）",
    "fr.tip": "{point}：单用户 {user} tok/s，单卡 {device} tok/s（{n} 卡）；{status}",
    "fr.not_judged": "未评判：该单元不合格",
    "fr.on_front": "位于前沿",
    "fr.dominated": "被 {by} 支配",
    "fr.dominated_clearly": "被 {by} 支配，两轴区间均不重叠",
    "col.devices": "卡数",
    "col.per_user": "单用户 tok/s",
    "col.per_device": "单卡 tok/s",
    "col.per_joule": "每焦耳 token 数",
    "col.per_kw": "每千瓦 tok/s",
    "col.frontier": "前沿",
    "fr.derived": ("{mark} 推算值，非直接测量：当某一组合中有点没有 TPOT 时，该组合所有点的单用户 tok/s 都按 输出 tok/s / 并发 计算"
                   "（含等待首 token 的时间，因此低于 1000 / TPOT）；"
                   "输出 tok/s = 并发 × 输出 token 数 / 平均 E2EL（利特尔法则；未给出 E2EL 时 E2EL = TTFT + (输出 − 1) × TPOT）。"),
    "fr.missing.no_speed": "{cell}：无数据点（没有 TPOT，也没有可推算单用户速度的闭环输出吞吐）。",
    "fr.missing.no_throughput": "{cell}：无数据点（没有输出吞吐，也没有可推算它的闭环延迟）。",
    "fr.missing.not_ok": "{cell}：无数据点（该单元不合格，且没有可用于定位的数字）。",
    "fr.intro": ("每个点是一个单元（某一服务配置在某一负载下）：横轴为每个用户看到的输出 token/秒，即 1000 / 平均 TPOT（ms）；"
                 "纵轴为单卡输出 token/秒（输出 tok/s / 卡数，卡数 = profile 的 TP × DP × PP，或导入文件所述）。"
                 "须线为 95% 置信区间（导入的数字不含请求，因此没有区间）。若另一点在两轴上都不差且至少一轴更好，"
                 "该点即被支配，以灰色显示；虚线连接前沿上的点。监控采集了加速卡功率时，每焦耳 token 数 = 输出 token 数 / "
                 "测量窗口内加速卡能耗（J），并另画一张纵轴为每千瓦 tok/s 的图；运行给出价格（--price-per-hour）时，"
                 "每 $ 输出 token 数 = 输出 tok/s × 3600 / 服务端每小时价格（见 docs/metrics.md “Frontier”“Cost”）。"),
    "def.per_user": "单用户输出速度",
    "def.per_user.f": "1000 / 平均 TPOT（ms），token/秒；区间由平均 TPOT 的区间换算",
    "def.per_device": "单卡输出吞吐",
    "def.per_device.f": "输出 tok/s / 卡数（TP × DP × PP）",
    "def.per_joule": "每焦耳 token 数",
    "def.per_joule.f": "输出 token 数 / 测量窗口内加速卡能耗（J），其倒数即每个输出 token 的能耗；每千瓦 tok/s = 1000 × 该值",
}
