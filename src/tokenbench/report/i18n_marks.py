"""Report text about cells that are not ok (judge/status.py), both languages; merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "mark.failed": "{mark} {cell}: the cell failed, its figures are not a measurement of the server: {reason}",
    "mark.errors": "{mark} {cell}: more requests failed than the error budget allows: {reason}",
    "mark.length": "{mark} {cell}: responses had the wrong length: {reason}",
    "mark.invalid": "{mark} {cell}: invalid, the client could not keep up (the figures measure the client): "
                    "{reason}",
    "mark.mismatch": "{mark} {cell}: {reason} requests had another length than asked (tolerated by "
                     "--allow-length-mismatch): the figures are not those of the asked workload",
    "mark.lagged": "{mark} {cell}: the client lagged (tolerated by --allow-client-lag), the figures may "
                   "measure the client: {reason}",
    "mark.moved": "{mark} {cell}: {figures} may be off by more than its tolerance (± the most the delays "
                  "measured could have moved it); the cell's other figures are clean. Cause: {reason}",
    "mark.spec_random": "{mark} {cell}: {reason}",
    "mark.skipped": "{mark} {cell}: not measured: {reason}",
    "mark.interrupted": "{mark} {cell}: not a complete cell, the figures cover only the requests that finished: "
                        "{reason}",
    "mark.unknown": "{mark} {cell}: verdict unknown to this version: {reason}",
    "mark.no_reason": "no reason stored",
    "cause.client_cpu": "the client's own work held its event loop (client overloaded; busiest client process "
                        "at {cpu} of a core): use --workers N or a lighter load",
    "cause.host_contention": "host contention: the client was ready to run while other processes had the CPU "
                             "(it waited {wait} of the cell for a CPU): give it a core of its own "
                             "(--client-cpus) or quiet the host",
    "cause.client_stopped": "the client's process was neither running nor waiting for a CPU (stopped, e.g. by "
                            "SIGSTOP or a debugger, or blocked in a system call)",
    "cause.client_delay": "the client's event loop was held up (the kernel's run delay could not be read)",
    "cause.buffering": "the stream arrived in pieces while the client waited idle ({chunks} token chunks in "
                       "bursts): {source}; a token may have been held before the read that brought it, so each "
                       "stamp is bounded by that hold (up to its time minus the read two before it)",
    "delivery.note": "{cell}: tokens arrived in bursts of {size} (at most {largest}) about every {period} ms while "
                     "the client waited idle ({share} of the token chunks): {source}",
    "delivery.server": "the server's own writes ({k} chunks at once, by its own account: {told}); its figures are "
                       "as it sent them",
    "delivery.proxy": "held and flushed by the proxy on the way (declared: --via-proxy)",
    "delivery.upstream": "delivered in pieces upstream, by the server or a proxy (not told apart: --via-proxy names "
                         "a proxy, --server-chunks-per-write a server's own writes)",
    "delivery.held": "; every figure a hold could move is bounded by it",
    "mark.name.failed": "failed",
    "mark.name.errors": "over the error budget",
    "mark.name.length": "wrong lengths",
    "mark.name.invalid": "invalid (client overloaded)",
    "mark.name.mismatch": "length mismatch tolerated",
    "mark.name.lagged": "client lag tolerated",
    "mark.name.moved": "this figure may be off by more than its tolerance (client delay or a buffered stream)",
    "mark.name.spec_random": "random prompts to a speculative server",
    "mark.name.skipped": "not measured",
    "mark.name.interrupted": "interrupted",
    "mark.name.unknown": "unknown verdict",
    "mark.legend": ("Marks: {marks}. A marked figure is not a trustworthy measurement; a ratio built on one "
                    "reads n/a; a repeat that is not ok never enters a mean."),
    "mark.hollow": ("Hollow points are cells that are not ok (failed, invalid, interrupted, a tolerated length "
                    "mismatch or client lag, or random prompts to a speculative server), or figures the "
                    "client's delays may have moved; the lines join only the clean points."),
}

ZH: dict[str, str] = {
    "mark.failed": "{mark} {cell}：该单元测试失败，其数字不能代表服务端性能：{reason}",
    "mark.errors": "{mark} {cell}：失败请求超过错误预算：{reason}",
    "mark.length": "{mark} {cell}：响应长度与要求不符：{reason}",
    "mark.invalid": "{mark} {cell}：无效，客户端跟不上（数字反映的是客户端）：{reason}",
    "mark.mismatch": "{mark} {cell}：{reason} 个请求的长度与要求不符（--allow-length-mismatch 容忍）："
                     "数字并非所要求负载的结果",
    "mark.lagged": "{mark} {cell}：客户端滞后（--allow-client-lag 容忍），数字可能反映的是客户端：{reason}",
    "mark.spec_random": "{mark} {cell}：投机解码服务端收到的是随机提示，接受率（以及 TPOT、吞吐）不代表真实文本：{reason}",
    "mark.moved": "{mark} {cell}：{figures} 可能超出容差（± 为所测延迟可能造成的最大偏移）；该单元的其他数字可信。原因：{reason}",
    "cause.client_cpu": "客户端自身的工作阻塞了事件循环（客户端过载；最忙的客户端进程占用 {cpu} 个核）：请使用 --workers N 或减轻负载",
    "cause.host_contention": "主机争用：客户端就绪时 CPU 被其他进程占用（它在该单元中有 {wait} 的时间在等待 CPU）："
                             "请给客户端分配独占的核（--client-cpus）或让主机空闲",
    "cause.client_stopped": "客户端进程既未运行也未等待 CPU（被暂停，如 SIGSTOP 或调试器，或阻塞在系统调用中）",
    "cause.client_delay": "客户端事件循环被阻塞（无法读取内核的运行延迟）",
    "cause.buffering": "客户端空闲等待时数据流成块到达（{chunks} 个 token 块在突发中到达）：{source}；"
                       "一个 token 在被读到之前可能已被滞留，因此每个时间戳都以该滞留为界（最多为其时间减去前两次读取的时间）",
    "delivery.note": "{cell}：客户端空闲等待时 token 以每次 {size} 个（最多 {largest} 个）、约每 {period} ms 一次的突发到达"
                     "（占 token 块的 {share}）：{source}",
    "delivery.server": "服务端自身的写出（据其自述每次写 {k} 个块：{told}）；其数字即其发送的结果",
    "delivery.proxy": "由途中的代理滞留后批量转发（已声明：--via-proxy）",
    "delivery.upstream": "在上游被分块送达，可能是服务端或代理（无法区分：--via-proxy 指明代理，--server-chunks-per-write "
                         "指明服务端自身的写出）",
    "delivery.held": "；每个可能被滞留影响的数字都以该滞留为界",
    "mark.skipped": "{mark} {cell}：未测量：{reason}",
    "mark.interrupted": "{mark} {cell}：不是完整的单元，数字只涵盖中断前完成的请求：{reason}",
    "mark.unknown": "{mark} {cell}：本版本不认识的判定：{reason}",
    "mark.no_reason": "未记录原因",
    "mark.name.failed": "失败",
    "mark.name.errors": "超过错误预算",
    "mark.name.length": "长度错误",
    "mark.name.invalid": "无效（客户端过载）",
    "mark.name.mismatch": "容忍了长度不符",
    "mark.name.lagged": "容忍了客户端滞后",
    "mark.name.moved": "该数字可能超出容差（客户端延迟或缓冲的数据流）",
    "mark.name.spec_random": "投机解码服务端收到随机提示",
    "mark.name.skipped": "未测量",
    "mark.name.interrupted": "已中断",
    "mark.name.unknown": "未知判定",
    "mark.legend": "标记：{marks}。带标记的数字不是可信的测量；基于它的比值显示 n/a；不合格的重复不计入平均值。",
    "mark.hollow": "空心点表示不合格的单元（失败、无效、已中断、容忍了长度不符或客户端滞后，或投机解码服务端收到随机提示）或可能被客户端延迟偏移的数字；折线只连接可信的点。",
}
