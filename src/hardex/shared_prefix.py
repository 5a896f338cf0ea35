"""A GRPO batch's completion log-probabilities with each prompt's forward pass computed once.

A group's completions share their prompt, and TRL scores every completion by a forward pass over prompt and
completion together: the prompt's tokens are computed, and back-propagated, once per completion. With G
completions a prompt, that is G - 1 needless passes over its tokens, and in the study's configs a prompt is
about as long as its completions. Here the distinct prompts of a batch go through the model once (all but
their last token), their KV cache is copied to each completion's row by an index, and the completions run
over it: the same log-probabilities as TRL's pass up to rounding, and the same gradients, since the
backward of the index sums each prompt's gradient over its completions.

Used by hardex's trainer (hardex.training) in place of TRL's `_get_per_token_logps_and_entropies` where it
applies: one process, no gradient checkpointing (which turns the cache off), a text-only batch and no MoE
load-balancing loss. Elsewhere, or where the repeated prompts would save too little work to pay for a second
forward call (a tiny model), TRL's own pass runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

# the forward and backward work (6 x parameters x tokens) the shared pass must save more than to be taken: a second
# forward call costs the fixed overhead of a pass, which a tiny model's saved prompt tokens do not repay
# (the tests' 1.4M-parameter models ran slower shared; SmolLM2-135M saves about 1e12 a step)
MIN_SAVED_FLOPS = 1e10


def shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep: int, compute_entropy: bool,
                        autocast: Callable[[], AbstractContextManager], config) -> tuple | None:
    """(log-probabilities, entropies or None) of the last `logits_to_keep` tokens of each row, as TRL's fused
    head computes them (its temperature, its masking of padding); None where the repeated prompts would save
    no more than MIN_SAVED_FLOPS (none repeats, or the model is tiny): TRL's pass then.
    `model` has TRL's fused head (trl.trainer.utils.add_fused_lm_head); `config` is its text config; `autocast`
    opens the trainer's autocast context (accelerate's, entered once per pass)."""
    import torch
    from transformers import DynamicCache

    width = input_ids.shape[1] - logits_to_keep  # the prompts' padded width
    prompts = input_ids[:, :width]
    if width < 2:
        return None
    distinct, row_prompt = torch.unique(prompts, dim=0, return_inverse=True)
    parameters = sum(p.numel() for p in model.parameters())
    if 6 * parameters * (prompts.shape[0] - distinct.shape[0]) * (width - 1) <= MIN_SAVED_FLOPS:
        return None
    # equal ids padded to the batch's width have equal padding: any row of a prompt gives its mask
    rows = torch.arange(prompts.shape[0], device=prompts.device)
    first = torch.full((distinct.shape[0],), prompts.shape[0], device=prompts.device).scatter_reduce(
        0, row_prompt, rows, reduce="amin")
    cache = DynamicCache(config=config)
    with autocast():
        model(input_ids=distinct[:, :-1], attention_mask=attention_mask[first, : width - 1], past_key_values=cache,
              use_cache=True, logits_to_keep=1)
    cache.batch_select_indices(row_prompt)
    # each row from the prompt's last token: position k predicts token k + 1, the completion's tokens
    labels = input_ids[:, width:].masked_fill(attention_mask[:, width:] == 0, -100)
    positions = torch.arange(width - 1, input_ids.shape[1] - 1, device=input_ids.device).expand(len(rows), -1)
    with autocast():
        out = model(input_ids=input_ids[:, width - 1 : -1], attention_mask=attention_mask[:, :-1],
                    position_ids=positions, past_key_values=cache, shift_labels=labels, fused_lm_head=True)
    return out.log_probs, (out.entropy if compute_entropy else None)
