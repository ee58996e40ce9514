"""The KV cache of one sequence, as handed from prefill to decode.

This dataclass is the contract between the prefill side (which produces it), the KV
store (which moves it between processes or hosts) and the decode side (which loads it
into its batch). Tensors are contiguous and on the CPU while in transit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KVCache:
    # Keys and values for every layer of one sequence, the prompt's positions only.
    k: torch.Tensor  # [L, Hkv, S, D]
    v: torch.Tensor  # [L, Hkv, S, D]
    # Identifies the weights the cache was computed with; a decode worker serving other
    # weights must refuse it rather than produce wrong tokens.
    model_fingerprint: str

    @property
    def length(self) -> int:
        return int(self.k.shape[2])

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()
