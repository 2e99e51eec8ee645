"""Report texts of what the server's counters tell about a cell: speculative acceptance, prefix-cache
hits, a trace's own reuse (English and Chinese; merged into i18n.TEXT). Formulas: docs/metrics.md."""

from __future__ import annotations

EN: dict[str, str] = {
    "col.spec_accept": "Spec. acceptance (rate, tokens/step)",
    "col.cache_hit": "Prefix-cache hits",
    "col.trace_reuse": "Trace's own reuse",
    "def.spec_accept": "Speculative acceptance",
    "def.spec_accept.f": ("rate = accepted draft tokens / draft tokens; tokens/step = 1 + accepted / drafts "
                          "(server counters over the measured phase)"),
    "def.cache_hit": "Prefix-cache hit rate",
    "def.cache_hit.f": ("Σ cached_tokens / Σ prompt tokens of the requests that reported it; else the "
                        "engine's prefix-cache counters: hits / queries over the measured phase"),
    "def.trace_reuse": "Trace's own reuse",
    "def.trace_reuse.f": ("tokens of full blocks whose hash-id prefix an earlier row held, short of each "
                          "prompt's last token / Σ input_length"),
}

ZH: dict[str, str] = {
    "col.spec_accept": "投机接受（接受率，每步 token）",
    "col.cache_hit": "前缀缓存命中",
    "col.trace_reuse": "trace 自身复用",
    "def.spec_accept": "投机解码接受",
    "def.spec_accept.f": "接受率 = 接受的草稿 token / 草稿 token；每步 token = 1 + 接受数 / 草稿次数（测量阶段服务端计数器增量）",
    "def.cache_hit": "前缀缓存命中率",
    "def.cache_hit.f": "Σ cached_tokens / 报告它的请求的 Σ 输入 token；否则用引擎前缀缓存计数器：测量阶段 hits / queries",
    "def.trace_reuse": "trace 自身复用",
    "def.trace_reuse.f": "哈希前缀已由更早请求完整持有的整块 token（不含每个提示的最后一个 token）/ Σ input_length",
}
