"""Property-based fuzzing of what evidencestore reads: registrations (``bundle.json``),
inclusion proofs, expectation files and ``evstore.toml``; and nesting bombs.

For every mutated or arbitrary input the library raises only ``EvidenceStoreError``
subclasses (or returns findings), the CLI exits 0, 1 or 2 without "internal error" or a
traceback, and a mutated registration or proof is never reported ok unless it decodes
to exactly the original. The budget is small in ``make test`` (200 examples per
property); ``HYPOTHESIS_PROFILE=campaign`` runs 5,000.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.remotes import run
from helpers.repos import add_bundle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidencestore._canonical import decode, loads_json, pretty
from evidencestore.config import load_config
from evidencestore.errors import ConfigError, EvidenceStoreError, ManifestError, MediaError
from evidencestore.inventory import decode_registration, load_registration, registration_path
from evidencestore.media.expectations import load_expectations
from evidencestore.merkle import inclusion_proof
from evidencestore.models import InclusionProof, Registration
from evidencestore.remotes import local_store
from evidencestore.verify import verify_repository

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    "database": None,  # leave nothing behind in the working tree
}
settings.register_profile("evstore-small", max_examples=200, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("campaign", max_examples=5000, **_COMMON)  # type: ignore[arg-type]
_PROFILE = settings.get_profile(
    "campaign" if os.environ.get("HYPOTHESIS_PROFILE") == "campaign" else "evstore-small"
)
# The CLI properties run a whole command per example: a quarter of the budget.
_CLI_PROFILE = settings(_PROFILE, max_examples=max(50, _PROFILE.max_examples // 4))


def _cli_clean(code: int, out: str, err: str) -> None:
    text = out + err
    assert code in (0, 1, 2), text
    assert "internal error" not in text, text
    assert "Traceback" not in text, text


# -- mutations of bytes and of JSON documents ------------------------------------------

_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def _byte_mutation(draw: st.DrawFn, data: bytes) -> bytes:
    """Flip bits, overwrite, insert, delete or truncate at drawn offsets."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        else:
            del out[at:]
    return bytes(out)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


@st.composite
def _json_mutation(draw: st.DrawFn, data: bytes) -> bytes:
    """Replace, delete or add a value somewhere in the document, or duplicate a key."""
    doc = json.loads(data)
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths))
    kind = draw(st.sampled_from(["replace", "delete", "add", "duplicate"]))
    if kind == "duplicate":
        # A repeated key, first or last: a reader taking either value must not be fooled.
        key_paths = [p for p in paths if p and isinstance(p[-1], str)]
        if key_paths:
            key = draw(st.sampled_from(key_paths))[-1]
            encoded = json.dumps(key)
            text = data.decode()
            if f"{encoded}:" in text:
                value = json.dumps(draw(_JSON))
                extra = f"{encoded}: {value}, "
                i = text.index(f"{encoded}:")
                if draw(st.booleans()):
                    return (text[:i] + extra + text[i:]).encode()
                end = text.index(",", i) if "," in text[i:] else len(text)
                return (text[:end] + ", " + extra.rstrip(", ") + text[end:]).encode()
    if not path:
        return json.dumps(draw(_JSON)).encode()
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "add" and isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(_JSON)
    else:
        parent[last] = draw(_JSON)
    return json.dumps(doc, indent=draw(st.sampled_from([None, 2]))).encode()


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    return _byte_mutation(data) | _json_mutation(data)


# -- a repository to mutate ------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_victim_repo() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="evstore-fuzz-"))
    root = base / "repo"
    add_bundle(root, "good", {"a.txt": b"alpha\n"})
    add_bundle(root, "victim", {"x.txt": b"x" * 10, "sub/y.txt": b"why\n", "z.bin": b"\0" * 3})
    try:
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def victim(shared_victim_repo: Path) -> Iterator[tuple[Path, bytes, Registration]]:
    path = registration_path(shared_victim_repo, "victim")
    original = path.read_bytes()
    yield path, original, load_registration(path)
    path.write_bytes(original)


@_PROFILE
@given(data=st.data())
def test_mutated_registration_never_passes_library(
    shared_victim_repo: Path, victim: tuple[Path, bytes, Registration], data: st.DataObject
) -> None:
    path, original, reg = victim
    mutated = data.draw(_mutations(original))
    try:
        decoded = decode_registration(mutated, str(path))
    except ManifestError as exc:
        assert str(exc).startswith(str(path))
        decoded = None
    path.write_bytes(mutated)
    try:
        report = verify_repository(shared_victim_repo, store=local_store(shared_victim_repo))
    except EvidenceStoreError:
        return
    if report.ok:
        assert decoded == reg, "a mutated registration verified"


