"""``completions``: OpenAI ``/v1/completions`` (``prompt`` in, ``choices[].text`` out),
built and read back as ``chat`` is."""

from __future__ import annotations

from .chat import ChatEndpoint

__all__ = ["ENDPOINT", "CompletionsEndpoint"]


class CompletionsEndpoint(ChatEndpoint):
    """OpenAI completions."""

    kind = "completions"
    chat = False


ENDPOINT = CompletionsEndpoint()
