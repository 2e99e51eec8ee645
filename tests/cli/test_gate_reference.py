"""`tokenbench gate` end to end against the reference server: runs measured by `bench` into a database and as
result files, a candidate whose token interval is twice as long found regressed (exit 10) in TPOT and not in
TTFT (E2EL and throughput move by a third: regressed, or undecided on a busy host, never anything else), the same server against itself flagging nothing, the result files gated as a CI job keeps them, and
the sequential gate measuring the candidate again at its URL. No wall-clock bound: the server's timings are
the truth, the gate's verdicts what is checked."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tokenbench.cli.main import main
from tokenbench.store.db import Store
from tokenbench.testing.reference_server import ReferenceConfig, ReferenceProcess

pytestmark = pytest.mark.slow

FIGURES = "tpot:mean,tpot:p50,ttft:p50,e2el:mean,output_throughput"


def bench(url: str, db, seed: int, out=None) -> str:
    args = ["bench", "--base-url", url, "--input-len", "16", "--output-len", "12", "--concurrency", "4",
            "--num-prompts", "32", "--seed", str(seed), "--db", str(db), "--disable-tqdm"]
    assert main(args + (["--output", str(out)] if out else [])) == 0
    return Store(db).runs()[-1].id


def gate(db, base, cand, tmp_path, *more) -> tuple[int, dict]:
    code = main(["gate", "--db", str(db), "--baseline", ",".join(base), "--candidate", ",".join(cand),
                 "--figures", FIGURES, "--json", str(tmp_path / "g.json"), "--junit", str(tmp_path / "g.xml"), *more])
    return code, json.loads((tmp_path / "g.json").read_text())


def verdicts(doc: dict) -> dict[str, str]:
    return {f["figure"]: f["decision"] for f in doc["figures"]}


def test_gate_against_the_reference_server(tmp_path, capsys):
    db = tmp_path / "results.db"
    with ReferenceProcess(ReferenceConfig(ttft_ms=40, itl_ms=5)) as fast, \
            ReferenceProcess(ReferenceConfig(ttft_ms=40, itl_ms=10)) as slow:
        base, cand, same, files = [], [], [], {"base": [], "cand": []}
        for k in range(3):                       # interleaved, fresh prompts each
            base.append(bench(fast.url, db, 10 + k, tmp_path / f"base-{k}.json"))
            cand.append(bench(slow.url, db, 20 + k, tmp_path / f"cand-{k}.json"))
            same.append(bench(fast.url, db, 30 + k))
            files["base"].append(str(tmp_path / f"base-{k}.json"))
            files["cand"].append(str(tmp_path / f"cand-{k}.json"))

        code, doc = gate(db, base, cand, tmp_path, "--allow-client-lag")
        found = verdicts(doc)
        assert code == 10 and doc["outcome"] == "regressed", found
        assert found["mean_tpot_ms"] == found["median_tpot_ms"] == "regressed"
        assert found["mean_e2el_ms"] in ("regressed", "inconclusive")
        assert found["output_throughput"] in ("regressed", "inconclusive")
        assert found["median_ttft_ms"] not in ("regressed", "improved")
        tpot = next(f for f in doc["figures"] if f["figure"] == "mean_tpot_ms")
        assert tpot["lo"] <= 1.0 <= tpot["hi"] and tpot["noise"]["source"] == "repeats"
        suite = ET.parse(tmp_path / "g.xml").getroot()
        assert int(suite.get("failures")) == doc["counts"]["regressed"] >= 2
        assert "gate: REGRESSED" in capsys.readouterr().out

        code, doc = gate(db, base, same, tmp_path, "--allow-client-lag")
        assert code in (0, 11) and doc["counts"]["regressed"] == doc["counts"]["improved"] == 0

        code, doc = gate(tmp_path / "other.db", files["base"], files["cand"], tmp_path, "--allow-client-lag")
        assert code == 10 and verdicts(doc)["mean_tpot_ms"] == "regressed"

        # one candidate run, measured again at its URL until decided (at most 3 runs)
        code, doc = gate(db, base, cand[:1], tmp_path, "--allow-client-lag", "--repeat-until-decided",
                         "--max-runs", "3")
        assert len(doc["candidate"]) == 3 or not any(f["decision"] == "inconclusive" for f in doc["figures"])
        assert len(doc["baseline"]) == 3                  # a URL baseline is not measured again
        assert verdicts(doc)["median_ttft_ms"] not in ("regressed", "improved")
        assert doc["information_fraction"] == 1.0 or code != 11
        again = [r for r in doc["candidate"] if r not in cand]
        assert all(Store(db).run(r).spec["seed"] != Store(db).run(cand[0]).spec["seed"] for r in again)