@_CLI_PROFILE
@given(data=st.data())
def test_mutated_registration_cli(
    shared_victim_repo: Path, victim: tuple[Path, bytes, Registration], data: st.DataObject
) -> None:
    path, original, reg = victim
    mutated = data.draw(_mutations(original))
    path.write_bytes(mutated)
    report = shared_victim_repo.parent / "report.json"
    code, out, err = run("verify", "--root", str(shared_victim_repo), "--json", str(report))
    _cli_clean(code, out, err)
    assert json.loads(report.read_bytes())["ok"] is (code == 0)
    if code == 0:
        assert decode(mutated, Registration) == reg


@pytest.fixture(scope="module")
def proof_file(shared_victim_repo: Path) -> Iterator[tuple[Path, bytes, InclusionProof]]:
    reg = load_registration(registration_path(shared_victim_repo, "victim"))
    proof = inclusion_proof(reg.manifest, "sub/y.txt")
    path = shared_victim_repo.parent / "proof.json"
    data = pretty(proof)
    path.write_bytes(data)
    yield path, data, proof


@_CLI_PROFILE
@given(data=st.data())
def test_mutated_proof_cli(
    shared_victim_repo: Path, proof_file: tuple[Path, bytes, InclusionProof], data: st.DataObject
) -> None:
    path, original, proof = proof_file
    mutated = data.draw(_mutations(original))
    target = path.with_name("mutated-proof.json")
    target.write_bytes(mutated)
    code, out, err = run(
        "check-proof", str(target), "--bundle", "victim", "--root", str(shared_victim_repo)
    )
    _cli_clean(code, out, err)
    if code == 0:
        assert decode(mutated, InclusionProof) == proof, "a mutated proof was accepted"


def test_original_proof_and_registration_pass(
    shared_victim_repo: Path, proof_file: tuple[Path, bytes, InclusionProof]
) -> None:
    """The baseline of the properties above: unmutated inputs are accepted."""
    code, out, err = run(
        "check-proof", str(proof_file[0]), "--bundle", "victim", "--root", str(shared_victim_repo)
    )
    assert code == 0, out + err
    code, out, err = run("verify", "--root", str(shared_victim_repo))
    assert code == 0, out + err


# -- expectations and evstore.toml ----------------------------------------------------

_EXPECT_TOML = b"""[video]
width = 64
height = 64
pix_fmt = "yuv420p"
frame_rate = "30000/1001"
frames = 15

[audio]
sample_rate = 48000
channels = 2
duration = 0.5
"""

_TOML_VALUE = st.recursive(
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3),
    max_leaves=6,
)


def _toml_line(key: str, value: Any) -> str:
    return f"{json.dumps(key)} = {_toml(value)}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


@st.composite
def _toml_mutation(draw: st.DrawFn, data: bytes) -> bytes:
    lines = data.decode().splitlines()
    kind = draw(st.sampled_from(["bytes", "replace", "add", "drop"]))
    if kind == "bytes":
        return draw(_byte_mutation(data))
    at = draw(st.integers(0, len(lines) - 1))
    line = _toml_line(draw(st.text(min_size=1, max_size=12)), draw(_TOML_VALUE))
    if kind == "replace":
        key = lines[at].split("=")[0].strip() if "=" in lines[at] else "k"
        lines[at] = f"{key} = {_toml(draw(_TOML_VALUE))}"
    elif kind == "add":
        lines.insert(at, line)
    else:
        del lines[at]
    return "\n".join(lines).encode()


@_PROFILE
@given(
    data=st.one_of(
        _toml_mutation(_EXPECT_TOML).map(lambda b: (".toml", b)),
        st.dictionaries(st.sampled_from(["video", "audio", "x"]), _JSON, max_size=3).map(
            lambda d: (".json", json.dumps(d).encode())
        ),
        st.builds(
            lambda v, a: (".json", json.dumps({"video": v, "audio": a}).encode()),
            st.dictionaries(
                st.sampled_from(
                    ["width", "height", "pix_fmt", "frame_rate", "frames", "duration", "start"]
                ),
                _JSON_LEAF,
            ),
            st.dictionaries(
                st.sampled_from(["sample_rate", "channels", "samples", "duration", "start"]),
                _JSON_LEAF,
            ),
        ),
        st.binary(max_size=64).map(lambda b: (".json", b)),
    )
)
def test_expectation_files_load_or_refuse_cleanly(tmp_path: Path, data: tuple[str, bytes]) -> None:
    suffix, raw = data
    path = tmp_path / f"expect{suffix}"
    path.write_bytes(raw)
    try:
        load_expectations(path)
    except MediaError as exc:
        assert str(exc).startswith(str(path)) or "expect" in str(exc)


