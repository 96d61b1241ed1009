"""Canonical bytes are a function of values (issue 32), and what 0c7be23 registered
still verifies bit for bit.

Every hashed struct is built by several paths (constructor with fresh equal objects,
defaults passed or left out, decoding its canonical bytes and a document with every
default written, ``msgspec.convert``, ``structs.replace``, pickling) and every path
must give the same value and the same bytes. The legacy corpus (written by 0c7be23:
defaults written explicitly wherever a media type was built at run time) must
recompute to its recorded digests and proofs.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evidencestore
from evidencestore._canonical import (
    canonical,
    canonical_defaults,
    decode,
    decode_exact,
    identity_defaults,
    pretty,
)
from evidencestore.cli import main
from evidencestore.inventory import decode_registration
from evidencestore.merkle import bundle_digest, entries_root, registration_hashes
from evidencestore.models import (
    BundleHeader,
    BundleManifest,
    Descriptor,
    Entry,
    InclusionProof,
    Metadata,
    Registration,
)
from evidencestore.records import KINDS, decode_record, record_kind
from tests.helpers.corpus import LEGACY, generated_corpus, registrations

D = "blake3:" + "0" * 64
OCTET = "application/octet-stream"


def fresh(value: Any) -> Any:
    """An equal value built of new objects: strings joined at run time, floats and
    integers re-parsed, containers and structs rebuilt through their constructors."""
    if isinstance(value, msgspec.Struct):
        fields = {f: fresh(getattr(value, f)) for f in value.__struct_fields__}
        return type(value)(**fields)
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return float(repr(value))
    if isinstance(value, int):
        return int(str(value))
    if isinstance(value, tuple):
        return tuple(fresh(v) for v in value)
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, dict):
        return {fresh(k): fresh(v) for k, v in value.items()}
    return value


def explicit(value: Any) -> Any:
    """The builtins of ``value`` with every field written, defaults included."""
    if isinstance(value, msgspec.Struct):
        config = value.__struct_config__
        out = {f: explicit(getattr(value, f)) for f in value.__struct_fields__}
        if config.tag_field is not None:
            out[config.tag_field] = config.tag
        return out
    if isinstance(value, tuple | list):
        return [explicit(v) for v in value]
    if isinstance(value, dict):
        return {k: explicit(v) for k, v in value.items()}
    return value


def without_defaults(value: msgspec.Struct) -> msgspec.Struct:
    """``value`` rebuilt with every field at its default left to the constructor."""
    kwargs: dict[str, Any] = {}
    fields = value.__struct_fields__
    defaults = dict(zip(fields[len(fields) - len(value.__struct_defaults__) :],
                        value.__struct_defaults__, strict=True))  # fmt: skip
    for name in fields:
        v = getattr(value, name)
        if isinstance(v, msgspec.Struct):
            v = without_defaults(v)
        if name in defaults and _is_default(v, defaults[name]):
            continue
        kwargs[name] = v
    return type(value)(**kwargs)


def _is_default(value: Any, default: Any) -> bool:
    if type(default).__name__ == "Factory":
        default = default.factory()
    try:
        return bool(value == default) and type(value) is type(default)
    except Exception:  # pragma: no cover - values compare
        return False


def paths(value: msgspec.Struct) -> dict[str, msgspec.Struct]:
    """``value`` built by every path a value can take."""
    t = type(value)
    full = explicit(value)
    first = value.__struct_fields__[0]
    return {
        "constructor, fresh objects": fresh(value),
        "constructor, defaults left out": without_defaults(value),
        "decoded canonical bytes": decode(canonical(value), t),
        "decoded, every default written": decode(msgspec.json.encode(full), t),
        "decoded pretty": decode(pretty(value), t),
        "converted": msgspec.convert(full, t),
        "replaced": msgspec.structs.replace(value, **{first: fresh(getattr(value, first))}),
        "unpickled": pickle.loads(pickle.dumps(value)),
    }


def assert_one_encoding(value: msgspec.Struct) -> None:
    want, want_pretty = canonical(value), pretty(value)
    for how, other in paths(value).items():
        assert other == value, how
        assert canonical(other) == want, how
        assert pretty(other) == want_pretty, how


def test_a_default_given_or_left_out_is_one_encoding() -> None:
    a = Descriptor(digest=D, size=1)
    b = Descriptor(digest=D, size=1, media_type="".join(["application/", "octet-stream"]))
    assert a == b
    assert canonical(a) == canonical(b) == f'{{"digest":"{D}","size":1}}'.encode()
    read = decode(f'{{"digest":"{D}","media_type":"{OCTET}","size":1}}'.encode(), Descriptor)
    assert canonical(read) == canonical(a)
    # a value that differs is still written
    c = Descriptor(digest=D, size=1, media_type="".join(["text/", "plain"]))
    assert b'"media_type":"text/plain"' in canonical(c)


def test_an_int_equal_to_a_float_default_is_that_default() -> None:
    from evidencestore.runs.models import RunSection

    assert canonical(RunSection(timeout=600)) == canonical(RunSection())  # type: ignore[arg-type]
    assert b'"timeout":300' in canonical(RunSection(timeout=300.0))


_name = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=12).filter(
    lambda s: s[0].isalnum()
)
_text = st.text(max_size=8).filter(lambda s: not any(0xD800 <= ord(c) < 0xE000 for c in s))
_media = st.sampled_from([OCTET, "text/plain", "video/mp4", "application/json", "image/png"])
_annotations = st.dictionaries(_text, _text, max_size=3)


@st.composite
def descriptors(draw: st.DrawFn) -> Descriptor:
    return Descriptor(
        digest="blake3:" + draw(st.binary(min_size=32, max_size=32)).hex(),
        size=draw(st.integers(0, 2**70)),
        media_type=draw(_media),
        annotations=draw(_annotations),
    )


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    return Entry(
        path=draw(st.lists(_name, min_size=1, max_size=3).map("/".join)),
        descriptor=draw(descriptors()),
        location=draw(st.sampled_from(["repo", "store"])),
        role=draw(st.none() | _text),
        annotations=draw(_annotations),
    )


@st.composite
def manifests(draw: st.DrawFn) -> BundleManifest:
    es = draw(st.lists(entries(), max_size=5, unique_by=lambda e: e.path))
    return BundleManifest(
        name=draw(_name),
        metadata=Metadata(
            created="2026-12-05T09:00:00Z",
            producer=draw(_text),
            references=tuple(draw(st.lists(_text, max_size=2))),
            annotations=draw(_annotations),
        ),
        entries=tuple(sorted(es, key=lambda e: e.path)),
    )


@settings(max_examples=60, deadline=None)
@given(manifests())
def test_every_hashed_struct_has_one_encoding_by_every_path(manifest: BundleManifest) -> None:
    root = entries_root(manifest.entries)
    header = BundleHeader(
        schema_version=1, name=manifest.name, metadata=manifest.metadata, root=root
    )
    reg = Registration(digest=bundle_digest(manifest, root), root=root, manifest=manifest)
    for value in (manifest, manifest.metadata, header, reg, *manifest.entries):
        assert_one_encoding(value)
    for e in manifest.entries:
        assert_one_encoding(e.descriptor)
    if manifest.entries:
        from evidencestore.merkle import inclusion_proof

        proof = inclusion_proof(manifest, manifest.entries[-1].path)
        assert isinstance(proof, InclusionProof)
        assert_one_encoding(proof)
    # the digest is a function of the value: any path gives the same digest
    for how, other in paths(manifest).items():
        assert bundle_digest(other) == reg.digest, how  # type: ignore[arg-type]


def _all_structs() -> list[type[msgspec.Struct]]:
    import importlib
    import pkgutil

    for m in pkgutil.walk_packages(evidencestore.__path__, "evidencestore."):
        if "__main__" not in m.name:
            try:
                importlib.import_module(m.name)
            except ImportError:  # an optional extra that is not installed
                continue
    seen: list[type[msgspec.Struct]] = []
    stack = [msgspec.Struct]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen and sub.__module__.startswith("evidencestore."):
                seen.append(sub)
            stack.append(sub)
    return seen


def test_every_struct_that_needs_it_omits_defaults_by_value() -> None:
    """A new field with a default msgspec compares by identity, in a struct without the
    hook, would bring back digests that depend on how a string was built."""
    needing = [c for c in _all_structs() if identity_defaults(c)]
    assert {c.__name__ for c in needing} >= {"Descriptor", "Workload", "Protocol"}
    missing = [f"{c.__module__}.{c.__qualname__}" for c in needing
               if getattr(c, "__post_init__", None) is not canonical_defaults]  # fmt: skip
    assert missing == []
    for cls in needing:
        for name, default in identity_defaults(cls):
            try:
                value = cls(**{name: fresh(default)})
            except TypeError:  # required fields: checked through the records below
                continue
            assert getattr(value, name) is default, (cls, name)


# -- stored documents --------------------------------------------------------------
def _records(repo: Path) -> list[Path]:
    """The repo entries that are records of a kind evidencestore knows."""
    out = []
    for reg in registrations(repo.parent):
        for e in json.loads(reg.read_bytes())["manifest"]["entries"]:
            path = reg.parent / e["path"]
            json_entry = e["location"] == "repo" and path.suffix == ".json"
            if json_entry and record_kind(path.read_bytes()) is not None:
                out.append(path)
    return sorted(out)


def _json(value: Any) -> Any:
    return msgspec.json.decode(canonical(value))


def _differences(
    stored: Any, value: Any, where: str = "$", added: bool = False
) -> list[tuple[str, Any]]:
    """Keys the stored document holds and the value's encoding does not (with their
    stored values); anything else that differs is a failure, except, with ``added``,
    fields a later version added (a record's fields are all written)."""
    if isinstance(stored, dict):
        assert isinstance(value, dict), where
        missing = set(value) - set(stored)
        assert added or not missing - {"kind"}, (where, missing)  # a tag once omitted
        out: list[tuple[str, Any]] = []
        for k, v in stored.items():
            if k not in value:
                out.append((f"{where}.{k}", v))
            else:
                out.extend(_differences(v, value[k], f"{where}.{k}", added))
        return out
    if isinstance(stored, list):
        assert isinstance(value, list) and len(value) == len(stored), where
        return [d for i, (a, b) in enumerate(zip(stored, value, strict=True)) for d in _differences(a, b, f"{where}[{i}]", added)]  # fmt: skip
    assert stored == value and type(stored) is type(value), where
    return []


def test_legacy_registrations_verify_bit_for_bit_and_differ_only_by_written_defaults() -> None:
    regs = registrations(LEGACY)
    assert len(regs) == 25
    legacy_explicit = 0
    for path in regs:
        data = path.read_bytes()
        reg = decode_registration(data, str(path))
        assert registration_hashes(reg) == (reg.root, reg.digest), path
        stored = msgspec.json.decode(data)["manifest"]
        diff = _differences(stored, _json(reg.manifest))
        # the only difference: a media type equal to the default, written explicitly
        assert all(w.endswith(".descriptor.media_type") and v == OCTET for w, v in diff), diff
        if diff:
            legacy_explicit += 1
            assert "stored_hashes" in reg.__dict__
            # the value alone hashes differently: the digest is the document's
            assert bundle_digest(reg.manifest) != reg.digest
        else:
            assert pretty(reg) == data, path  # exactly its value's encoding
    assert legacy_explicit == 8


def test_a_legacy_registration_with_a_changed_byte_fails() -> None:
    path = LEGACY / "repo/evidence/many-types/bundle.json"
    data = path.read_bytes().replace(b'"media_type": "application/octet-stream"', b'"media_type": "application/octet-streaM"', 1)  # fmt: skip
    assert data != path.read_bytes()
    reg = decode_registration(data, "x")
    assert registration_hashes(reg)[1] != reg.digest
    dropped = re.sub(rb',\s*"media_type": "application/octet-stream"', b"", path.read_bytes(), count=1)  # fmt: skip
    assert dropped != path.read_bytes()
    reg = decode_registration(dropped, "x")
    assert registration_hashes(reg)[1] != reg.digest  # an equal value, another document


class _Members(list[tuple[str, Any]]):
    """A JSON object as its members, in document order."""


def _members(data: bytes) -> Any:
    """A document with its objects as member lists and its numbers as written."""
    return json.loads(data, object_pairs_hook=_Members, parse_int=str, parse_float=str)


def _without_added(stored: Any, again: Any) -> Any:
    """``again`` without the members of fields ``stored`` does not hold (added since)."""
    if isinstance(stored, _Members) and isinstance(again, _Members):
        held = dict(stored)
        return _Members((k, _without_added(held[k], v)) for k, v in again if k in held)
    if isinstance(stored, list) and isinstance(again, list) and len(stored) == len(again):
        return [_without_added(a, b) for a, b in zip(stored, again, strict=True)]
    return again


def test_legacy_records_decode_and_differ_only_by_written_defaults_and_tags() -> None:
    """Records 0c7be23 wrote re-encode to the same bytes, but for the members of fields
    added since (a record writes every field, those at their default too: each is the
    default its absence decodes to); those of 3d0e3f5 (``legacy_records``, before record
    tags and later fields) differ only by what that version did not write. Both are
    stable from their first re-encoding on."""
    files = _records(LEGACY / "repo") + sorted((LEGACY.parent / "legacy_records").glob("*.json"))
    kinds = set()
    for path in files:
        data = path.read_bytes()
        record = decode_record(data, str(path))
        kinds.add(type(record).__name__)
        again = decode_record(pretty(record), str(path))
        assert again == record and pretty(again) == pretty(record)
        diff = _differences(json.loads(data), _json(record), added=True)
        assert all(v == OCTET for _, v in diff), (path, diff)
        if path.is_relative_to(LEGACY):  # 0c7be23's records: the same members again,
            # in the same order, numbers written alike; only later fields are added
            stored = _members(data)
            assert _without_added(stored, _members(pretty(record))) == stored, path
    assert len(kinds) == len(KINDS), kinds


@pytest.fixture(scope="module")
def corpus_now(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_corpus(tmp_path_factory)


def test_everything_written_now_is_exactly_its_value(corpus_now: Path) -> None:
    """Every registration and record the suite writes with every record kind decodes
    and re-encodes to the same bytes, and holds no default."""
    regs = registrations(corpus_now)
    assert len(regs) == 25
    for path in regs:
        data = path.read_bytes()
        reg, exact = decode_exact(data, Registration)
        assert exact and pretty(reg) == data, path
        assert OCTET.encode() not in data, path
        assert registration_hashes(reg) == (reg.root, reg.digest)
    records = _records(corpus_now / "repo")
    kinds = set()
    for path in records:
        data = path.read_bytes()
        record = decode_record(data, str(path))
        kinds.add(type(record).__name__)
        assert pretty(record) == data or canonical(record) == data, path
        assert_one_encoding(record)
    assert kinds >= {"RunRecord", "ComparisonRecord", "CheckReport", "Repeatability",
                     "Adjudication", "Claim", "StatusRecord", "RunVoid", "Withdrawal"}  # fmt: skip


def test_legacy_repository_verifies_proves_and_checks_with_this_code(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(LEGACY / "repo", repo)
    assert main(["-q", "verify", "--root", str(repo)]) == 0
    checked = 0
    for proof in sorted((LEGACY / "proofs").glob("*/*.json")):
        bundle = proof.parent.name
        assert main(["check-proof", str(proof), "--bundle", bundle, "--root", str(repo)]) == 0
        old = json.loads(proof.read_bytes())
        capsysbinary.readouterr()
        assert main(["prove", bundle, old["entry"]["path"], "--root", str(repo)]) == 0
        assert json.loads(capsysbinary.readouterr().out) == old  # the same proof, as stored
        checked += 1
    assert checked == 157
    # negative control: the entry of a legacy proof with its explicit default dropped
    proof = next(p for p in sorted((LEGACY / "proofs/many-types").glob("*.json"))
                 if b"octet-stream" in p.read_bytes())  # fmt: skip
    value = json.loads(proof.read_bytes())
    del value["entry"]["descriptor"]["media_type"]
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(value))
    assert main(["check-proof", str(changed), "--bundle", "many-types", "--root", str(repo)]) == 1


def test_documents_read_from_toml_with_defaults_written_encode_as_without() -> None:
    """A protocol and a workload whose TOML writes defaults (strings, floats, an int for
    a float) are the values of the ones that do not, with the same bytes."""
    from evidencestore.campaign.protocol import parse_protocol
    from evidencestore.runs.workload import parse_workload

    arms = (
        '[[condition]]\nname = "5s"\nworkload = "w.toml"\n'
        '[[arm]]\nname = "base"\nbaseline = true\nruns = 3\n[[arm]]\nname = "fast"\nruns = 3\n'
    )
    plain = parse_protocol(f'name = "c"\n{arms}'.encode(), "plain")
    written = parse_protocol(
        f'name = "c"\naccept = "every-arm"\n[timing]\nmetric = "e2e"\nconfidence = 0.95\n'
        f'min_speedup = 1\nestimator = "welch-log-t"\norder = "any"\n'
        f'[quality]\nnon_repeatable_baseline = "inconclusive"\n'
        f'compare_phases = ["warmup", "measured"]\n{arms}'.encode(),
        "written",
    )
    assert written == plain and canonical(written) == canonical(plain)
    assert_one_encoding(plain)
    request = '[[request]]\nprompt = "p"\nsize = "64x48"\nseconds = 1\nfps = 8\n'
    w_plain = parse_workload(
        f'[endpoint]\nkind = "videos-sync"\npath = "/v"\n{request}'.encode(), "a"
    )
    w_written = parse_workload(
        f'[endpoint]\nkind = "videos-sync"\npath = "/v"\nhealth_path = "/health"\n'
        f"poll_interval = 0.5\n[run]\ntimeout = 600\ncache_ratio = 3.0\n{request}".encode(),
        "b",
    )
    assert w_written == w_plain and canonical(w_written) == canonical(w_plain)
    assert_one_encoding(w_plain)
