"""Models: prompt rendering and tokenization, a fingerprint of a model's files, and the tiny model.

A config model is a hub id, a local directory, a GGUF file (`gguf`, hardex.model_sources), or
`build`: a small Qwen3 with a byte-level BPE tokenizer trained on the synthetic task text,
warm-started by a short supervised run on the tasks' `sft` splits (disjoint from every pool and
test split) so that its pass rates over a pool spread across the whole range from 0 to 1. That
spread is what makes difficulty selection matter.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import polars as pl

EOS = "<|endoftext|>"
PAD = "<|pad|>"


def render_prompt(tokenizer, user_text: str, chat: bool, system: str | None = None) -> str:
    """The text fed to the model for one user turn: chat template (Qwen3 non-thinking) or plain.
    `system` (tasks.<task>.system_prompt) is the chat's system message; a plain prompt opens with it
    as a paragraph of its own.

    The text holds every special token the model expects (a chat template writes its own BOS; a
    plain prompt gets the BOS its tokenizer would add), so `encode_prompt` adds none: probing,
    training and evaluation then feed the model the same token ids on every backend.
    """
    if chat:
        system_turn = [] if system is None else [{"role": "system", "content": system}]
        return tokenizer.apply_chat_template(
            system_turn + [{"role": "user", "content": user_text}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=False,
        )
    bos = getattr(tokenizer, "bos_token", None) if tokenizer is not None else None
    adds_bos = bos is not None and tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id]
    return (bos if adds_bos else "") + (f"{system}\n\n" if system else "") + user_text + "\n"


def encode_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a rendered prompt: the one tokenization every stage and backend uses.

    No special tokens are added: `render_prompt` already wrote them into the text (tokenizing a
    Llama 3 chat prompt with the default add_special_tokens=True would give two BOS).
    """
    return tokenizer(text, add_special_tokens=False)["input_ids"]


