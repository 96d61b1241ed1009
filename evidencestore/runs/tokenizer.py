"""A tokenizer pinned by digest: the last source of an LLM output's token count.

When a stream carries neither token ids, logprob entries nor usage (``streams.py``), the
workload's ``[endpoint.tokenizer]`` (a ``tokenizer.json`` of the Hugging Face
``tokenizers`` format, named by ``digest`` and read from ``path`` or the store) counts
the tokens of each channel's text (``output_tokens_from = "tokenizer"``). Its bytes must
hash to the pinned digest, so every clone counts with the same tokenizer. A re-encoded
text can tokenize differently from the server's generation (merges across pieces), so
this count is the fallback, after what the server says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..digest import hash_bytes
from ..errors import WorkloadError

__all__ = ["TokenCounter", "load_tokenizer"]


@dataclass(frozen=True)
class TokenCounter:
    """A loaded tokenizer and its digest."""

    digest: str
    tokenizer: Any

    def count(self, text: str) -> int:
        """The number of tokens of ``text`` (no special tokens added)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def load_tokenizer(data: bytes, digest: str, where: str) -> TokenCounter:
    """A :class:`TokenCounter` from ``tokenizer.json`` bytes that must hash to
    ``digest`` (errors name ``where``)."""
    got = hash_bytes(data).digest
    if got != digest:
        raise WorkloadError(f"{where}: hashes to {got}, but the workload pins {digest}")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise WorkloadError(
            f"{where}: counting tokens with a tokenizer needs the `tokenizers` package "
            "(pip install 'evidencestore[run]')"
        ) from None
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except (UnicodeDecodeError, Exception) as exc:  # tokenizers raises a bare Exception
        raise WorkloadError(f"{where}: not a tokenizer.json: {exc}") from None
    return TokenCounter(digest, tok)
