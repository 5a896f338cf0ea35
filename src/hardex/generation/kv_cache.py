"""The transformers backend's KV cache: layers allocated once for a whole generation (`make_cache`), and the
memory a GPU batch's cache may take (`kv_cache_room`)."""

from __future__ import annotations

from functools import cache

from hardex.devices import allocator_fraction


@cache  # one class: the fixed-shape step checks a cache's layers against it
def prealloc_layer_class():
    """A DynamicLayer that writes into a buffer allocated once for the whole generation instead of
    concatenating a new tensor every step (DynamicLayer's torch.cat copies the whole cache at each
    token: a third of the decode time of a small model on CPU)."""
    from transformers.cache_utils import DynamicLayer

    class PreallocLayer(DynamicLayer):
        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity
            self.length = 0
            self.slot = None  # a device tensor of one position: fixed-shape decoding (HFGenerator's static steps)

        def lazy_initialization(self, key_states, value_states) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            b, h, _, d = key_states.shape
            # zeros, not empty: the fixed-shape step attends over unwritten positions under a mask, and a masked
            # weight of 0 times a NaN left in recycled memory is NaN (its tokens depended on the allocator)
            self._k = key_states.new_zeros((b, h, self.capacity, d))
            self._v = value_states.new_zeros((b, h, self.capacity, value_states.shape[-1]))
            self.keys, self.values = self._k[:, :, :0], self._v[:, :, :0]
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            if self.slot is not None:  # a fixed-shape decode step: one token written at the slot, the whole buffers
                self._k.index_copy_(2, self.slot, key_states)
                self._v.index_copy_(2, self.slot, value_states)
                return self._k, self._v
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV cache capacity {self.capacity} exceeded")
            self._k[:, :, self.length : end] = key_states
            self._v[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def _rebuild(self, fn) -> None:
            # over the whole buffers, unfilled positions too: fn's result is the new buffer, with no temporary of
            # the filled part to copy in (on a CPU those temporaries fragmented the heap: 0.5 GiB more at the peak
            # of a 1,200-row batch)
            if not self.is_initialized:
                return
            self._k, self._v = fn(self._k), fn(self._v)
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._rebuild(lambda t: t.repeat_interleave(repeats, dim=0))

        def batch_select_indices(self, indices) -> None:
            self._rebuild(lambda t: t.index_select(0, indices))

        def batch_compact(self, indices) -> None:
            """Rows `indices` moved to the front of the same buffers, whose addresses a CUDA graph holds; the
            rows behind them keep what they held."""
            if self.is_initialized:
                self._k[: len(indices)] = self._k.index_select(0, indices)
                self._v[: len(indices)] = self._v.index_select(0, indices)

    return PreallocLayer


def make_cache(config, capacity: int):
    """A DynamicCache whose full-attention layers are preallocated for `capacity` positions."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    layer_cls = prealloc_layer_class()
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [layer_cls(capacity) for _ in cache.layers]
    return cache


def kv_cache_room(free: int, total: int, *, reserved: int, allocated: int, share: float) -> float:
    """Bytes a GPU generation batch may take: the card's `free` memory (cudaMemGetInfo, of `total`) and the
    blocks torch's allocator holds with no tensor in them (`reserved` less `allocated`: in a train job, the
    step's freed activations and gradients), which it hands out again before asking the card; where jobs share
    the card, within this job's slice, which caps what the allocator reserves (hardex.devices.hold_to_share).
    Counting those blocks as used split a 14B preset's rollouts in two batches every step (issue 64, G2)."""
    cached_free = max(reserved - allocated, 0)
    slice_bytes = total * allocator_fraction(share, total)
    return max(0.0, min(free + cached_free, slice_bytes - allocated))
