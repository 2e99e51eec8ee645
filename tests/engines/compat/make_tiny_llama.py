"""A random 2-layer Llama and a byte-level BPE tokenizer trained on random words, saved as a Hugging Face
model directory: `transformers serve` loads it with nothing downloaded. Run by path with the
transformers-serve venv's Python (torch, transformers, tokenizers): python make_tiny_llama.py OUTDIR

Ids 0-2 are the special tokens and 3-258 the lone bytes; their embedding rows (tied with the output head)
are zero, so their logits are 0 while the others spread around it: greedy decoding almost never picks
end-of-sequence or a byte that does not decode alone, and answers run to max_tokens."""

import json
import random
import string
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer(out: Path, vocab: int) -> int:
    rng = random.Random(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(4000)]
    lines = (" ".join(rng.choices(words, k=30)) for _ in range(2000))
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(out / "tokenizer.json"))
    eos = SPECIAL[0]
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": eos, "eos_token": eos, "pad_token": eos,
        "add_bos_token": False, "clean_up_tokenization_spaces": False, "chat_template": TEMPLATE}))
    return tok.get_vocab_size(with_added_tokens=True)


def model(out: Path, vocab: int) -> None:
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    llama = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        llama.get_input_embeddings().weight[:259].zero_()
    llama.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0, do_sample=False)
    llama.save_pretrained(out)


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    model(folder, tokenizer(folder, 1000))
    print(folder)
