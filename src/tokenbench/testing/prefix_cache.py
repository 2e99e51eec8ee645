"""The reference server's prefix cache, pure: blocks of token ids, chained hashes, LRU eviction.

As in vLLM: a prompt is cut into full blocks of `block_size` tokens; block i's key is the hash of
(key of block i-1, its token ids), so a block matches only under the same prefix. A lookup counts the
leading blocks found, but never the whole prompt: the last prompt token is always computed (it gives
the first output's logits), so at most `(len - 1) // block_size` blocks hit. A request stores the
full blocks of its prompt when its prefill ends, and of its prompt + output (all but the last output
token, whose KV is never computed) when it ends. Capacity is in blocks; the least recently used go
first, a chain's tail before its head.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_keys(ids: Sequence[int], block_size: int, limit: int | None = None) -> list[int]:
    """Chained keys of the full blocks of `ids` (at most `limit` blocks)."""
    n = len(ids) // block_size if limit is None else min(limit, len(ids) // block_size)
    keys, parent = [], 0
    for i in range(n):
        parent = hash((parent, *ids[i * block_size:(i + 1) * block_size]))
        keys.append(parent)
    return keys


def cacheable_tokens(prompt_tokens: int, output_tokens: int, block_size: int) -> int:
    """Tokens a finished request leaves in the cache: the full blocks of prompt + output - 1."""
    return (prompt_tokens + output_tokens - 1) // block_size * block_size


class PrefixCache:
    """Block keys in LRU order (oldest first); `lookup` counts hits, `store` adds blocks."""

    def __init__(self, capacity_blocks: int, block_size: int) -> None:
        self.capacity, self.block_size = capacity_blocks, block_size
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def lookup(self, ids: Sequence[int]) -> int:
        """Cached tokens for a prompt `ids`: whole leading blocks found, short of the last token."""
        hits = 0
        for key in block_keys(ids, self.block_size, (len(ids) - 1) // self.block_size):
            if key not in self.blocks:
                break
            hits += 1
        self._touch(block_keys(ids, self.block_size, hits))
        return hits * self.block_size

    def store(self, ids: Sequence[int]) -> None:
        """Add (or refresh) the full blocks of `ids`, then evict down to capacity."""
        self._touch(block_keys(ids, self.block_size))
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)

    def _touch(self, keys: list[int]) -> None:
        for key in reversed(keys):      # the head ends up most recent: a chain is evicted tail first
            self.blocks[key] = None
            self.blocks.move_to_end(key)

    @property
    def used_blocks(self) -> int:
        return len(self.blocks)
