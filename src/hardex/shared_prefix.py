"""A GRPO batch's completion log-probabilities with each prompt's forward pass computed once.

A group's completions share their prompt, and TRL scores every completion by a forward pass over prompt and
completion together: the prompt's tokens are computed, and back-propagated, once per completion. With G
completions a prompt, that is G - 1 needless passes over its tokens, and in the study's configs a prompt is
about as long as its completions. Here the distinct prompts of a batch go through the model once (all but
their last token), their KV cache is copied to each completion's row by an index, and the completions run
over it: the same log-probabilities as TRL's pass up to rounding, and the same gradients, since the
backward of the index sums each prompt's gradient over its completions.

The completions run in groups of similar length, each cut to its longest: TRL pads every completion to the
batch's longest, and at small scale a few clipped completions (48 tokens where the mean is 25) make half the
completion tokens padding that the forward and backward passes compute for nothing.

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
    # each row from the prompt's last token: position k predicts token k + 1, the completion's tokens
    labels = input_ids[:, width:].masked_fill(attention_mask[:, width:] == 0, -100)
    positions = torch.arange(width - 1, input_ids.shape[1] - 1, device=input_ids.device).expand(len(rows), -1)
    lengths = attention_mask[:, width:].sum(1)
    # cut on a CPU only, where a call's cost is its positions; a GPU's small calls cost their launches (unmeasured)
    cut = input_ids.device.type == "cpu" and _plain_layers(cache)
    groups = length_groups(lengths.tolist()) if cut else [list(range(len(rows)))]
    parts = []
    for group in groups:
        index = torch.tensor(group, device=input_ids.device)
        n = max(1, int(lengths[index].max()))  # the group's longest completion: the rest of its columns is padding
        if len(groups) == 1:  # the prompts' cache becomes the rows' in place
            cache.batch_select_indices(row_prompt[index])
        rows_cache = cache if len(groups) == 1 else _rows_of(cache, config, row_prompt[index])
        with autocast():
            out = model(input_ids=input_ids[index, width - 1 : width - 1 + n],
                        attention_mask=attention_mask[index, : width - 1 + n], position_ids=positions[index, :n],
                        past_key_values=rows_cache, shift_labels=labels[index, :n], fused_lm_head=True)
        parts.append((index, out.log_probs, out.entropy if compute_entropy else None))
    back = torch.argsort(torch.cat([index for index, _, _ in parts]))  # each row to its place in the batch

    def assembled(pieces):  # padding scores 0, as in TRL's pass
        return torch.cat([torch.nn.functional.pad(t, (0, logits_to_keep - t.shape[1])) for t in pieces])[back]

    return (assembled([lp for _, lp, _ in parts]),
            assembled([e for _, _, e in parts]) if compute_entropy else None)


# a group's call priced in the positions it could have computed instead: each layer's operator calls, and a matmul's
# lower rate at fewer rows; a round figure, not fitted (perf/grpo_step.py --rollouts hardex,hardex-uncut times it)
CALL_COST_TOKENS = 64


def length_groups(lengths: list[int], call_cost: int | None = None) -> list[list[int]]:
    """The rows grouped by completion length, each group run cut to its longest: the grouping of the rows sorted by
    length that computes the fewest positions, counting each group's call as `call_cost` positions (by default
    CALL_COST_TOKENS)."""
    call_cost = CALL_COST_TOKENS if call_cost is None else call_cost
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_len = [lengths[i] for i in order]
    # best[j]: the least cost of the first j sorted rows; a group of rows i..j-1 costs (j - i) x its longest + a call
    best, cut = [0] + [None] * len(order), [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        for i in range(j):
            cost = best[i] + (j - i) * max(1, sorted_len[j - 1]) + call_cost
            if best[j] is None or cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], len(order)
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


def _plain_layers(cache) -> bool:
    """Whether every layer of the cache is a plain full-attention one, whose rows `_rows_of` can copy; a sliding
    window's or a quantized layer's update does more than store its input, so such caches run as one group."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


def _rows_of(cache, config, index):
    """A new cache holding `index`'s rows of each layer (by index, so the backward sums each row's gradient back
    into its prompt's pass)."""
    from transformers import DynamicCache

    rows = DynamicCache(config=config)
    for i, layer in enumerate(cache.layers):
        rows.update(layer.keys[index], layer.values[index], i)
    return rows
