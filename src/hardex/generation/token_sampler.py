"""The transformers backend's sampler: each sample's random stream, and one token per row drawn from it.

Sample j of an example draws its randomness from a stream keyed by (seed, example key, j) alone (`stream_key`);
its uniform at step t is a counter-based function of that key and t (splitmix64: `stream_uniforms`), and a row's
token is the inverse CDF of its logits at that uniform (`sample_tokens`). So a sample never depends on its batch,
its position in it or how many samples were asked for together (hardex.generation.hf says why that matters).
"""

from __future__ import annotations

import hashlib

import numpy as np

from hardex.generation.sampling import SAMPLE_ROWS

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def stream_key(seed: int, key: str, sample: int) -> int:
    """64-bit key of the random stream of sample `sample` of the example `key` under `seed`."""
    h = hashlib.sha256(f"{int(seed)}\x1f{key}\x1f{int(sample)}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def stream_uniforms(keys: list[int], steps: int) -> np.ndarray:
    """Uniforms in (0, 1), shape (len(keys), steps): entry [i, t] depends on keys[i] and t only."""
    with np.errstate(over="ignore"):
        base = np.asarray(keys, dtype=np.uint64)[:, None]
        t = np.arange(1, steps + 1, dtype=np.uint64)[None, :]
        z = _splitmix64(base ^ _splitmix64(t * _GOLDEN))
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(2**53)


def sample_tokens(logits, u, temperature: float, top_p: float, buffers: "SamplerBuffers | None" = None):
    """One token per row by inverse-CDF sampling with the given uniforms (greedy if temperature 0).

    Row i's token depends only on row i's logits and u[i], so rows are sampled SAMPLE_ROWS at a time: the
    same tokens, with float32 copies of a few hundred rows at most instead of the whole batch's. top_p keeps
    the smallest set of most likely tokens whose mass reaches top_p (ties in probability kept in vocabulary
    order). `buffers` (a decode loop's SamplerBuffers) holds those copies from one step to the next.
    """
    import torch

    if temperature == 0:
        return logits.argmax(-1)
    if logits.shape[0] > SAMPLE_ROWS:
        return torch.cat([_sample_rows(logits[i : i + SAMPLE_ROWS], u[i : i + SAMPLE_ROWS], temperature, top_p,
                                       buffers) for i in range(0, logits.shape[0], SAMPLE_ROWS)])
    return _sample_rows(logits, u, temperature, top_p, buffers)


class SamplerBuffers:
    """The sampler's two float32 (rows, vocabulary) arrays, allocated once for a decode loop. Allocated anew at
    every step, 25 MB each for 128 rows of a 49k-word vocabulary, the allocator handed fresh pages back to the
    system and faulted them in again: the softmax and cumulative sum took three times as long (36 ms a step
    against 11 at one thread)."""

    def __init__(self):
        self._a = self._b = None

    def take(self, like):
        """Two float32 arrays shaped as `like` (rows, vocabulary), views of the ones held where they fit."""
        import torch

        rows, vocab = like.shape
        if self._a is None or self._a.shape[0] < rows or self._a.shape[1] != vocab or self._a.device != like.device:
            self._a = torch.empty((rows, vocab), dtype=torch.float32, device=like.device)
            self._b = torch.empty_like(self._a)
        return self._a[:rows], self._b[:rows]


def _sample_rows(logits, u, temperature: float, top_p: float, buffers: SamplerBuffers | None = None):
    import torch

    if buffers is None:
        scaled, probs = logits.to(torch.float32, copy=True), None
    else:
        scaled, probs = buffers.take(logits)
        scaled.copy_(logits)
    # divided in place: one float32 copy of the rows' logits instead of two (the same quotients)
    probs = torch.softmax(scaled.div_(temperature), dim=-1, out=probs)
    if top_p < 1.0:
        sp, idx = probs.sort(dim=-1, descending=True, stable=True)
        cum = sp.cumsum(-1)
        sp = sp.masked_fill(cum - sp >= top_p, 0.0)
        cdf = sp.cumsum(-1)
        j = torch.searchsorted(cdf, (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1))
        return idx.gather(-1, j.clamp_(max=probs.shape[-1] - 1)).squeeze(-1)
    cdf = torch.cumsum(probs, -1, out=scaled)  # the scaled logits are spent: their array takes the sums
    j = torch.searchsorted(cdf, (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1))
    return j.clamp_(max=probs.shape[-1] - 1).squeeze(-1)
