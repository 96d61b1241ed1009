"""Walking a bundle's directory the way verification judges it: every file below it,
where each directory on an entry's way resolves, and where the bundle directory itself
resolves. Symlinks are resolved only where one is met; a loop or a target outside the
repository is reported by kind, never raised."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Sequence

from ..paths import readlink, resolve, within

__all__ = [
    "dir_state",
    "holds_only",
    "readlink",
    "real_bundle_dir",
    "sole_parent",
    "walk_files",
    "walk_order",
]


def holds_only(bdir_s: str, paths: Sequence[str], reserved: str) -> bool:
    """Whether the plain bundle directory ``bdir_s`` (with a trailing separator) lists
    exactly ``reserved`` and the names ``paths`` lead to, every directory on their way
    a plain directory (not a symlink).

    One ``listdir`` a directory, compared as a set: nothing is done name by name, so a
    bundle of many files costs a few C-level calls. True means the directory holds
    nothing that :func:`walk_files` would report, provided that every one of ``paths``
    then hashes as a regular file (a name that is a directory or a symlink is listed
    here like a file); False only means that the full walk decides.
    """
    tree = _expected_tree(paths, reserved)
    if tree is None:
        return False
    for rel, names in tree.items():
        where = bdir_s + rel
        try:
            if rel and not stat.S_ISDIR(os.lstat(where).st_mode):
                return False  # a symlink (or a file) where a directory was expected
            listed = os.listdir(where)
        except OSError:
            return False
        if len(listed) != len(names) or not names.issuperset(listed):
            return False
    return True


def sole_parent(paths: Sequence[str]) -> str | None:
    """The one directory (relative, ``""`` for the top) that directly holds every one
    of ``paths``, found in a few C-level calls; None when they lie in several."""
    if not paths:
        return ""
    lo, hi = min(paths), max(paths)
    # every path sorts between lo and hi, so it shares their common directory
    common = os.path.commonprefix([lo, hi]).rpartition("/")[0]  # noqa: RUF071 (cut at a "/")
    depth = common.count("/") + 1 if common else 0
    # each path holds at least ``depth`` separators; no more in all means none deeper
    # (the join adds one between each two paths)
    deeper = "/".join(paths).count("/") != len(paths) * (depth + 1) - 1
    return None if deeper else common


def _expected_tree(paths: Sequence[str], reserved: str) -> dict[str, set[str]] | None:
    """The names each directory (relative, ``""`` for the top) should list, or None
    when ``paths`` are not plain relative names."""
    common = sole_parent(paths)
    tree: dict[str, set[str]] = {}
    if common is not None:  # the common case: one directory holds every file
        cut = len(common) + 1 if common else 0
        tree[common] = set([p[cut:] for p in paths] if cut else paths)
    else:
        for path in paths:
            parent, _, name = path.rpartition("/")
            tree.setdefault(parent, set()).add(name)
        common = ""
    for parent in list(tree):
        while parent:
            up, _, name = parent.rpartition("/")
            tree.setdefault(up, set()).add(name)
            parent = up
    tree.setdefault("", set()).add(reserved)
    if any("" in names for names in tree.values()):
        return None  # an empty segment: not a plain relative path
    return tree


def walk_files(
    base: str,
    real_dir: str,
    real_root: str,
    out: list[tuple[str, str, str]],
    prefix: str = "",
    above: frozenset[str] = frozenset(),
) -> list[tuple[str, str, str]]:
    """Append ``(relative path, kind, detail)`` to ``out`` for every non-directory below
    ``base``, in no particular order (:func:`walk_order` sorts them as a walk would).

    ``kind`` is ``file``; ``loop`` for a symlink loop (``detail``: its link text); or
    ``outside-dir`` for a symlink to a directory outside the repository (``detail``: its
    target). A symlink to a directory inside the repository is walked like a directory,
    unless it leads back to a directory above it (a ``loop``). What each item is comes
    from its ``scandir`` entry; only a symlink is resolved.
    """
    try:
        with os.scandir(base) as it:
            items = list(it)
    except OSError:
        return out
    above = above | {real_dir}
    append = out.append
    for item in items:
        if item.is_dir(follow_symlinks=False):
            walk_files(
                item.path,
                f"{real_dir}{os.sep}{item.name}",
                real_root,
                out,
                f"{prefix}{item.name}/",
                above,
            )
        elif not item.is_symlink():
            append((prefix + item.name, "file", ""))
        else:
            rel = prefix + item.name
            real = resolve(item.path)
            if real is None:
                append((rel, "loop", readlink(item.path)))
            elif not os.path.isdir(real):
                append((rel, "file", ""))
            elif not within(real, real_root):
                append((rel, "outside-dir", real))
            elif real in above:
                append((rel, "loop", readlink(item.path)))
            else:
                walk_files(item.path, real, real_root, out, f"{rel}/", above)
    return out


def walk_order(item: tuple[str, str, str]) -> list[str]:
    """The sort key that orders :func:`walk_files` items as a sorted walk visits them."""
    # a depth-first walk with each directory's names sorted visits paths in the order
    # of their lists of segments
    return item[0].split("/")


def real_bundle_dir(
    bdir: str, name: str, real_evidence: str | None, plain_dirs: Collection[str] | None
) -> str:
    """Where a bundle directory resolves: one ``lstat`` (none when ``plain_dirs``, the
    names a listing saw as plain directories, holds it) unless it is a symlink."""
    if plain_dirs is not None and name in plain_dirs:
        plain = True
    else:
        try:
            plain = not stat.S_ISLNK(os.lstat(bdir).st_mode)
        except OSError:
            plain = True
    if plain and real_evidence is not None:
        return f"{real_evidence}{os.sep}{name}"
    real = resolve(bdir)
    # load_inventory reports a loop; nothing here can be read
    return f"{bdir} (a symlink loop)" if real is None else real


def dir_state(
    bdir: str, plain_bdir: bool, parent: str, real_root: str, cache: dict[str, str]
) -> str:
    """``inside``, ``outside`` or ``loop``: where a bundle subdirectory resolves (cached).

    A chain of plain directories (``lstat``, no symlink on the way) is inside without
    resolving; only a symlink on the way is resolved.
    """
    state = cache.get(parent)
    if state is not None:
        return state
    state = "inside" if plain_bdir else ""
    if plain_bdir:
        at = -1
        while True:
            at = parent.find("/", at + 1)
            prefix = parent if at < 0 else parent[:at]
            known = cache.get(prefix)
            if known is None:
                try:
                    mode = os.lstat(f"{bdir}{os.sep}{prefix}").st_mode
                except OSError:
                    break  # missing: nothing below it is read through a link
                if stat.S_ISLNK(mode):
                    state = ""
                    break
                if not stat.S_ISDIR(mode):
                    break
            elif known != "inside":
                state = ""
                break
            if at < 0:
                break
    if not state:
        real = resolve(f"{bdir}{os.sep}{parent}")
        state = "loop" if real is None else "inside" if within(real, real_root) else "outside"
    cache[parent] = state
    return state
