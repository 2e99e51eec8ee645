"""Report text about what a cell offered and how its streams ended (metrics/summary.py,
metrics/summary_groups.py) and about loads that cannot be paired (judge/fairness.py), both languages;
merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "send.note": "{cell}: sent at {achieved}/s for {asked}/s asked ({off}): {why}",
    "send.off.few_requests": ("too few requests for the asked rate to hold: the schedule's own random draws over "
                              "these {n} sends offer {scheduled}/s (more requests, or a longer --duration, bring it "
                              "to the asked rate)"),
    "send.off.cap": ("the --max-concurrency slots were full: {waits} sends had to wait for one, {wait} ms per "
                     "send on average (the server did not finish requests as fast as this rate needs: "
                     "back-pressure, not the client)"),
    "send.off.connect": ("new connections took {connect} ms on average to open before a request could be written "
                         "(the server accepted them late: back-pressure, not the client)"),
    "send.off.client": ("the client sent late, {late} ms on average after the schedule (its event loop, its CPU "
                        "or the host: see the client's health)"),
    "send.line": "{cell}: sent at {achieved}/s (asked {asked}/s, scheduled {scheduled}/s)",
    "send.schedule": ("{cell}: the sends left their schedule: late by {p99} ms at p99 and {max} ms at most "
                      "(tolerance {tol} ms; {share} of the sends later), gaps' CV {cv_sent} sent for {cv_sched} "
                      "scheduled: {why}; the server was offered another load than asked"),
    "early.note": ("{cell}: {n} of {ok} answers ended before the asked {asked} tokens (output {lo}-{hi}, median "
                   "{median}): the server would not let the length be forced, so each was measured as it came"),
    "probe.method": "{config}: {method} ({how})",
    "probe.how.probed": "probed with {n} requests",
    "probe.how.assumed": "not probed: assumed",
    "probe.refused": "{config}: {line}",
    "tail.note": ("{cell}: the stream ended {mean} ms (mean; p99 {p99} ms) after its last token: E2EL includes "
                  "this stream tail, TPOT and ITL end at the last token"),
    "fair.load": "{cell} is not paired: {values}: {why}; no ratio or verdict is given",
    "fair.load.mode": ("a concurrency (closed loop: a new request when one ends) and a request rate (open loop: "
                       "requests on a schedule, whatever the server does) are different loads, even at the same "
                       "number"),
    "fair.load.cap": ("the same request rate under different --max-concurrency caps is a different load (the cap "
                      "holds requests back once that many are in flight)"),
    "fair.load.arrival": ("the same request rate with different arrival processes (Poisson, constant, "
                          "burstiness) is a different load"),
    "cmp.not_paired": "not paired: different loads",
}

ZH: dict[str, str] = {
    "send.note": "{cell}：实际发送速率 {achieved}/s，要求 {asked}/s（{off}）：{why}",
    "send.off.few_requests": ("请求太少，要求的速率无法成立：调度本身对这 {n} 次发送的随机抽样只给出 {scheduled}/s"
                              "（更多请求或更长的 --duration 会使其接近要求的速率）"),
    "send.off.cap": ("--max-concurrency 的并发槽已满：{waits} 次发送需要等待槽位，平均每次发送等待 {wait} ms"
                     "（服务端完成请求的速度跟不上该速率：这是服务端反压，不是客户端的问题）"),
    "send.off.connect": "新连接平均用了 {connect} ms 才建立，之后请求才能写出（服务端接受连接较慢：服务端反压，不是客户端）",
    "send.off.client": "客户端发送滞后，平均比调度晚 {late} ms（事件循环、CPU 或主机所致：见客户端健康状况）",
    "send.line": "{cell}：实际发送速率 {achieved}/s（要求 {asked}/s，调度 {scheduled}/s）",
    "send.schedule": ("{cell}：发送偏离了调度：p99 晚 {p99} ms，最多晚 {max} ms（容差 {tol} ms；{share} 的发送晚于容差），"
                      "间隔的变异系数实际为 {cv_sent}，调度为 {cv_sched}：{why}；服务端收到的负载与要求的不同"),
    "early.note": ("{cell}：{ok} 个回答中有 {n} 个在要求的 {asked} 个 token 之前结束（输出 {lo}-{hi}，中位数 {median}）："
                   "服务端不允许强制长度，每个请求按实际输出计量"),
    "probe.method": "{config}：{method}（{how}）",
    "probe.how.probed": "探测用了 {n} 个请求",
    "probe.how.assumed": "未探测：按假定",
    "probe.refused": "{config}：{line}",
    "tail.note": "{cell}：最后一个 token 之后还过了 {mean} ms（均值；p99 {p99} ms）流才结束：E2EL 包含这段流尾，TPOT 和 ITL 止于最后一个 token",
    "fair.load": "{cell} 不配对比较：{values}：{why}；不给出比值和判定",
    "fair.load.mode": "固定并发（闭环：一个请求结束才发下一个）与请求速率（开环：按调度发送，不管服务端如何）是不同的负载，即使数值相同",
    "fair.load.cap": "同一请求速率但 --max-concurrency 上限不同是不同的负载（在途请求达到上限后会被压住）",
    "fair.load.arrival": "同一请求速率但到达过程不同（泊松、恒定、突发度）是不同的负载",
    "cmp.not_paired": "不配对：负载不同",
}
