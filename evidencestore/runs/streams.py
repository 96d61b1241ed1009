"""Streamed LLM outputs: server-sent events read back from the stored stream, decoded
into a completion (text, token ids, logprobs, finish reason), checked against the request,
and timed by the arrival of each event at the socket.

The runner does no parsing while a response streams: it keeps the raw bytes (stored by
digest) and, per chunk read from the socket, ``(monotonic ns, bytes received so far)``.
Afterwards :func:`examine` splits the stored stream into SSE events (WHATWG rules: lines
end in CRLF, CR or LF; ``data:`` lines joined; a blank line dispatches), and each event
takes the arrival time of the chunk that completed it. So an event's time is when its
last byte was read, before any parsing, and a chunk carrying several events gives them
all its time.

Failure classes: ``stream-error`` for an ``event: error`` or a JSON ``error`` object in
the stream; ``incomplete`` for a stream closed without ``data: [DONE]`` or without a
``finish_reason``; ``invalid-response`` for an event that is not the JSON expected, or
more output tokens than the request's ``max_tokens``.

Channels (chat): ``content`` (what a user sees), ``reasoning`` (``reasoning_content``
or ``reasoning`` deltas) and ``tool_calls`` (each call's name and argument fragments) are
kept apart in the completion; TTFT is the first token of any channel, with the first
visible (``content``) token's time beside it.

Token accounting, per event, in this order: the token ids the server returned with it
(``token_ids``, or logprob tokens written ``token_id:<n>``, as vLLM's
``return_tokens_as_token_ids`` gives), else its logprob entries; else the stream's usage:
continuous usage (``completion_tokens`` in every chunk, vLLM's
``continuous_usage_stats``) gives each event's count as the difference, a final usage
only the total; else the workload's tokenizer pinned by digest counts each channel's
text (``tokenizer.py``, applied by the judge). ``output_tokens`` is that count, and
``output_tokens_from`` its source (``token_ids``, ``logprobs``, ``continuous-usage``,
``usage``, ``tokenizer``); with none of them it is None, never the number of events. Where only the total is known, each content event
counts 1 in ``event_tokens`` (a marker: the per-event split is unknown) and the per-token
metrics use the total.

Memory: an event is decoded from a view of the stream, never copied; in an event longer
than :data:`LONG` a text longer than ``LONG`` is kept as the stream's bytes (a
:class:`Text` part), not decoded: written without escapes, once checked to be UTF-8
(then its bytes are exactly its JSON encoding); with escapes, once checked to decode a
piece at a time, and decoded again piece by piece as it is stored. Deltas are not
joined. So a 100 MB event is held once, as the stream, until its completion is stored
(``judge.store_completion``); :attr:`StreamOutcome.completion` decodes the texts only
when asked for. Anything such an event holds that the plain decoding would refuse goes
to the plain decoding, so values and error messages are those of the plain decoding.
"""

from __future__ import annotations

import bisect
import codecs
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ..models import Model
from .models import EventTimes, Failure, RequestSpec

__all__ = [
    "COMPLETION_MEDIA_TYPE",
    "LONG",
    "Channel",
    "Completion",
    "SseEvent",
    "StreamMetrics",
    "StreamOutcome",
    "Text",
    "event_gaps",
    "event_times",
    "examine",
    "inter_token_latencies",
    "sse_events",
    "stream_metrics",
    "token_times",
]

COMPLETION_MEDIA_TYPE = "application/vnd.evidencestore.completion+json"
_LINE = re.compile(rb"([^\r\n]*)(\r\n|\r|\n)")
_MAX_EVENTS = 4_000_000
_TOKEN_ID = re.compile(r"token_id:[0-9]{1,12}")
#: An event longer than this has its long texts kept as their bytes (see module doc).
LONG = 1 << 16
_BACKSLASH = re.compile(rb"\\")
_PIECE = 1 << 20

#: Where a request's output token count came from (``"events"``: records made before
#: per-token accounting, which counted content events when the server gave no usage).
TokenSource = Literal["token_ids", "logprobs", "continuous-usage", "usage", "tokenizer", "events"]
ChannelName = Literal["content", "reasoning", "tool_calls"]
CHANNELS: tuple[ChannelName, ...] = ("reasoning", "content", "tool_calls")


