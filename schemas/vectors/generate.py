"""Write the test vectors of ``schemas/CANONICAL.md`` (run from the repository root):

    PYTHONPATH=$PWD python schemas/vectors/generate.py

Each file is a JSON array of cases, inputs with their expected outputs:

- ``blob.json``: bytes (hex) -> blob digest
- ``canonical.json``: JSON text -> canonical text, or no ``canonical`` when the text must
  be refused (duplicate key, unpaired surrogate, a non-integer number)
- ``leaf.json``: entry object -> canonical text and leaf hash
- ``node.json``: two child hashes -> inner node
- ``root.json``: entries -> leaf hashes, Merkle root and every audit path, for 0, 1, 2,
  3, 5 and 8 leaves
- ``header.json``: header object -> canonical text and bundle digest
- ``proof.json``: an ``evstore prove`` object and a trusted digest -> holds or not
- ``registration.json``: a ``bundle.json`` object -> verifies or not

``tests/test_vectors.py`` checks that the package reproduces every expected output and
``schemas/reference/verify.mjs --vectors`` that the independent verifier does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from blake3 import blake3

from evidencestore._canonical import pretty
from evidencestore.bundle import make_manifest, seal
from evidencestore.merkle import inclusion_proof, stored_inclusion_proof, stored_leaf_hashes
from evidencestore.models import Descriptor, Entry

HERE = Path(__file__).resolve().parent
CREATED = "2026-12-05T00:00:00Z"
OCTET = "application/octet-stream"


def digest_of(data: bytes) -> str:
    return "blake3:" + blake3(data).hexdigest()


def entry(i: int, **extra: Any) -> Entry:
    data = f"file {i}\n".encode()
    return Entry(
        path=extra.pop("path", f"f{i:02d}.txt"),
        descriptor=Descriptor(
            digest=digest_of(data), size=len(data), media_type=extra.pop("media_type", OCTET)
        ),
        location=extra.pop("location", "repo"),
        **extra,
    )


def as_json(value: Any) -> Any:
    return json.loads(pretty(value))


def blobs() -> list[dict[str, Any]]:
    inputs = {
        "empty": b"",
        "one byte": b"\x00",
        "text": b"hello world\n",
        "1025 bytes (two chunks)": bytes(range(256)) * 4 + b"x",
        "3 KiB + 1 (a tree of chunks)": bytes(i % 251 for i in range(3 * 1024 + 1)),
    }
    return [{"name": k, "input_hex": v.hex(), "digest": digest_of(v), "size": len(v)}
            for k, v in inputs.items()]  # fmt: skip


CANONICAL = [
    ("whitespace and key order", ' { "b" : 1 , "a" : [ 1 , { "d" : true , "c" : null } ] } '),
    (
        "keys by code point, not UTF-16",
        '{"\\uff61": 1, "\\ud83d\\ude00": 2, "b": 3, "B": 4, "": 5}',
    ),
    ("escapes", '"\\u0000\\b\\t\\n\\f\\r\\u001f\\"\\\\\\/\\u007f\\u2028\\u00e9\\ud83d\\ude00"'),
    ("non-ASCII written as UTF-8", '{"caf\\u00e9": "\u65e5\u672c"}'),
    ("integers", "[0, -0, 7, -7, 9007199254740993, 18446744073709551616]"),
    ("nested empty", '{"a": {}, "b": [], "c": ""}'),
    ("duplicate key", '{"a": 1, "a": 2}'),
    ("unpaired high surrogate", '"\\ud800"'),
    ("unpaired low surrogate", '"\\udc00x"'),
    ("fraction", '{"size": 1.0}'),
    ("exponent", '{"size": 1e3}'),
]


def canonicals() -> list[dict[str, Any]]:
    from evidencestore._canonical import canonical, loads_json

    out = []
    for name, text in CANONICAL:
        case: dict[str, Any] = {"name": name, "input": text}
        try:
            value = loads_json(text.encode())
            if "." in text or "e3" in text:
                raise ValueError("a non-integer number")
            case["canonical"] = canonical(value).decode()
        except Exception:
            pass  # refused: no "canonical"
        out.append(case)
    return out


def leaves() -> list[dict[str, Any]]:
    cases = {
        "default media type omitted": as_json(entry(1)),
        "media type": as_json(entry(2, media_type="video/mp4", location="store")),
        "role and annotations": as_json(entry(3, role="config", annotations={"b": "2", "a": "1"})),
        "non-ASCII path": as_json(entry(4, path="r\u00e9sum\u00e9/\u65e5\u672c \U0001f600.md")),
    }
    legacy = as_json(entry(5))
    legacy["descriptor"]["media_type"] = OCTET  # as 0c7be23 wrote it: hashed as it stands
    cases["default written explicitly (0c7be23): hashed as it stands"] = legacy
    out = []
    for name, value in cases.items():
        from evidencestore._canonical import canonical

        out.append({"name": name, "entry": value, "canonical": canonical(value).decode(),
                    "leaf": stored_leaf_hashes([value])[0].hex()})  # fmt: skip
    return out


def nodes() -> list[dict[str, Any]]:
    a, b = blake3(b"a").digest(), blake3(b"b").digest()
    return [{"left": x.hex(), "right": y.hex(), "node": blake3(b"\x01" + x + y).hexdigest()}
            for x, y in ((a, b), (b, a), (a, a))]  # fmt: skip


def roots() -> list[dict[str, Any]]:
    out = []
    for n in (0, 1, 2, 3, 5, 8):
        manifest = make_manifest(f"tree-{n}", [entry(i) for i in range(n)], created=CREATED,
                                 producer="vectors")  # fmt: skip
        reg = seal(manifest)
        out.append({
            "entries": [as_json(e) for e in manifest.entries],
            "leaves": [h.hex() for h in stored_leaf_hashes([as_json(e) for e in manifest.entries])],
            "root": reg.root.removeprefix("blake3:"),
            "audit_paths": [[d.removeprefix("blake3:") for d in inclusion_proof(manifest, e.path).audit_path]
                            for e in manifest.entries],
        })  # fmt: skip
    return out


def headers() -> list[dict[str, Any]]:
    from evidencestore._canonical import canonical
    from evidencestore.merkle import stored_bundle_digest

    root = "blake3:" + blake3(b"root").hexdigest()
    metas = {
        "plain metadata": {"created": CREATED, "producer": "evidencestore 0.1.0"},
        "references and annotations": {"created": CREATED, "producer": "p",
                                       "references": ["PR-118"], "annotations": {"gpu": "H200"}},
        "empty references written (hashed as they stand)": {"created": CREATED, "producer": "p",
                                                             "references": []},
    }  # fmt: skip
    out = []
    for name, meta in metas.items():
        header = {"metadata": meta, "name": "bundle", "root": root, "schema_version": 1}
        manifest = {"name": "bundle", "metadata": meta, "entries": []}
        out.append({"name": name, "header": header, "canonical": canonical(header).decode(),
                    "digest": stored_bundle_digest(manifest, root)})  # fmt: skip
    return out


def proofs() -> list[dict[str, Any]]:
    manifest = make_manifest("proved", [entry(i) for i in range(5)], created=CREATED,
                             producer="vectors")  # fmt: skip
    trusted = seal(manifest).digest
    out: list[dict[str, Any]] = []
    for e in manifest.entries:
        out.append({"name": f"entry {e.path}", "proof": as_json(inclusion_proof(manifest, e.path)),
                    "trusted": trusted, "valid": True})  # fmt: skip
    base = as_json(inclusion_proof(manifest, manifest.entries[2].path))
    bad: dict[str, Any] = {
        "untrusted digest": ({}, "blake3:" + "0" * 64),
        "entry changed": ({"entry": {**base["entry"], "path": "f99.txt"}}, trusted),
        "default written into the entry": (
            {"entry": {**base["entry"], "descriptor": {**base["entry"]["descriptor"],
                                                       "media_type": OCTET}}}, trusted),
        "wrong index": ({"leaf_index": 3}, trusted),
        "path too long": ({"audit_path": [*base["audit_path"], base["root"]]}, trusted),
        "metadata changed": ({"metadata": {**base["metadata"], "producer": "x"}}, trusted),
    }  # fmt: skip
    for name, (change, anchor) in bad.items():
        out.append({"name": name, "proof": {**base, **change}, "trusted": anchor, "valid": False})
    # a legacy registration: its proof carries the default as it stands, and holds
    legacy = json.loads(pretty(manifest))
    legacy["entries"][1]["descriptor"]["media_type"] = OCTET
    lp = stored_inclusion_proof(legacy, legacy["entries"][1]["path"])
    out.append({"name": "legacy entry with its default written", "proof": lp,
                "trusted": lp["bundle_digest"], "valid": True})  # fmt: skip
    return out


def registrations() -> list[dict[str, Any]]:
    from evidencestore.merkle import stored_bundle_digest

    manifest = make_manifest("registered", [entry(i) for i in range(3)], created=CREATED,
                             producer="vectors", references=("PR-1",))  # fmt: skip
    good = as_json(seal(manifest))
    legacy = json.loads(json.dumps(good))
    legacy["manifest"]["entries"][0]["descriptor"]["media_type"] = OCTET
    leaves = stored_leaf_hashes(legacy["manifest"]["entries"])
    from evidencestore.merkle import merkle_root

    legacy["root"] = "blake3:" + merkle_root(leaves).hex()
    legacy["digest"] = stored_bundle_digest(legacy["manifest"], legacy["root"])
    dropped = json.loads(json.dumps(legacy))
    del dropped["manifest"]["entries"][0]["descriptor"]["media_type"]
    dropped["root"] = legacy["root"]  # a verifier that drops defaults would accept this
    return [
        {"name": "as written now", "registration": good, "valid": True},
        {"name": "default written explicitly (0c7be23)", "registration": legacy, "valid": True},
        {"name": "legacy digest over a document without the default", "registration": dropped,
         "valid": False},
    ]  # fmt: skip


def generate(out: Path = HERE) -> dict[str, bytes]:
    files = {
        "blob.json": blobs(), "canonical.json": canonicals(), "leaf.json": leaves(),
        "node.json": nodes(), "root.json": roots(), "header.json": headers(),
        "proof.json": proofs(), "registration.json": registrations(),
    }  # fmt: skip
    return {
        k: json.dumps(v, indent=1, ensure_ascii=False).encode() + b"\n" for k, v in files.items()
    }


if __name__ == "__main__":
    for name, data in generate().items():
        (HERE / name).write_bytes(data)
    sys.exit(0)