#: the files that decide what a model computes: weights, configs, tokenizer, chat template, code
FINGERPRINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".model", ".txt", ".tiktoken", ".jinja", ".py")
# the records of a build, a conversion (hardex.model_sources) and a stand-in (hardex.rehearsal.standin): timings,
# which differ between identical models
FINGERPRINT_SKIP = {"build_summary.json", "source.json", "standin.json"}
#: files of a hub model that from_pretrained never reads: Meta's original checkpoint beside the safetensors
#: (original/*.pth, 16 GB for Llama-3.1-8B). Not downloaded, and not fingerprinted, so that a full download and
#: hardex's give one fingerprint (patterns matched as the hub matches them: fnmatchcase on the repository path)
HUB_SKIP = ("original/*",)
_file_digests: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    """Content hash of one model file. A hub cache file is a link to a blob named by the hash of its
    content (sha256 for weights): the name is read, not the gigabytes behind it."""
    target = path.resolve()
    if path.is_symlink() and target.parent.name == "blobs":
        return target.name
    st = target.stat()
    key = (str(target), st.st_size, st.st_mtime_ns)
    if key not in _file_digests:
        h = hashlib.sha256()
        with open(target, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
        _file_digests[key] = h.hexdigest()
    return _file_digests[key]


class ModelError(ValueError):
    """A config model that cannot be loaded; str() is one line: which case it is and what to do."""


def resolve_model(path: str | Path) -> str:
    """The local folder `from_pretrained` loads for a config model: the directory itself, or the hub
    snapshot in the cache (downloaded first when the network allows, as loading would). Anything else is
    a ModelError naming the case: a directory without a tokenizer or config, a hub id unreachable
    offline or not found, or a path that is neither."""
    folder = Path(path).expanduser()
    if folder.is_dir():
        for need, files in (("a model config", ("config.json",)),
                            ("a tokenizer", ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"))):
            if not any((folder / f).exists() for f in files):
                raise ModelError(f"{path}: a local directory without {need} ({' or '.join(files)}); save it beside "
                                 f"the weights (save_pretrained), or give another directory or a hub id")
        return str(folder)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        return snapshot_download(str(path), allow_patterns=[f"*{s}" for s in FINGERPRINT_SUFFIXES],
                                 ignore_patterns=list(HUB_SKIP))
    except HFValidationError:
        raise ModelError(f"{path}: no such local directory (relative paths start from the working directory) and "
                         f"not a hub id (owner/name)") from None
    except RepositoryNotFoundError:
        raise ModelError(f"{path}: no such local directory, and the hub has no model of that name") from None
    except LocalEntryNotFoundError:
        raise ModelError(f"{path}: no such local directory, and this hub model is not in the cache while the hub "
                         f"cannot be reached; give a local directory, or fill the cache where there is network "
                         f"(hf download {path}) and run with HF_HUB_OFFLINE=1") from None


def model_fingerprint(path: str | Path) -> str:
    """A hash of what decides a model's outputs: its weights, configs and tokenizer files.

    Work reused across jobs (probe chunks, adaptive rounds, training checkpoints) is keyed by it, so
    a model rebuilt under the same path (new weights) never reuses the old model's work. A hub id is
    resolved to its cached snapshot (downloaded first if needed, as loading it would).
    """
    folder = Path(resolve_model(path))
    files = sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix in FINGERPRINT_SUFFIXES
                   and f.name not in FINGERPRINT_SKIP
                   and not any(p.startswith(".") for p in f.relative_to(folder).parts)
                   and not any(fnmatchcase(f.relative_to(folder).as_posix(), skip) for skip in HUB_SKIP))
    if not any(f.suffix in (".safetensors", ".bin", ".pt", ".pth") for f in files):
        raise FileNotFoundError(f"{path}: no model weights (*.safetensors, *.bin) in {folder}")
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(folder).as_posix()}\0{_file_digest(f)}\n".encode())
    return h.hexdigest()[:16]


def build_tokenizer(texts: list[str], vocab_size: int, special_tokens: list[str] | None = None, eos: str = EOS,
                    pad: str = PAD, bos: str | None = None, chat_template: str | None = None):
    """A byte-level BPE tokenizer (digits split one by one) in the Hugging Face fast format, trained on
    `texts`. `special_tokens` (default: eos and pad) are kept whole; a rehearsal's stand-in
    (hardex.rehearsal.standin) passes its family's, with its bos and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens or [eos, pad],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    extra = {"bos_token": bos} if bos else {}
    if chat_template:
        extra["chat_template"] = chat_template
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad, padding_side="left", **extra)


def warmstart_rows(task, split: pl.DataFrame) -> list[dict[str, Any]]:
    """A split's warm-start rows for `build_model`: the plain prompt (the built model has no chat
    template) and the worked solution to imitate."""
    return [{"prompt": render_prompt(None, task.prompt(r), chat=False), "solution": r["solution"]}
            for r in split.iter_rows(named=True)]


def build_model(
    out_dir: str | Path,
    sft_rows: list[dict[str, Any]],
    arch: dict[str, Any],
    warmstart: dict[str, Any],
    log=print,
    device: str = "cpu",
) -> dict[str, Any]:
    """Build the tiny Qwen3, warm-start it on (prompt, solution) rows, save model and tokenizer.

    `sft_rows` items have `prompt` (the rendered prompt text) and `solution` (the target
    completion). Returns a summary (parameters, final loss, seconds, device) that is also saved as
    `build_summary.json` beside the weights. The warm start runs in float32 on `device` (the build job
    passes its GPU where it has one: on one CPU thread gpu_mini's takes hours).
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    seed = int(warmstart["seed"])
    random.seed(seed)
    torch.manual_seed(seed)
    t0 = time.time()
    corpus = [r["prompt"] + r["solution"] for r in sft_rows]
    tokenizer = build_tokenizer(corpus, int(arch["vocab_size"]))
    heads = int(arch["num_heads"])
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=int(arch["hidden_size"]),
        intermediate_size=int(arch["intermediate_size"]),
        num_hidden_layers=int(arch["num_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=int(arch["hidden_size"]) // heads,
        max_position_embeddings=int(arch["max_position_embeddings"]),
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config).to(device)  # initialised on the CPU: the same starting weights on either device
    n_params = sum(p.numel() for p in model.parameters())
    log(f"built Qwen3: {n_params / 1e6:.2f}M parameters, vocab {len(tokenizer)}, warm start on {device}")

    # sequences = prompt + solution + EOS; loss on the completion only
    examples = []
    for r in sft_rows:
        p_ids = tokenizer(r["prompt"], add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(r["solution"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append((p_ids + c_ids, len(p_ids)))
    bs, epochs = int(warmstart["batch_size"]), float(warmstart["epochs"])
    total = max(1, math.ceil(len(examples) * epochs / bs))
    opt = torch.optim.AdamW(model.parameters(), lr=float(warmstart["learning_rate"]), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=float(warmstart["learning_rate"]), total_steps=total, pct_start=0.1
    )
    model.train()
    order: list[int] = []
    loss_ema = None
    for step in range(total):
        if len(order) < bs:
            order += random.sample(range(len(examples)), len(examples))
        batch = [examples[order.pop()] for _ in range(bs)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((bs, width), tokenizer.pad_token_id)
        labels = torch.full((bs, width), -100)
        attn = torch.zeros((bs, width), dtype=torch.long)
        for i, (ids, n_prompt) in enumerate(batch):  # right padding for training
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
            attn[i, : len(ids)] = 1
        loss = model(input_ids=input_ids.to(device), attention_mask=attn.to(device), labels=labels.to(device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if step % max(1, total // 10) == 0 or step == total - 1:
            log(f"warm-start step {step + 1}/{total}  loss {loss_ema:.4f}")
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = {
        "parameters": n_params,
        "vocab_size": len(tokenizer),
        "sft_examples": len(examples),
        "steps": total,
        "final_loss": loss_ema,
        "seconds": round(time.time() - t0, 1),
        "device": device,
    }
    (out / "build_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
