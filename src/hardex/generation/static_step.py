"""The decode step of fixed shapes that a CUDA graph replays (`StaticDecodeStep`).

A small model's decode step is about a thousand kernels of a few microseconds each, and launching them from Python
kept the card idle most of the time (docs/gpu-runs.md); a captured graph replays them in one launch. A graph
needs fixed shapes and addresses, so the step attends over the whole preallocated cache under a mask of the filled
positions and writes its keys at a slot held in a tensor (hardex.generation.kv_cache's `PreallocLayer.slot`); a
batch whose rows finish keeps its graph until they fit the next smaller power of two (`bucket_rows`), the step
computing padding rows behind them, then captures again at that size.
"""

from __future__ import annotations


def bucket_rows(rows: int, first: int) -> int:
    """The rows a fixed-shape step computes while `rows` of a batch that began with `first` are left: the
    smallest power of two that holds them, at most `first`. A batch then captures a graph at most
    1 + ceil(log2(first)) times as its rows finish, not at every new size (8-19 captures a batch on a real model,
    each a synchronize and a cache flush: issue 64, G3)."""
    return min(first, 1 << max(rows - 1, 0).bit_length())


class StaticDecodeStep:
    """One decode step of fixed shapes over a preallocated cache, replayed from a CUDA graph when `graph`, run by
    `lean` (a LeanDecodeStep) instead of the model's forward when given.

    Inputs live in tensors the step owns (the tokens, their positions, the slot they are written at), and the
    attention mask covers the whole cache: the prompt's tokens (left padding masked) and each new token's slot
    from the step that writes it. The first call at a batch size runs the step eagerly on a side stream (CUDA's
    warm-up) and captures it; later calls copy their inputs in and replay. `select` keeps some rows (finished
    rows leave the batch). With `buckets` the step computes `bucket_rows` rows, the real ones first and padding
    behind them (rows that finished or copies of a real one: attention and the MLP never mix rows, so padding
    changes no real row's logits); within a bucket the kept rows move inside the same buffers and the graph
    stays, below it the buffers shrink and the next call captures again. Without (the lean step on a CPU,
    where padded rows would cost their arithmetic) every new size is exact.

    A capture that fails at some rows (out of memory in the graph's pool; an architecture whose forward
    synchronises with the host fails at every size) is retried at the next smaller bucket: that model's steps
    above it run eagerly, one warning each time, and graphs are dropped for the model once a capture of one row
    fails (issue 64, G10).
    """

    failed_captures: set[str] = set()  # models decoding without graphs in this process
    capture_limits: dict[str, int] = {}  # a model's largest step to capture, below a capture that failed

    def __init__(self, model, cache, attn, width: int, graph: bool, lean=None, buckets: bool = True):
        import torch

        self.torch, self.model, self.cache, self.graph_wanted, self.lean = torch, model, cache, graph, lean
        dev = attn.device
        capacity = cache.layers[0].capacity
        self.valid = torch.zeros((attn.shape[0], capacity), dtype=torch.bool, device=dev)
        self.valid[:, :width] = attn.bool()
        self.slot = torch.zeros(1, dtype=torch.long, device=dev)
        for layer in cache.layers:
            layer.slot = self.slot
        self.first = attn.shape[0] if buckets else None
        self.captures = 0  # graphs captured over this step's batch
        self._new_batch(attn.shape[0])

    def _new_batch(self, rows: int) -> None:
        torch = self.torch
        self.rows = rows
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=self.valid.device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=self.valid.device)
        self.graph, self.logits = None, None

    def select(self, keep) -> None:
        """Keep rows `keep` of the batch, in this order, and move the cache's rows with them."""
        rows = len(keep) if self.first is None else bucket_rows(len(keep), self.first)
        if rows == self.rows:  # the same buffers: a captured graph replays on
            for layer in self.cache.layers:
                layer.batch_compact(keep)
            self.valid[: len(keep)] = self.valid.index_select(0, keep)
            return
        padded = self.torch.cat([keep, keep[-1:].expand(rows - len(keep))])  # copies of a real row
        self.cache.batch_select_indices(padded)
        self.valid = self.valid.index_select(0, padded)
        self._new_batch(rows)

    def _forward(self):
        self.valid.index_fill_(1, self.slot, True)
        if self.lean is not None:
            return self.lean(self.ids[:, 0], self.pos[:, 0], self.cache, self.valid[:, None, None, :])
        return self.model(input_ids=self.ids, attention_mask=self.valid[:, None, None, :], position_ids=self.pos,
                          past_key_values=self.cache, use_cache=True).logits[:, -1, :]

    def __call__(self, tokens, positions, slot: int):
        n = tokens.shape[0]
        self.ids[:n, 0].copy_(tokens)
        self.pos[:n, 0].copy_(positions)
        self.slot.fill_(slot)
        return self._step()[:n]

    def _step(self):
        if self.graph is not None:
            self.graph.replay()
            return self.logits
        name = type(self.model).__name__
        too_large = self.rows > self.capture_limits.get(name, self.rows)  # a capture this size failed
        if not self.graph_wanted or name in self.failed_captures or too_large:
            return self._forward()
        logits = self._warm_up()
        try:
            self.graph = self._capture()
            self.captures += 1
        except RuntimeError as e:
            import warnings

            self.graph, self.logits = None, None
            below = 1 << ((self.rows - 1).bit_length() - 1) if self.rows > 1 else 0  # the next smaller bucket
            if below:
                self.capture_limits[name] = below
                warnings.warn(f"the CUDA graph of {name}'s decode step failed to capture at {self.rows} rows ({e}): "
                              f"its steps of more than {below} rows decode without a graph, smaller ones capture",
                              stacklevel=3)
            else:
                self.failed_captures.add(name)
                warnings.warn(f"decoding {name} without a CUDA graph: its capture failed at every size down to one "
                              f"row ({e})", stacklevel=3)
        return logits

    def _warm_up(self):
        """This step computed eagerly on a side stream, as CUDA asks before a capture: its logits."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            logits = self._forward()
        torch.cuda.current_stream().wait_stream(side)
        return logits

    def _capture(self):
        """The step captured as a CUDA graph, its output in `logits`."""
        graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(graph):
            self.logits = self._forward()
        return graph