class Channel(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One non-visible output channel of a chat completion (``reasoning``,
    ``tool_calls``): its text, and how many of the completion's tokens it holds (None
    when the events gave no per-event token count)."""

    name: ChannelName
    text: str
    tokens: int | None = None


class Completion(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One LLM output as evidence: its text, the token ids and logprobs the server gave
    (None when it gave none), the finish reason and the output token count."""

    kind: Literal["evidencestore/completion"] = "evidencestore/completion"
    text: str
    token_ids: tuple[int, ...] | None = None
    tokens: tuple[str, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    finish_reason: str | None = None
    output_tokens: int | None = None
    channels: tuple[Channel, ...] = ()
    #: ``token_ids`` (all channels, in order) split into runs: (channel, count).
    segments: tuple[tuple[ChannelName, int], ...] = ()

    def channel_text(self, name: ChannelName) -> str:
        """The text of channel ``name`` (``content`` is :attr:`text`)."""
        if name == "content":
            return self.text
        return next((c.text for c in self.channels if c.name == name), "")

    def channel_at(self, position: int) -> tuple[ChannelName, int]:
        """The channel of token ``position`` and its index within that channel."""
        seen: dict[str, int] = {}
        at = 0
        for name, count in self.segments:
            if position < at + count:
                return name, seen.get(name, 0) + position - at
            seen[name] = seen.get(name, 0) + count
            at += count
        return "content", position - sum(c for n, c in self.segments if n != "content")


class _Escaped:
    """A long JSON string with escapes as the stream holds it (``raw``, quotes
    included), and the offsets in it (quotes left out) where it is cut into pieces that
    decode on their own: never inside an escape, between the two escapes of a surrogate
    pair, or inside a UTF-8 sequence."""

    __slots__ = ("cuts", "raw")

    def __init__(self, raw: msgspec.Raw, cuts: Sequence[int]) -> None:
        self.raw, self.cuts = raw, tuple(cuts)

    def __len__(self) -> int:
        return len(self.raw)

    def pieces(self) -> Iterator[str]:
        """The string decoded, one piece at a time."""
        inner = memoryview(self.raw)[1:-1]
        for a, b in itertools.pairwise((0, *self.cuts, len(inner))):
            piece = bytearray(b'"')
            piece += inner[a:b]
            piece += b'"'
            yield msgspec.json.decode(piece, type=str)


class Text:
    """One channel's text as it arrived: its decoded pieces (``str``, not joined) and,
    for a long JSON string, that string as the stream holds it (a view, quotes
    included): written without escapes, a ``msgspec.Raw`` checked to be valid UTF-8
    without control characters, so exactly the bytes of its JSON encoding; with
    escapes, checked to decode, and decoded again a piece at a time when it is encoded.
    ``str(text)`` decodes it all."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[str | msgspec.Raw | _Escaped] = ()) -> None:
        self.parts: tuple[str | msgspec.Raw | _Escaped, ...] = tuple(parts)

    def __str__(self) -> str:
        return "".join(
            p
            if isinstance(p, str)
            else msgspec.json.decode(p.raw, type=str)
            if isinstance(p, _Escaped)
            else str(memoryview(p)[1:-1], "utf-8")
            for p in self.parts
        )

    def __bool__(self) -> bool:
        return any(len(p) > (0 if isinstance(p, str) else 2) for p in self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Text) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"Text({self.parts!r})"

    def encoded(self, piece: int = _PIECE) -> Iterator[bytes | memoryview]:
        """The JSON encoding of the text, quotes left out, piece by piece: a decoded
        piece encoded ``piece`` characters at a time (JSON escapes each character on its
        own, so the pieces are the bytes of ``msgspec.json.encode(str(text))``), a
        string without escapes as views of ``piece`` bytes."""
        for part in self.parts:
            if isinstance(part, msgspec.Raw):
                view = memoryview(part)[1:-1]
                for at in range(0, len(view), piece):
                    yield view[at : at + piece]
                continue
            for decoded in part.pieces() if isinstance(part, _Escaped) else (part,):
                for at in range(0, len(decoded), piece):
                    yield msgspec.json.encode(decoded[at : at + piece])[1:-1]


@dataclass(frozen=True)
class SseEvent:
    """One dispatched server-sent event: its name, data, and the byte offset just past
    the blank line that dispatched it."""

    name: str
    data: bytes
    end: int


def sse_events(data: bytes | bytearray) -> list[SseEvent]:
    """The events of an SSE stream (a trailing event without its blank line is dropped,
    as a client would drop it)."""
    return [SseEvent(name, bytes(value), end) for name, value, end in _sse_views(data)]


def _sse_views(data: bytes | bytearray) -> list[tuple[str, memoryview | bytes, int]]:
    """:func:`sse_events` without copies: each event's data is a view of ``data``
    (joined only when it spans several ``data:`` lines), so an event as large as the
    stream is never held twice."""
    view = memoryview(data)
    out: list[tuple[str, memoryview | bytes, int]] = []
    name = ""
    lines: list[memoryview] = []
    for m in _LINE.finditer(data):
        start, end = m.span(1)
        if start == end:
            if lines:
                value = lines[0] if len(lines) == 1 else b"\n".join(lines)
                out.append((name or "message", value, m.end()))
                if len(out) > _MAX_EVENTS:
                    break
            name, lines = "", []
            continue
        if data[start] == _COLON:
            continue
        colon = data.find(b":", start, end)
        field_end = end if colon < 0 else colon
        at = end if colon < 0 else colon + 1
        if at < end and data[at] == _SPACE:
            at += 1
        if field_end - start == 4 and data.startswith(b"data", start):
            lines.append(view[at:end])
        elif field_end - start == 5 and data.startswith(b"event", start):
            name = bytes(view[at:end]).decode("utf-8", "replace")
    return out


_COLON, _SPACE, _QUOTE = ord(":"), ord(" "), ord('"')
_DONE = re.compile(rb"[ \t\n\r\x0b\x0c]*\[DONE\][ \t\n\r\x0b\x0c]*\Z")  # bytes.strip()'s


class _S(msgspec.Struct, forbid_unknown_fields=False):
    pass


class _Function(_S):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(_S):
    index: int = 0
    function: _Function | None = None


class _Delta(_S):
    content: str | None = None
    role: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Message(_Delta):
    pass


class _Choice(_S):
    index: int = 0
    delta: _Delta | None = None
    message: _Message | None = None
    text: str | None = None
    finish_reason: str | None = None
    logprobs: Any = None
    token_ids: list[int] | None = None


class _Usage(_S):
    completion_tokens: int | None = None
    completion_tokens_details: Any = None


class _Chunk(_S):
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: _Usage | None = None
    error: Any = None


# The same shapes with their texts left as JSON (views of the event), for a long event.
_NULL = msgspec.Raw(b"null")


class _RawDelta(_S):
    content: msgspec.Raw = _NULL
    role: str | None = None
    reasoning_content: msgspec.Raw = _NULL
    reasoning: msgspec.Raw = _NULL
    tool_calls: list[_ToolCall] | None = None


class _RawChoice(_S):
    index: int = 0
    delta: _RawDelta | None = None
    message: _RawDelta | None = None
    text: msgspec.Raw = _NULL
    finish_reason: str | None = None
    logprobs: Any = None
    token_ids: list[int] | None = None


class _RawChunk(_S):
    choices: list[_RawChoice] = msgspec.field(default_factory=list)
    usage: _Usage | None = None
    error: Any = None


class _NotPlain(Exception):
    """A text the long-event decoding does not take as it is: the plain decoding decides."""


_Piece = str | msgspec.Raw | _Escaped
#: A choice's texts: content, reasoning_content, reasoning (its holder's) and text.
_Texts = tuple[_Piece | None, _Piece | None, _Piece | None, _Piece | None]


def _text(raw: msgspec.Raw) -> _Piece | None:
    """A text field of a long event: None, the string decoded or, long, the string kept
    as it is (:class:`Text`) once it is checked: without escapes, that its bytes are
    UTF-8 (the decoder that skipped it checked the rest: quotes, no control character);
    with escapes, that it decodes piece by piece. :class:`_NotPlain` for anything that
    is not a string or null."""
    view = memoryview(raw)
    if len(view) > LONG and view[0] == _QUOTE:
        inner = view[1:-1]
        try:
            if _BACKSLASH.search(view) is None:
                decoder = codecs.getincrementaldecoder("utf-8")()
                for at in range(0, len(inner), _PIECE):
                    decoder.decode(inner[at : at + _PIECE])
                decoder.decode(b"", True)
                return raw
            cuts = _cuts(inner)
            if cuts is not None:
                escaped = _Escaped(raw, cuts)
                for _ in escaped.pieces():
                    pass
                return escaped
        except (UnicodeDecodeError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _NotPlain from exc
    try:
        value: str | None = msgspec.json.decode(view, type=str | None)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _NotPlain from exc
    return value


#: Where a JSON string may be cut: after six bytes without a backslash (no escape, the
#: longest being ``\uXXXX``, runs over the cut), before a byte that starts a character.
_CUT = re.compile(rb"[^\\]{6}(?![\x80-\xbf])")


def _cuts(inner: memoryview) -> list[int] | None:
    """Offsets about :data:`_PIECE` bytes apart where the JSON string ``inner`` (its
    quotes left out) can be cut (:data:`_CUT`); None where no place within
    :data:`LONG` bytes of one will do (a string of escapes: decoded whole)."""
    cuts: list[int] = []
    at = _PIECE
    while at < len(inner):
        m = _CUT.search(inner, at - 6)
        if m is None or m.end() - at > LONG:
            return None
        if m.end() >= len(inner):
            break
        cuts.append(m.end())
        at = m.end() + _PIECE
    return cuts


def _raw_texts(choice: _RawChoice, chat: bool, stream: bool) -> _Texts:
    holder = (choice.delta if stream else choice.message) if chat else None
    text = _text(choice.text)
    for other in (choice.message, choice.delta):
        if other is not None and other is not holder:  # checked as the plain decoding does
            for raw in (other.content, other.reasoning_content, other.reasoning):
                _text(raw)
    if holder is None:
        return None, None, None, text
    return _text(holder.content), _text(holder.reasoning_content), _text(holder.reasoning), text


def _plain_texts(choice: _Choice, chat: bool, stream: bool) -> _Texts:
    holder = (choice.delta if stream else choice.message) if chat else None
    if holder is None:
        return None, None, None, choice.text
    return holder.content, holder.reasoning_content, holder.reasoning, choice.text


def _decode(
    data: memoryview | bytes, chat: bool, stream: bool
) -> tuple[_Chunk | _RawChunk, _Texts]:
    """One event decoded, with its first choice's texts: an event longer than
    :data:`LONG` with its long texts kept as their bytes (module doc), when every text
    in it is a string or null; otherwise, and for anything the long decoding refuses,
    exactly as the plain decoding gives it (its value or its error)."""
    if len(data) > LONG:
        try:
            raw = msgspec.json.decode(data, type=_RawChunk)
            texts = [_raw_texts(c, chat, stream) for c in raw.choices]
        except (msgspec.DecodeError, msgspec.ValidationError, _NotPlain, RecursionError):
            pass  # the plain decoding below says what is wrong, in its own words
        else:
            return raw, texts[0] if texts else (None, None, None, None)
    chunk = msgspec.json.decode(data, type=_Chunk)
    first = chunk.choices[0] if chunk.choices else None
    return chunk, _plain_texts(first, chat, stream) if first else (None, None, None, None)


def _logprobs(value: Any) -> tuple[list[str], list[float]]:
    """Tokens and logprobs from chat (``content: [{token, logprob}]``) or completions
    (``tokens``, ``token_logprobs``) shapes."""
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, list):
            toks = [str(c.get("token", "")) for c in content if isinstance(c, dict)]
            lps = [float(c.get("logprob") or 0.0) for c in content if isinstance(c, dict)]
            return toks, lps
        toks_v, lps_v = value.get("tokens"), value.get("token_logprobs")
        if isinstance(toks_v, list) and isinstance(lps_v, list):
            return [str(t) for t in toks_v], [float(v or 0.0) for v in lps_v]
    return [], []


@dataclass(frozen=True)
class StreamOutcome:
    """What a streamed (or plain JSON) LLM output says once read back: its failure, if
    any, each event's arrival (monotonic ns) and token count, the decoded completion
    (stored: :attr:`completion`) as ``head`` (the completion with every text empty) and
    ``texts`` (each channel's :class:`Text`, undecoded: it may hold views of the stream),
    the output tokens with their source (see the module doc), whether it was streamed,
    and the arrival of its first visible (``content``) token."""

    failure: Failure | None
    message: str | None
    event_ns: tuple[int, ...]
    event_tokens: tuple[int, ...]
    head: Completion
    output_tokens: int | None
    output_tokens_from: TokenSource | None
    streamed: bool = True
    visible_ns: int | None = None
    texts: Mapping[ChannelName, Text] = field(default_factory=dict)

    @property
    def completion(self) -> Completion:
        """The completion with its texts decoded (anew at each access: a huge text is
        held only by whoever asked for it)."""
        head, texts = self.head, self.texts
        return msgspec.structs.replace(
            head,
            text=str(texts.get("content", "")),
            channels=tuple(
                msgspec.structs.replace(c, text=str(texts.get(c.name, ""))) for c in head.channels
            ),
        )


def _arrival(times: Sequence[int], ends: Sequence[int], end: int) -> int:
    """The time of the first chunk whose bytes reach offset ``end`` (``ends``: each
    chunk's cumulative end, ascending)."""
    i = bisect.bisect_left(ends, end)
    return times[min(i, len(times) - 1)]


def _pieces(
    choice: _Choice | _RawChoice, texts: _Texts, chat: bool, stream: bool
) -> dict[ChannelName, _Piece]:
    """The text each channel got from one choice of one event (``texts``: its own)."""
    content, reasoning_content, reasoning, text = texts
    if not chat:
        return {"content": text} if text else {}
    holder = choice.delta if stream else choice.message
    if holder is None:
        return {}
    out: dict[ChannelName, _Piece] = {}
    reasoned = reasoning_content or reasoning
    if reasoned:
        out["reasoning"] = reasoned
    if content:
        out["content"] = content
    if holder.tool_calls:
        calls = "".join(
            f"[{c.index}]{c.function.name or ''}{c.function.arguments or ''}"
            if c.function.name
            else (c.function.arguments or "")
            for c in holder.tool_calls
            if c.function is not None
        )
        if calls:
            out["tool_calls"] = calls
    return out


def examine(
    data: bytes | bytearray,
    chunk_ns: Sequence[int],
    chunk_end: Sequence[int],
    request: RequestSpec,
    *,
    stream: bool,
    chat: bool,
) -> StreamOutcome:
    """Decode a stored LLM output (see module doc); chunk ``i`` of the stream arrived at
    ``chunk_ns[i]`` with ``chunk_end[i]`` bytes received so far."""
    texts: dict[ChannelName, list[_Piece]] = {c: [] for c in CHANNELS}
    counts: dict[ChannelName, int] = dict.fromkeys(CHANNELS, 0)
    segments: list[tuple[ChannelName, int]] = []
    ids: list[int] = []
    toks: list[str] = []
    lps: list[float] = []
    have_ids = have_lps = False
    per_event: TokenSource | None = None  # the best per-event source seen
    continuous: list[int | None] = []  # each event's cumulative usage, None where absent
    finish: str | None = None
    usage: int | None = None
    event_ns: list[int] = []
    event_tokens: list[int] = []
    visible_ns: int | None = None
    failure: Failure | None = None
    message: str | None = None
    done = False
    events: list[tuple[str, memoryview | bytes, int]]
    if stream:
        events = _sse_views(data)
    else:
        events = [("message", memoryview(data), len(data))] if data and not data.isspace() else []
    for n, (ev_name, ev_data, ev_end) in enumerate(events):
        when = _arrival(chunk_ns, chunk_end, ev_end) if chunk_ns else 0
        if ev_name == "error":
            failure = "stream-error"
            message = f"event {n}: the server sent an error event: {bytes(ev_data[:300])!r}"
            break
        if stream and _DONE.match(ev_data):
            done = True
            event_ns.append(when)
            event_tokens.append(0)
            continuous.append(None)
            break
        try:
            chunk, first_texts = _decode(ev_data, chat, stream)
        except RecursionError:
            failure, message = "invalid-response", f"event {n}: nested too deeply"
            break
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            failure, message = "invalid-response", f"event {n} is not the JSON expected: {exc}"
            break
        if chunk.error is not None:
            failure = "stream-error"
            message = f"event {n}: the server reported an error: {str(chunk.error)[:300]}"
            break
        cumulative = None
        if chunk.usage is not None and chunk.usage.completion_tokens is not None:
            usage = cumulative = chunk.usage.completion_tokens
        k = 0
        got: dict[ChannelName, _Piece] = {}
        for choice in chunk.choices[:1]:
            got = _pieces(choice, first_texts, chat, stream)
            if choice.token_ids is not None:
                have_ids = True
                ids.extend(choice.token_ids)
                k = len(choice.token_ids)
                per_event = "token_ids"
            t, lp = _logprobs(choice.logprobs)
            if lp:
                have_lps = True
                toks.extend(t)
                lps.extend(lp)
                if not k:
                    k = len(lp)
                    per_event = per_event or "logprobs"
                if choice.token_ids is None and t and all(_TOKEN_ID.fullmatch(x) for x in t):
                    # vLLM's return_tokens_as_token_ids: "token_id:123"
                    have_ids = True
                    ids.extend(int(x.partition(":")[2]) for x in t)
                    per_event = "token_ids"
            if choice.finish_reason is not None:
                finish = choice.finish_reason
        for name, piece in got.items():
            texts[name].append(piece)
        if k > 0:
            last = segments[-1][0] if segments else "content"
            first = next((c for c in CHANNELS if c in got), last)
            counts[first] += k
            if segments and segments[-1][0] == first:
                segments[-1] = (first, segments[-1][1] + k)
            else:
                segments.append((first, k))
        elif got:
            k = -1  # content without a per-event count: settled below
        if "content" in got and visible_ns is None:
            visible_ns = when
        event_ns.append(when)
        event_tokens.append(k)
        continuous.append(cumulative if got else None)
    source: TokenSource | None
    if per_event is not None:
        source = per_event
        counted = sum(max(0, k) for k in event_tokens)
        output: int | None = counted
    elif usage is not None:
        # Continuous usage: every content event carries its running total.
        running = [c for c, k in zip(continuous, event_tokens, strict=True) if k < 0]
        if running and all(c is not None for c in running):
            source = "continuous-usage"
            prev = 0
            for i, (c, k) in enumerate(zip(continuous, event_tokens, strict=True)):
                if k < 0 and c is not None:
                    event_tokens[i], prev = max(0, c - prev), c
        else:
            source = "usage"
        output = usage
    else:
        source, output = None, None
    event_tokens = [1 if k < 0 else k for k in event_tokens]
    if failure is None:
        if stream and not done:
            failure = "incomplete"
            message = f"the stream closed without `data: [DONE]` after {len(events)} events"
        elif finish is None:
            failure = "incomplete"
            message = "the output has no finish_reason"
        elif request.max_tokens is not None and output is not None and output > request.max_tokens:
            failure = "invalid-response"
            message = f"{output} output tokens, more than max_tokens = {request.max_tokens}"
    head = Completion(
        text="",
        token_ids=tuple(ids) if have_ids else None,
        tokens=tuple(toks) if have_lps else None,
        logprobs=tuple(lps) if have_lps else None,
        finish_reason=finish,
        output_tokens=output,
        channels=tuple(
            Channel(name=c, text="", tokens=counts[c] if per_event else None)
            for c in CHANNELS
            if c != "content" and texts[c]
        ),
        segments=tuple(segments) if len({c for c, _ in segments}) > 1 else (),
    )
    return StreamOutcome(
        failure=failure,
        message=message,
        event_ns=tuple(event_ns),
        event_tokens=tuple(event_tokens),
        head=head,
        output_tokens=output,
        output_tokens_from=source,
        streamed=stream,
        visible_ns=visible_ns,
        texts={c: Text(parts) for c, parts in texts.items() if parts},
    )


def event_times(outcome: StreamOutcome, sent_ns: int) -> EventTimes:
    """The record's compact form of an outcome's event arrivals (µs after ``sent_ns``)."""
    return EventTimes(
        offsets_us=tuple(max(0, (t - sent_ns) // 1000) for t in outcome.event_ns),
        tokens=outcome.event_tokens,
    )


@dataclass(frozen=True)
class StreamMetrics:
    """TTFT (any channel and visible), per-token ITL and TPOT of one request, in seconds
    (None where undefined)."""

    ttft_s: float | None
    itl_s: float | None
    tpot_s: float | None
    ttft_visible_s: float | None = None


def stream_metrics(
    event_ns: Sequence[int],
    tokens: Sequence[int],
    start_ns: int,
    output_tokens: int | None,
    *,
    end_ns: int | None = None,
    visible_ns: int | None = None,
    streamed: bool = True,
) -> StreamMetrics:
    """The definitions of the request record (``RequestRecord``): TTFT to the first
    event carrying a token of any channel (``ttft_visible_s``: of ``content``); ITL per
    token, ``(e2e - ttft) / (output_tokens - 1)`` with e2e ending at ``end_ns`` (the last
    byte; AIPerf's ITL, vLLM's TPOT); TPOT from the first to the last token-carrying
    event over ``output_tokens - 1``. Nothing for an output that was not streamed: it
    has no first token time."""
    if not streamed:
        return StreamMetrics(None, None, None)
    content = [t for t, k in zip(event_ns, tokens, strict=False) if k > 0]
    if not content:
        return StreamMetrics(None, None, None)
    first, last = content[0], content[-1]
    n = output_tokens if output_tokens and output_tokens > 1 else None
    end = end_ns if end_ns is not None else last
    return StreamMetrics(
        ttft_s=(first - start_ns) / 1e9,
        itl_s=(end - first) / 1e9 / (n - 1) if n else None,
        tpot_s=(last - first) / 1e9 / (n - 1) if n else None,
        ttft_visible_s=(visible_ns - start_ns) / 1e9 if visible_ns is not None else None,
    )


def event_gaps(events: EventTimes) -> list[float]:
    """The gaps between successive token-carrying events, in seconds (vLLM's ITL list:
    one value per event, whatever its token count; kept apart from the per-token ITL)."""
    t = [off / 1e6 for off, k in zip(events.offsets_us, events.tokens, strict=False) if k > 0]
    return [b - a for a, b in itertools.pairwise(t)]


def token_times(events: EventTimes) -> list[float]:
    """Each output token's arrival in seconds after the send, from a record's events:
    the first content event's tokens at its arrival, each later event's tokens spread
    evenly over its gap (the last at the event's arrival)."""
    out: list[float] = []
    prev: float | None = None
    for off, k in zip(events.offsets_us, events.tokens, strict=False):
        if k <= 0:
            continue
        t = off / 1e6
        if prev is None:
            out.extend([t] * k)
        else:
            gap = (t - prev) / k
            out.extend(prev + gap * (j + 1) for j in range(k))
        prev = t
    return out


def inter_token_latencies(events: EventTimes) -> list[float]:
    """Per-token ITL values (each later event's gap spread over its tokens)."""
    times = token_times(events)
    first_k = next((k for k in events.tokens if k > 0), 0)
    return (
        [b - a for a, b in zip(times[first_k - 1 :], times[first_k:], strict=False)]
        if (first_k)
        else []
    )
