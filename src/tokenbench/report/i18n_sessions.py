"""Report text about sessions cells (report/sessions.py) and their fairness check, both languages;
merged into i18n."""

from __future__ import annotations

EN: dict[str, str] = {
    "h.sessions": "Sessions: figures by turn",
    "h.sessions_cell": "{config}: {cell}",
    "sess.intro": ("Each session re-sends its history (system prompt, earlier user turns, the assistant's answers) "
                   "plus the turn's new user tokens; turn 0 is a session's first. TTFT is the mean over the turn's "
                   "completed requests with its 95 % interval (t); the hit rate is cached / prompt tokens over the "
                   "requests of the turn that reported cached tokens (docs/metrics.md, \"Sessions\")."),
    "sess.shape": "{shape}; sessions {started} started, {completed} completed, {cut} cut short.",
    "sess.replies": "Assistant turns fed back: {ids} as the ids the server returned, {retok} as its text "
                    "re-tokenized, {fixed} fixed.",
    "sess.hits": "Prefix-cache hit rate {usage} from the responses' cached tokens ({told} requests told).",
    "sess.hits_none": "The server reported no cached tokens in its responses.",
    "sess.counters": "By the server's own counters over the measured phase: {rate} ({hits} of {queries} prompt "
                     "tokens).",
    "col.turn": "turn",
    "col.turn_requests": "requests",
    "col.turn_prompt": "prompt tokens (mean)",
    "col.turn_cached": "cached tokens (mean)",
    "col.turn_hit_rate": "hit rate",
    "col.turn_ttft": "TTFT mean (ms) [95 % interval]",
    "col.turn_ttft_p50": "TTFT p50 (ms)",
    "col.turn_tpot": "TPOT mean (ms)",
    "plot.ttft_by_turn": "TTFT (mean, 95 % interval) by turn",
    "axis.turn": "turn (0 = a session's first)",
    "axis.ttft_mean_ms": "TTFT mean (ms)",
    "fair.session_shape": "session shapes",
    "fair.single_turn": "single-turn",
}

ZH: dict[str, str] = {
    "h.sessions": "多轮会话：按轮次的指标",
    "h.sessions_cell": "{config}：{cell}",
    "sess.intro": ("每个会话在每一轮重新发送其历史（系统提示、之前的用户轮次和助手回答）以及本轮新的用户 token；"
                   "第 0 轮为会话的第一轮。TTFT 为该轮已完成请求的均值及其 95 % 置信区间（t 分布）；"
                   "命中率为该轮报告了缓存 token 的请求中 缓存 token / 提示 token（见 docs/metrics.md“Sessions”）。"),
    "sess.shape": "{shape}；会话 {started} 个开始，{completed} 个完成，{cut} 个提前结束。",
    "sess.replies": "回填的助手轮次：{ids} 个为服务端返回的 token id，{retok} 个为重新分词的文本，{fixed} 个为固定内容。",
    "sess.hits": "前缀缓存命中率 {usage}（来自响应中的缓存 token，{told} 个请求报告）。",
    "sess.hits_none": "服务端在响应中未报告缓存 token。",
    "sess.counters": "按服务端自身计数器（测量阶段）：{rate}（{queries} 个提示 token 中命中 {hits} 个）。",
    "col.turn": "轮次",
    "col.turn_requests": "请求数",
    "col.turn_prompt": "提示 token（均值）",
    "col.turn_cached": "缓存 token（均值）",
    "col.turn_hit_rate": "命中率",
    "col.turn_ttft": "TTFT 均值（ms）[95 % 区间]",
    "col.turn_ttft_p50": "TTFT p50（ms）",
    "col.turn_tpot": "TPOT 均值（ms）",
    "plot.ttft_by_turn": "各轮次的 TTFT（均值，95 % 区间）",
    "axis.turn": "轮次（0 = 会话第一轮）",
    "axis.ttft_mean_ms": "TTFT 均值（ms）",
    "fair.session_shape": "会话形态",
    "fair.single_turn": "单轮",
}
