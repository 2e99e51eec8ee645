"""Start-up cost of the text catalogs (report/i18n.py): what `tokenbench --help` pays for them (nothing read)
and what the first text of each language costs, each measured in a fresh interpreter, median of N.

    PYTHONPATH=src .venv/bin/python bench/i18n_load.py            # N = 15
    PYTHONPATH=src .venv/bin/python bench/i18n_load.py --runs 31
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

# in a fresh interpreter: the CLI's --help, then which catalogs it read; then the first text of each language
PROBE = """
import sys, time
from click.testing import CliRunner
from tokenbench.cli.main import cli
CliRunner().invoke(cli, ["--help"])
from tokenbench.report import i18n
read_by_help = i18n.catalog.cache_info().currsize
t0 = time.perf_counter(); i18n.t("en", "h.baseline"); t1 = time.perf_counter()
i18n.t("zh", "h.scaling_pair", config="c", input=1, output=2); t2 = time.perf_counter()
i18n.t("zh", "h.baseline"); t3 = time.perf_counter()
print(read_by_help, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)
"""


def _import_ms(module: str) -> float:
    """The module's own import time (ms), as `python -X importtime` reports it."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                         text=True, check=True).stderr
    line = next(x for x in reversed(err.splitlines()) if x.rstrip().endswith(f"| {module}"))
    return int(line.split("|")[0].split(":")[1]) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    n = ap.parse_args().runs
    rows = [subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
            for _ in range(n)]
    read, en, zh, again = zip(*[(int(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in rows], strict=True)
    imports = [_import_ms("tokenbench.report.i18n") for _ in range(n)]
    print(f"catalogs read by `tokenbench --help`: {max(read)}")
    print(f"import tokenbench.report.i18n (self): median {statistics.median(imports):.2f} ms")
    print(f"first t('en', ...): median {statistics.median(en):.2f} ms; first t('zh', ...): "
          f"{statistics.median(zh):.2f} ms; a text already read: {statistics.median(again) * 1e3:.1f} us ({n} runs)")


if __name__ == "__main__":
    main()
