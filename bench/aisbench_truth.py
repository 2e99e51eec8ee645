"""tokenbench and AISBench against the reference server's send log (docs/aisbench.md, "Definitions that
differ"): `tokenbench agree --peer aisbench` on a reference server that ends each completions stream with
a usage-only chunk as vLLM and SGLang do (`--usage-chunk`), then each tool's mean TTFT, ITL and gaps per
request beside the server's truth. AISBench stamps `time.perf_counter()`, the server `perf_counter_ns()`:
one clock, so each AISBench request is matched to the server's receipt of it. Prints a markdown table.

    .venv/bin/python bench/aisbench_truth.py --tokenizer ~/.cache/tokenbench/models/gemma3-270m-hf \
        [--concurrency 1,4] [--num-prompts 16] [--no-usage-chunk] [--out DIR]
"""

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from tokenbench.agreement import agree
from tokenbench.agreement import aisbench as agree_aisbench
from tokenbench.formats import aisbench as import_aisbench
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

BEFORE_S = 3.0     # AISBench's warmup requests are sent within this long before its first measured one
GEMMA3_VOCAB = 262144  # the tokenizer tokenbench draws its prompt ids from: the server must accept them


def aisbench_requests(out: Path, tag: str) -> list[list[float]]:
    """The time points (s) of every measured AISBench request of one cell."""
    res = import_aisbench.read(agree_aisbench.newest(tag, out))
    return [p for d in res.details if (p := import_aisbench.points_of(res, d))]


def truth(entries: list[dict]) -> dict:
    """The server's side: TTFT from receipt to the first token's write, gaps between token writes."""
    gaps = [(b - a) / 1e6 for e in entries for a, b in zip(e["write_ns"], e["write_ns"][1:], strict=False)]
    return {"ttft": statistics.mean((e["write_ns"][0] - e["recv_ns"]) / 1e6 for e in entries),
            "itl": statistics.mean(gaps), "gaps": len(gaps) / len(entries), "min_itl": min(gaps)}


def aisbench_side(points: list[list[float]], log: list[dict]) -> tuple[dict, dict, float]:
    """(AISBench's view, the truth of the same requests, mean lead of its clock start over the receipt)."""
    recv = sorted(log, key=lambda e: e["recv_ns"])
    mine, leads = [], []
    for p in points:
        entry = min((e for e in recv if e["recv_ns"] >= p[0] * 1e9), key=lambda e: e["recv_ns"])
        mine.append(entry)
        leads.append(entry["recv_ns"] / 1e6 - p[0] * 1e3)
    gaps = [(b - a) * 1e3 for p in points for a, b in zip(p[1:], p[2:], strict=False)]
    view = {"ttft": statistics.mean((p[1] - p[0]) * 1e3 for p in points), "itl": statistics.mean(gaps),
            "gaps": len(gaps) / len(points), "min_itl": min(gaps)}
    return view, truth(mine), statistics.mean(leads)


def run(tokenizer: str, concurrency: tuple[int, ...], num_prompts: int, usage_chunk: bool, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    cfg = ReferenceConfig(ttft_ms=100, itl_ms=20, usage_chunk=usage_chunk, send_log=str(out / "send.jsonl"),
                          vocab_size=GEMMA3_VOCAB)
    with ReferenceProcess(cfg) as ref:
        spec = agree.AgreeSpec(base_url=ref.url, peer="aisbench", tokenizer=tokenizer, input_len=32, output_len=16,
                               concurrency=concurrency, num_prompts=num_prompts, repeat=1)
        agree.run(spec, out, print)
    log = [json.loads(line) for line in (out / "send.jsonl").read_text().splitlines() if line.strip()]
    rows = ["| conc | who | mean TTFT ms | mean ITL ms | min ITL ms | ITL gaps / request | clock start before "
            "receipt ms |", "|---:|---|---:|---:|---:|---:|---:|"]
    starts = []
    for conc in concurrency:
        points = aisbench_requests(out, f"c{conc}-r1")
        starts.append(min(p[0] for p in points) * 1e9 - BEFORE_S * 1e9)
    for i, conc in enumerate(concurrency):
        points = aisbench_requests(out, f"c{conc}-r1")
        view, seen, lead = aisbench_side(points, log)
        end = max(p[-1] for p in points) * 1e9
        nxt = starts[i + 1] if i + 1 < len(starts) else float("inf")
        ours = sorted((e for e in log if end < e["recv_ns"] < nxt), key=lambda e: e["recv_ns"])[conc:]
        tb = json.loads((out / f"tokenbench-c{conc}-r1.json").read_text())["cells"][0]["summary"]
        tb_view = {"ttft": tb["mean_ttft_ms"], "itl": tb["mean_itl_ms"], "min_itl": tb["min_itl_ms"]}
        for who, v, extra in (("AISBench", view, f"{lead:.2f}"), ("truth (AISBench's requests)", seen, ""),
                              ("tokenbench", tb_view, ""), ("truth (tokenbench's requests)", truth(ours), "")):
            gaps = "" if not v.get("gaps") else f"{v['gaps']:.1f}"
            rows.append(f"| {conc} | {who} | {v['ttft']:.2f} | {v['itl']:.3f} | {v['min_itl']:.2f} | {gaps} | "
                        f"{extra} |")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--usage-chunk", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    folder = Path(a.out or tempfile.mkdtemp(prefix="aisbench-truth-"))
    conc = tuple(int(c) for c in a.concurrency.split(","))
    print("\n".join(run(a.tokenizer, conc, a.num_prompts, a.usage_chunk, folder)))
    print(f"\n(results in {folder})")
