"""Where a prefill worker ships a request's KV cache: a store in host memory, filled layer by layer.

It stands for the decode side of a prefill/decode-disaggregated deployment
(or a host KV cache tier): each finished layer arrives as one bulk copy of the
request's pages, and is marked landed once the sender's completion arrives.
`write_layer` is one ATen call per layer (`index_select` straight into the
store, or a gather and one `copy_` when the pool lives on a GPU): ATen releases
the GIL inside, so a copy never competes with the prefill thread for it.
"""
from __future__ import annotations

import torch


class KVStore:
    def __init__(self, layers: int, pages: int, page_shape: tuple[int, ...], dtype: torch.dtype, pin: bool = False):
        # pinned memory makes the device-to-host copy a DMA the GPU drives
        self.data = torch.empty(layers, pages, *page_shape, dtype=dtype, pin_memory=pin)
        self.landed = [False] * layers

    def reset(self) -> None:
        """Empty the store: NaN pages and no layer landed, so stale data never passes for a transfer."""
        self.data.fill_(float("nan"))
        self.landed = [False] * len(self.landed)

    def write_layer(self, layer: int, pool_layer: torch.Tensor, page_ids: torch.Tensor) -> None:
        """Copy the request's pages `pool_layer[page_ids]` of one layer into the store, as one bulk op."""
        if pool_layer.device == self.data.device:
            torch.index_select(pool_layer, 0, page_ids, out=self.data[layer])
        else:
            self.data[layer].copy_(pool_layer.index_select(0, page_ids))

    def complete(self, layer: int) -> None:
        self.landed[layer] = True

    def missing(self) -> list[int]:
        return [i for i, done in enumerate(self.landed) if not done]
