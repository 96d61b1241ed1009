"""``evstore`` inspection subcommands: show, status, diff, checkout.

Each reads registrations; none changes the repository. ``status`` reports presence
(by size, one query per store) and says so: re-reading content is ``verify``'s job.
``checkout`` writes every file verified: each copy is hashed while it is written and
only renamed into place once its digest matched, so a corrupt source never leaves a
file in the target directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ._common import (
    BUNDLES,
    EXIT_FAILED,
    EXIT_OK,
    ROOT,
    Commands,
    arg,
    json_flag,
    repo_root,
    switch,
)

if TYPE_CHECKING:
    from ..config import Repository
    from ..models import Entry, Registration


def _registration(root: Repository, name: str) -> Registration:
    from ..inventory import find_registration

    return find_registration(root, name)


def _entry_row(entry: Entry, available: bool | None) -> dict[str, Any]:
    d = entry.descriptor
    row: dict[str, Any] = {
        "path": entry.path,
        "location": entry.location,
        "size": d.size,
        "digest": d.digest,
        "media_type": d.media_type,
    }
    if entry.role is not None:
        row["role"] = entry.role
    if available is not None:
        row["available"] = available
    return row


# -- show --------------------------------------------------------------------------
def _cmd_show(args: argparse.Namespace) -> int:
    from ..verify.render import plural

    root = repo_root(args)
    reg = _registration(root, args.bundle)
    store = root.local_store()
    m = reg.manifest
    rows = [
        _entry_row(e, None if e.location == "repo" else store.size(e.descriptor.digest) is not None)
        for e in m.entries
    ]
    if args.json:
        doc = {
            "name": m.name,
            "digest": reg.digest,
            "root": reg.root,
            "metadata": {
                "created": m.metadata.created,
                "producer": m.metadata.producer,
                "references": list(m.metadata.references),
                "annotations": dict(m.metadata.annotations),
            },
            "entries": rows,
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
        return EXIT_OK
    out = sys.stdout
    md = m.metadata
    out.write(f"bundle {m.name}\n  digest   {reg.digest}\n  root     {reg.root}\n")
    out.write(f"  created  {md.created} by {md.producer}\n")
    for ref in md.references:
        out.write(f"  ref      {ref}\n")
    for key, value in sorted(md.annotations.items()):
        out.write(f"  meta     {key}={value}\n")
    total = sum(e.descriptor.size for e in m.entries)
    out.write(f"  {plural(len(m.entries), 'entry', 'entries')}, {total} bytes:\n")
    for row in rows:
        where = "git  " if row["location"] == "repo" else "store"
        note = "" if row.get("available", True) else "  (not in the local store)"
        role = f"  [{row['role']}]" if "role" in row else ""
        out.write(f"    {where}  {row['size']:>12}  {row['digest']}  {row['path']}{role}{note}\n")
    return EXIT_OK


# -- status ------------------------------------------------------------------------
def _cmd_status(args: argparse.Namespace) -> int:
    from ..inventory import load_inventory
    from ..verify.render import plural

    root = repo_root(args)
    inventory = load_inventory(root)
    names = args.bundles or inventory.names
    regs = {n: _registration(root, n) for n in names}
    store = root.local_store()
    remote_missing: dict[str, set[str]] = {}
    if args.remote:
        from ..remotes import verify_remote

        for name, findings in verify_remote(root, regs, args.remote).items():
            remote_missing[name] = {f.path for f in findings if f.path}
    rows = []
    for name, reg in regs.items():
        stored = [e for e in reg.manifest.entries if e.location == "store"]
        local = [e.path for e in stored if store.size(e.descriptor.digest) != e.descriptor.size]
        row: dict[str, Any] = {
            "name": name,
            "store_entries": len(stored),
            "missing_locally": local,
            "missing_locally_bytes": sum(e.descriptor.size for e in stored if e.path in set(local)),
        }
        if args.remote:
            row["remote"] = args.remote
            row["missing_on_remote"] = sorted(remote_missing.get(name, set()))
        rows.append(row)
    if args.json:
        print(json.dumps({"bundles": rows, "presence_only": True}, indent=2, sort_keys=True))
        return EXIT_OK
    for row in rows:
        parts = [f"{row['name']}: {plural(row['store_entries'], 'store entry', 'store entries')}"]
        if row["missing_locally"]:
            parts.append(
                f"{len(row['missing_locally'])} not in the local store "
                f"({row['missing_locally_bytes']} bytes)"
            )
        else:
            parts.append("all in the local store")
        if args.remote:
            missing = row["missing_on_remote"]
            parts.append(
                f"{len(missing)} not on remote {args.remote!r}"
                if missing
                else f"all on remote {args.remote!r}"
            )
        print(", ".join(parts))
        for path in row["missing_locally"]:
            print(f"  not local: {path}")
        for path in row.get("missing_on_remote", []):
            print(f"  not on {args.remote}: {path}")
    print("(presence by size only; `evstore verify` re-hashes content)", file=sys.stderr)
    return EXIT_OK


# -- diff --------------------------------------------------------------------------
def _cmd_diff(args: argparse.Namespace) -> int:
    root = repo_root(args)
    a, b = _registration(root, args.a), _registration(root, args.b)
    old = {e.path: e for e in a.manifest.entries}
    new = {e.path: e for e in b.manifest.entries}
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = sorted(p for p in set(old) & set(new) if old[p] != new[p])
    meta = []
    ma, mb = a.manifest.metadata, b.manifest.metadata
    for field in ("created", "producer", "references", "annotations"):
        va, vb = getattr(ma, field), getattr(mb, field)
        if va != vb:
            meta.append({"field": field, "a": _plain(va), "b": _plain(vb)})
    if args.json:
        doc = {
            "a": {"name": a.manifest.name, "digest": a.digest},
            "b": {"name": b.manifest.name, "digest": b.digest},
            "added": [_entry_row(new[p], None) for p in added],
            "removed": [_entry_row(old[p], None) for p in removed],
            "changed": [
                {"path": p, "a": _entry_row(old[p], None), "b": _entry_row(new[p], None)}
                for p in changed
            ],
            "metadata": meta,
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for p in added:
            d = new[p].descriptor
            print(f"+ {p}  ({d.size} bytes, {d.digest}, {new[p].location})")
        for p in removed:
            d = old[p].descriptor
            print(f"- {p}  ({d.size} bytes, {d.digest}, {old[p].location})")
        for p in changed:
            da, db = old[p].descriptor, new[p].descriptor
            what = []
            if da.digest != db.digest:
                what.append(f"{da.digest} -> {db.digest}")
            if da.size != db.size:
                what.append(f"{da.size} -> {db.size} bytes")
            if old[p].location != new[p].location:
                what.append(f"{old[p].location} -> {new[p].location}")
            if not what:
                what.append("annotations, role or media type")
            print(f"~ {p}  ({'; '.join(what)})")
        for m in meta:
            print(f"~ metadata.{m['field']}: {m['a']!r} -> {m['b']!r}")
        print(
            f"{len(added)} added, {len(removed)} removed, {len(changed)} changed "
            f"({a.manifest.name} {a.digest} -> {b.manifest.name} {b.digest})"
        )
    same = not (added or removed or changed or meta)
    return EXIT_OK if same else EXIT_FAILED


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# -- checkout ----------------------------------------------------------------------
def _cmd_checkout(args: argparse.Namespace) -> int:
    from ..inventory import EVIDENCE_DIR
    from ..remotes import export_blob, repository_store
    from ..storage import VerifyingReader
    from ..verify.render import plural

    root = repo_root(args)
    reg = _registration(root, args.bundle)
    target = Path(args.dir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not args.force:
        raise ConfigError(f"{target}: exists and is not an empty directory (use --force)")
    store = repository_store(root, args.remote)
    bdir = root / EVIDENCE_DIR / reg.manifest.name
    total = 0
    for entry in reg.manifest.entries:
        d = entry.descriptor
        dest = target / entry.path
        if entry.location == "store":
            store.fetch(d.digest, d.size)
            export_blob(store.cache, d.digest, dest, d.size)
        else:
            src = bdir / entry.path
            try:
                raw = open(src, "rb")  # noqa: SIM115 - closed by the reader
            except OSError as exc:
                raise ConfigError(f"{src}: cannot read: {exc.strerror}") from exc
            where = f"{EVIDENCE_DIR}/{reg.manifest.name}/{entry.path}"
            with VerifyingReader(raw, d.digest, size=d.size, where=where) as reader:
                _write_atomically(reader, dest)
        total += d.size
    print(
        f"checked out {reg.manifest.name} ({reg.digest}): "
        f"{plural(len(reg.manifest.entries), 'file')}, {total} bytes, verified, into {target}"
    )
    return EXIT_OK


def _write_atomically(reader: Any, dest: Path) -> None:
    """Copy ``reader`` (which verifies at EOF) to ``dest``; nothing appears on failure."""
    from .._atomic import replacing
    from ..errors import StorageError

    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replacing(dest) as out:
            while chunk := reader.read(8 << 20):
                out.write(chunk)
    except OSError as exc:
        raise StorageError(f"{dest}: cannot write: {exc.strerror or exc}") from exc


def register(commands: Commands) -> None:
    """Register this group's subcommands."""
    it = json_flag("it")
    commands.add(
        "show",
        _cmd_show,
        [arg("bundle", metavar="BUNDLE", help=_BUNDLE_OR_FILE), it, ROOT],
    )
    commands.add(
        "status",
        _cmd_status,
        [
            BUNDLES,
            arg("--remote", metavar="NAME", help="also say what this remote lacks"),
            it,
            ROOT,
        ],
    )
    commands.add(
        "diff",
        _cmd_diff,
        [
            arg("a", metavar="A", help=_BUNDLE_OR_FILE),
            arg("b", metavar="B", help=_BUNDLE_OR_FILE),
            it,
            ROOT,
        ],
    )
    commands.add(
        "checkout",
        _cmd_checkout,
        [
            arg("bundle", metavar="BUNDLE"),
            arg("dir", metavar="DIR"),
            arg("--remote", metavar="NAME", help="fetch store entries only from this remote"),
            switch("--force", help="write into a non-empty directory"),
            ROOT,
        ],
    )


_BUNDLE_OR_FILE = "a bundle name or a bundle.json file"
