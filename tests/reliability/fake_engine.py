"""A stand-in engine for sweep tests: takes the llama.cpp launcher's command line (a profile's
`command` points here) and serves the reference server on the given port under the alias.

Timing comes from the environment (`FAKE_ENGINE_TTFT_MS`, `FAKE_ENGINE_ITL_MS`); each launch writes
its send log to `FAKE_ENGINE_LOG_DIR/<port>.jsonl`, so a test can tell launches apart.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tokenbench.testing.reference_server import ReferenceConfig, run_blocking


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--model", "--alias", "--host"):
        parser.add_argument(flag)
    parser.add_argument("--port", type=int)
    args, _ = parser.parse_known_args()      # --slots/--ctx/--threads are accepted and ignored
    log_dir = Path(os.environ.get("FAKE_ENGINE_LOG_DIR", "."))
    cfg = ReferenceConfig(ttft_ms=float(os.environ.get("FAKE_ENGINE_TTFT_MS", "5")),
                          itl_ms=float(os.environ.get("FAKE_ENGINE_ITL_MS", "5")),
                          model=args.alias, send_log=str(log_dir / f"{args.port}.jsonl"))
    print(f"fake engine pid {os.getpid()} on port {args.port}", flush=True)
    run_blocking(cfg, args.host, args.port)


if __name__ == "__main__":
    main()
