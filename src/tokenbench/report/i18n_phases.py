"""Report text about where each request's time went (report/phases.py) and the phases `compare` judges, both
languages; merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "h.phases": "Where the time went: the server's own timings",
    "ph.intro": ("Each request carried a W3C traceparent; the server's span of it (its arrival, queue, prefill and "
                 "decode on its own clock) was joined by that trace id. Per phase: mean / p50 / p99 in ms over the "
                 "joined measured requests. network + queue + prefill + server other + delivery = the client's TTFT "
                 "(its mean is the TTFT column); network and delivery are each uncertain by the clock offset's "
                 "error (±, '!' where the requests' bounds did not meet). docs/metrics.md, \"Where the time went\"."),
    "ph.network": "network (send → arrival)",
    "ph.queue": "queue",
    "ph.prefill": "prefill",
    "ph.server_other": "server other",
    "ph.delivery": "delivery (first token)",
    "ph.decode": "decode",
    "ph.decode_other": "server other (after)",
    "ph.last_delivery": "delivery (last token)",
    "ph.col.joined": "joined",
    "ph.col.ttft": "client TTFT mean (ms)",
    "ph.col.offset": "clock offset error (ms)",
    "ph.col.counted": "requests counted",
    "ph.mean.queue_ms": "queue (ms)",
    "ph.mean.prefill_ms": "prefill (ms)",
    "ph.mean.decode_ms": "decode (ms)",
    "ph.mean.inference_ms": "inference (ms)",
    "ph.mean.ttft_ms": "TTFT (ms)",
    "ph.mean.e2e_ms": "e2e (ms)",
    "ph.plot.ttft": "Mean time to the first token, by phase",
    "ph.plot.last": "Mean time to the last token, by phase",
    "ph.axis": "ms (mean over the joined requests)",
    "ph.means_intro": ("The server's own means over the measured phase, from its request-time histograms on "
                       "/metrics (increase of the sum / increase of the count): server means, no per-request "
                       "figure and no percentile; they need no tracing."),
    "ph.note.unjoined": ("{cell}: {missing} measured requests without a span, {unjoined} request spans of no request "
                         "of the cell, {other} other spans (no request's: without gen_ai.latency.time_to_first_token), "
                         "{dropped} export payloads dropped (undecodable)."),
    "ph.note.flagged": ("{cell}: in {n} of {joined} requests the client read the first token later after the "
                        "server's first-token time than its TTFT tolerance, beyond the clock offset's error (worst "
                        "delivery {worst} ms): their TTFT holds that delivery (the network, the server's write after "
                        "its stamp, or the client's own read; the span cannot tell which)."),
    "ph.note.clock": ("{cell}: the requests' clock-offset bounds did not meet (a clock stepped, or the server stamps "
                      "out of order); the smallest round trip was used and network and delivery may be off."),
    "cmp.phases": "Where the time went: phases that moved",
    "ph.loads_intro": ("Across loads: per config and length pair, each phase's mean [95 % interval] at the lowest "
                       "traced load and at the highest, and the change (moved: its interval excludes 0 and it is at "
                       "least {floor} of the lower load's mean TTFT, or of its mean time to the last token), as "
                       "`compare` judges two runs."),
    "cmp.phases_none": "No cell of both runs has the server's phase timings.",
    "cmp.phases_unpaired": ("Both runs have cells with the server's phase timings, but none pairs: they share no cell "
                            "of the same lengths and load, and neither run traced exactly one cell of a length pair "
                            "the other traced (compare two runs of one load each, or two runs of the same loads)."),
    "cmp.col.phase": "phase",
    "ph.col.delta": "change (ms) [95 % interval]",
    "ph.col.moved": "moved",
    "ph.moved_up": "grew",
    "ph.moved_down": "shrank",
    "ph.not_moved": "-",
    "ph.cmp_pair": "{a} → {b}",
    "ph.grew": "{phase} grew most, by {delta} ms [{lo}, {hi}]",
    "ph.none_grew": "no phase grew beyond its interval",
    "ph.cmp_note": ("Each phase's mean [95 % interval] over the cells' joined requests; the change B − A with its "
                    "interval (the two standard errors in quadrature). A phase moved when that interval excludes 0 "
                    "and the change is at least {floor} of A's mean TTFT (phases before the first token) or of its "
                    "mean time to the last token (the others). Cells are paired by lengths and load, or, where each "
                    "run traced one cell of a length pair, across their loads."),
}

ZH: dict[str, str] = {
    "h.phases": "耗时分解：服务端自身的计时",
    "ph.intro": ("每个请求都带有 W3C traceparent；服务端对该请求的 span（按其自身时钟记录的到达、排队、预填充和解码）"
                 "按 trace id 与请求一一对应。各阶段：已对应的测量请求上的 均值 / p50 / p99（ms）。"
                 "网络 + 排队 + 预填充 + 服务端其他 + 首 token 送达 = 客户端 TTFT（其均值见 TTFT 列）；网络与送达"
                 "各自的不确定度为时钟偏差误差（±；'!' 表示各请求的界限不相交）。见 docs/metrics.md“Where the time went”。"),
    "ph.network": "网络（发送 → 到达）",
    "ph.queue": "排队",
    "ph.prefill": "预填充",
    "ph.server_other": "服务端其他",
    "ph.delivery": "首 token 送达",
    "ph.decode": "解码",
    "ph.decode_other": "服务端其他（之后）",
    "ph.last_delivery": "末 token 送达",
    "ph.col.joined": "已对应",
    "ph.col.ttft": "客户端 TTFT 均值（ms）",
    "ph.col.offset": "时钟偏差误差（ms）",
    "ph.col.counted": "计入请求数",
    "ph.mean.queue_ms": "排队（ms）",
    "ph.mean.prefill_ms": "预填充（ms）",
    "ph.mean.decode_ms": "解码（ms）",
    "ph.mean.inference_ms": "推理（ms）",
    "ph.mean.ttft_ms": "TTFT（ms）",
    "ph.mean.e2e_ms": "端到端（ms）",
    "ph.plot.ttft": "首 token 平均耗时的阶段分解",
    "ph.plot.last": "末 token 平均耗时的阶段分解",
    "ph.axis": "ms（已对应请求的均值）",
    "ph.means_intro": ("服务端在测量阶段的自身均值，来自 /metrics 上的请求耗时直方图（总和增量 / 计数增量）："
                       "仅为服务端均值，没有逐请求数据和百分位；无需 tracing。"),
    "ph.note.unjoined": ("{cell}：{missing} 个测量请求没有 span，{unjoined} 个请求 span 不属于本单元的任何请求，"
                         "{other} 个其他 span（不是请求的：没有 gen_ai.latency.time_to_first_token），"
                         "{dropped} 个导出负载无法解码而被丢弃。"),
    "ph.note.flagged": ("{cell}：在 {joined} 个请求中有 {n} 个，客户端读到首 token 的时间比服务端的首 token 时间晚了超过"
                        "其 TTFT 容差（已扣除时钟偏差误差；最差送达 {worst} ms）：这些请求的 TTFT 包含这段送达时间"
                        "（网络、服务端在打点之后的写出，或客户端自身的读取；span 无法区分）。"),
    "ph.note.clock": "{cell}：各请求的时钟偏差界限不相交（时钟跳变，或服务端打点顺序异常）；已使用最小往返，网络与送达可能有偏差。",
    "cmp.phases": "耗时分解：变化的阶段",
    "ph.loads_intro": ("不同负载之间：每个服务配置和长度组合，在追踪到的最低负载与最高负载下各阶段的均值 [95 % 区间]，"
                       "以及变化（变化的区间不含 0，且至少为较低负载平均 TTFT 或平均末 token 时间的 {floor}，才算变化），"
                       "判定方式与 `compare` 比较两次运行相同。"),
    "cmp.phases_none": "两次运行没有同时带服务端阶段计时的单元。",
    "cmp.phases_unpaired": ("两次运行都有带服务端阶段计时的单元，但无法配对：它们没有相同长度和负载的单元，且对于对方"
                            "追踪过的长度组合，没有一方恰好只追踪了一个单元（请比较各只有一个负载的两次运行，或负载相同的两次运行）。"),
    "cmp.col.phase": "阶段",
    "ph.col.delta": "变化（ms）[95 % 区间]",
    "ph.col.moved": "是否变化",
    "ph.moved_up": "增加",
    "ph.moved_down": "减少",
    "ph.not_moved": "-",
    "ph.cmp_pair": "{a} → {b}",
    "ph.grew": "增加最多的阶段为{phase}：{delta} ms [{lo}, {hi}]",
    "ph.none_grew": "没有阶段超出其区间地增加",
    "ph.cmp_note": ("各阶段在单元已对应请求上的均值 [95 % 区间]；变化 B − A 及其区间（两个标准误按平方和合成）。"
                    "当区间不含 0 且变化至少为 A 的平均 TTFT（首 token 之前的阶段）或平均末 token 时间（其余阶段）的 "
                    "{floor} 时，该阶段视为有变化。单元按长度与负载配对；若两次运行在某一长度对上各只有一个带计时的单元，"
                    "则跨负载配对。"),
}
