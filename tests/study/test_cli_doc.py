"""docs/cli.md is generated from the option declarations and must be current."""

from pathlib import Path

from tokenbench.cli import flags
from tokenbench.cli.reference_doc import markdown

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current():
    assert DOC.read_text() == markdown(), "docs/cli.md is stale: python -m tokenbench.cli.reference_doc > docs/cli.md"


def test_every_flag_and_vllm_spelling_is_documented():
    text = DOC.read_text()
    for flag in flags.SHARED + flags.SWEEP_ONLY:
        assert f"`{flag.flag}`" in text and f"`{flag.key}`" in text
        assert all(f"`{v}`" in text for v in flag.vllm)
    for vllm in ("--random-input-len", "--save-result", "--result-dir", "--result-filename", "--goodput",
                 "--percentile-metrics", "--metric-percentiles", "--ignore-eos", "--burstiness",
                 "--random-range-ratio", "--label", "OPENAI_API_KEY", "--request-rate inf"):
        assert vllm in text, vllm