_CONFIG_TOML = b"""[store]
path = ".evstore"

[bundle]
max_git_file_size = 1000000

[remotes.mirror]
url = "/srv/mirror"
attempts = 3
timeout = 10.0
min_rate = 1000.0

[remotes.web]
url = "https://example.invalid/store"
read_only = true
options = { headers = { "X-Trace" = "1" } }
"""


@_PROFILE
@given(raw=_toml_mutation(_CONFIG_TOML))
def test_evstore_toml_loads_or_refuses_cleanly(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "evstore.toml").write_bytes(raw)
    try:
        load_config(tmp_path)
    except ConfigError as exc:
        assert "evstore.toml" in str(exc) or "remote" in str(exc)


# -- nesting bombs (issue 8, item 9) -----------------------------------------------------

_DEPTH = 100_000


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bomb.json", '{"video": ' + "[" * _DEPTH + "]" * _DEPTH + "}"),
        ("bomb.json", '{"video": ' + '{"a": ' * _DEPTH + "1" + "}" * _DEPTH + "}"),
        ("bomb.toml", "video = " + "[" * _DEPTH + "]" * _DEPTH),
        ("bomb.toml", "video = " + "{a = " * 5000 + "1" + "}" * 5000),
        ("deep.json", '{"video": ' + "[" * 200 + "]" * 200 + "}"),  # below the stack limit
    ],
)
def test_expectation_nesting_bomb_is_a_clear_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(MediaError, match=r"nested (too deeply|deeper than 64 levels)") as info:
        load_expectations(path)
    assert str(info.value).startswith(str(path))
    code, out, err = run("media", "check", str(path), "--expect", str(path))
    assert code == 2, out + err
    assert f"{path}: not valid" in err and "nested" in err
    assert "internal error" not in err and "RecursionError" not in err


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * _DEPTH + "]" * _DEPTH,
        "[remotes.web]\nurl = 'http://x'\noptions = " + "{a = " * 3000 + "1" + "}" * 3000,
        "[remotes.web]\nurl = 'http://x'\noptions = " + "{a = " * 80 + "1" + "}" * 80,
    ],
)
def test_config_nesting_bomb_is_a_clear_error(tmp_path: Path, text: str) -> None:
    add_bundle(tmp_path, "b", {"a.txt": b"a"})
    (tmp_path / "evstore.toml").write_text(text)
    with pytest.raises(ConfigError, match="nested") as info:
        load_config(tmp_path)
    assert "evstore.toml: not valid" in str(info.value)
    code, out, err = run("verify", "--root", str(tmp_path), "--remote", "web")
    assert code == 2, out + err
    assert "evstore.toml: not valid" in err and "nested" in err
    assert "internal error" not in err and "RecursionError" not in err


def test_registration_nesting_bomb_is_a_finding(tmp_path: Path) -> None:
    add_bundle(tmp_path, "b", {"a.txt": b"a"})
    path = registration_path(tmp_path, "b")
    path.write_text('{"manifest": ' + "[" * _DEPTH + "]" * _DEPTH + "}")
    # the typed decoder refuses the first array where an object is due
    with pytest.raises(ManifestError, match=r"Expected `object`, got `array` - at `\$\.manifest`"):
        decode_registration(path.read_bytes(), str(path))
    code, out, err = run("verify", "--root", str(tmp_path))
    assert code == 1, out + err
    assert "invalid-registration" in out + err
    assert "internal error" not in out + err
    with pytest.raises(msgspec.DecodeError, match="JSON nested too deeply"):
        loads_json(path.read_bytes())  # untyped records: the depth is the bound


def test_strict_decoder_refuses_what_msgspec_keeps_last() -> None:
    doc = b'{"digest": "blake3:' + b"0" * 64 + b'", "size": 999999, "size": 6}'
    assert msgspec.json.decode(doc)["size"] == 6  # the silent behaviour refused here
    with pytest.raises(msgspec.DecodeError, match=r"duplicate key 'size' at \$\.size"):
        decode(doc, dict[str, Any])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("t.json", '{"perceptual_max": ' + "[" * _DEPTH + "]" * _DEPTH + "}"),
        ("t.toml", "perceptual_max = " + "[" * _DEPTH + "]" * _DEPTH),
    ],
)
def test_thresholds_nesting_bomb_is_a_clear_error(tmp_path: Path, name: str, text: str) -> None:
    from evidencestore.media.thresholds import load_thresholds

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(MediaError, match="nested too deeply") as info:
        load_thresholds(path)
    assert str(info.value).startswith(str(path))
