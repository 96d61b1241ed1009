"""The evidence repository and its ``evstore.toml``: the local store path, named
remotes and pinned scorer weights.

A root is resolved once, at the entry point: :func:`as_repository` applies the one rule
for a path (the nearest directory at or above it holding ``evstore.toml`` or
``evidence/``; the path itself when none does) and returns a :class:`Repository`, which
everything below is handed instead of a path, so nothing walks up again or re-reads the
configuration. Credentials never live here; backends take them from their usual sources.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypedDict, cast

import msgspec
from msgspec import Meta

from ._canonical import MAX_DEPTH, canonical_defaults, nesting_depth
from .errors import ConfigError, RemoteConfigError
from .models import Descriptor, DigestStr, Model

if TYPE_CHECKING:
    from .storage import LocalBlobStore

__all__ = [
    "CONFIG_NAME",
    "CONFIG_TEMPLATE",
    "CREDENTIAL_OPTIONS",
    "GIT_IGNORED",
    "LOCAL_CONFIG_NAMES",
    "BundleConfig",
    "Config",
    "Initialised",
    "LpipsConfig",
    "RemoteConfig",
    "Repository",
    "StoreConfig",
    "as_repository",
    "find_root",
    "init_repository",
    "load_config",
    "load_config_file",
    "local_store",
    "parse_option",
    "remote_name_problem",
    "require_root",
    "save_config",
    "url_problem",
]

CONFIG_NAME = "evstore.toml"
# Untracked per-user settings merged over evstore.toml, later ones winning (like DVC's
# config.local): remotes survive branch switches. `evstore init` git-ignores both.
LOCAL_CONFIG_NAMES = ("evstore.local.toml", ".evstore/config.toml")

# Option names that would put a secret in evstore.toml; they are refused.
CREDENTIAL_OPTIONS = frozenset(
    {
        "key",
        "secret",
        "token",
        "password",
        "username",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "access_key",
        "secret_key",
        "account_key",
        "sas_token",
        "client_secret",
        "connection_string",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "cookies",
        "proxy_auth",
        "api_key",
        "apikey",
        "x-api-key",
        "private_key",
        "session_token",
    }
)
# A header whose name contains one of these (case-insensitive) carries a secret.
_SECRET_HEADER_PARTS = ("auth", "token", "key", "cookie")
_HEADER_OPTIONS = frozenset({"headers", "header"})
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class StoreConfig(Model, frozen=True):
    """The local blob store."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    path: str = ".evstore"


PositiveInt = Annotated[int, Meta(ge=1)]
Attempts = Annotated[int, Meta(ge=1, le=20)]
NonNegativeFloat = Annotated[float, Meta(ge=0)]
PositiveFloat = Annotated[float, Meta(gt=0)]


class RetrySettings(TypedDict):
    """A remote's retries and deadlines (:class:`RemoteConfig`), as keywords: what
    ``storage.RetryPolicy`` and ``storage.OciBlobStore`` take."""

    attempts: int
    backoff: float
    max_backoff: float
    timeout: float
    min_rate: float
    deadline_floor: float


class RemoteConfig(Model, frozen=True):
    """A named remote: an fsspec URL and its storage options (never credentials).

    ``attempts`` bounds the tries of each request (retrying transient failures with
    exponential backoff starting at ``backoff`` seconds, capped at ``max_backoff``);
    ``timeout`` bounds each connection and read, in seconds. A download of known size
    must complete, retries included, within ``deadline_floor + size / min_rate``
    seconds (``min_rate`` in bytes per second). A digest that no registration names
    (``evstore fetch DIGEST``) is refused from this remote when it stores more than
    ``max_unregistered_size`` bytes, before any of them is read.
    """

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    url: str
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    read_only: bool = False
    attempts: Attempts = 4
    backoff: NonNegativeFloat = 0.25
    max_backoff: NonNegativeFloat = 8.0
    timeout: PositiveFloat = 60.0
    min_rate: PositiveFloat = 65536.0
    deadline_floor: NonNegativeFloat = 60.0
    max_unregistered_size: Annotated[int, Meta(ge=0)] = 256 << 20

    def retry(self) -> RetrySettings:
        """This remote's retry and deadline settings."""
        return cast(RetrySettings, {k: getattr(self, k) for k in RetrySettings.__annotations__})


class LpipsConfig(Model, frozen=True):
    """Pinned LPIPS weights, by descriptor, and optionally the scorer-state digest."""

    backbone: Descriptor | None = None
    linear: Descriptor | None = None
    state_digest: DigestStr | None = None


class BundleConfig(Model, frozen=True):
    """Guard-rails for ``evstore bundle create``: ``max_git_file_size`` (bytes) refuses
    a bundle that would put a larger file in git (use ``--external`` for it)."""

    max_git_file_size: Annotated[int, Meta(ge=0)] | None = None


class Config(Model, frozen=True):
    """The whole of ``evstore.toml``; remotes are tried in file order."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    store: StoreConfig = StoreConfig()
    bundle: BundleConfig = BundleConfig()
    remotes: dict[str, RemoteConfig] = msgspec.field(default_factory=dict)
    lpips: LpipsConfig | None = None


class Repository:
    """An evidence repository, resolved once: its root directory, and its configuration
    (``evstore.toml`` with the per-user layers) read on first use.

    It is path-like (``os.fspath`` gives the root), so it goes wherever a root path
    does. The one rule for a root is :func:`as_repository`, applied once, where a
    command or a documented library function is entered; below that, functions are
    handed the ``Repository`` (which :func:`as_repository` hands back as it is), so
    nothing walks up again. ``Repository(path)`` names a root exactly (``--root``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()

    def __fspath__(self) -> str:
        return os.fspath(self.root)

    def __repr__(self) -> str:
        return f"Repository({os.fspath(self.root)!r})"

    def __str__(self) -> str:
        return os.fspath(self.root)

    def __truediv__(self, other: str | os.PathLike[str]) -> Path:
        return self.root / other

    @functools.cached_property
    def config(self) -> Config:
        """The merged configuration (:func:`load_config`), read once."""
        return load_config(self.root)

    def local_store(self) -> LocalBlobStore:
        """The repository's local blob store (``[store] path``, relative to the root)."""
        from .storage import LocalBlobStore

        path = os.path.join(self.root, os.path.expanduser(self.config.store.path))
        return LocalBlobStore(path)


def as_repository(root: str | os.PathLike[str] | None = None) -> Repository:
    """The repository a root names, by the one rule: a :class:`Repository` as it is; for
    a path (default: the current directory), the one at or above it (:func:`find_root`:
    a plain subfolder of a repository is that repository)."""
    if isinstance(root, Repository):
        return root
    return Repository(find_root(root))


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Return the evidence repository root: the nearest directory, from ``start`` up,
    holding ``evstore.toml`` or ``evidence/``; ``start`` itself when none does."""
    if isinstance(start, Repository):
        return start.root
    here = Path(start or os.getcwd()).absolute()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file() or (candidate / "evidence").is_dir():
            return candidate
    return here


def require_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Like :func:`find_root`, but refuse a directory that is not (inside) an evidence
    repository, rather than taking ``start`` as one."""
    here = Path(start or os.getcwd()).absolute()
    root = find_root(here)
    if not ((root / CONFIG_NAME).is_file() or (root / "evidence").is_dir()):
        raise ConfigError(
            f"{here}: not an evidence repository (run `evstore init`): "
            f"no {CONFIG_NAME} or evidence/ here or above"
        )
    return root


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``: tables merge key by key, other values replace."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = _merge(old, value)
        else:
            out[key] = value
    return out


def load_config(root: str | os.PathLike[str], *, local: bool = True) -> Config:
    """Read ``<root>/evstore.toml`` strictly, with the untracked per-user files
    (:data:`LOCAL_CONFIG_NAMES`) merged over it unless ``local`` is false; missing
    files give the defaults."""
    path = Path(root) / CONFIG_NAME
    data = _read_toml(path)
    read = [path] if data is not None else []
    for name in LOCAL_CONFIG_NAMES if local else ():
        extra = _read_toml(Path(root) / name)
        if extra is not None:
            data = _merge(data or {}, extra)
            read.append(Path(root) / name)
    if data is None:
        return Config()
    return _check_config(data, " + ".join(str(p) for p in read))


def load_config_file(path: str | os.PathLike[str]) -> Config:
    """Read one configuration file alone, strictly; a missing file gives the defaults."""
    data = _read_toml(Path(path))
    return Config() if data is None else _check_config(data, os.fspath(path))


def _read_toml(path: Path) -> dict[str, Any] | None:
    """One TOML file as a table, or None when it does not exist."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    if _only_comments(raw):
        return {}  # what ``evstore init`` writes: nothing to parse, no tomllib to import
    import tomllib  # not at module level: verify of a default repository never needs it

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    if nesting_depth(data) > MAX_DEPTH:
        raise ConfigError(f"{path}: not valid configuration: nested deeper than {MAX_DEPTH} levels")
    return data


def _only_comments(raw: bytes) -> bool:
    """Whether a TOML text holds nothing but blank lines and comments."""
    return all(not line.strip() or line.lstrip().startswith(b"#") for line in raw.splitlines())


def _check_config(data: dict[str, Any], path: str) -> Config:
    try:
        config = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    for name, remote in config.remotes.items():
        problem = (
            remote_name_problem(name)
            or url_problem(remote.url, target=_config_file_name(path))
            or _credential_problem(remote.options, target=_config_file_name(path))
        )
        if problem:
            raise RemoteConfigError(f"{path}: remote {name!r}: {problem}")
    return config


def _config_file_name(path: str) -> str:
    """Which configuration file ``path`` is, as the repository names it."""
    return next(
        (n for n in sorted(LOCAL_CONFIG_NAMES, key=len, reverse=True) if path.endswith(n)),
        CONFIG_NAME,
    )


def remote_name_problem(name: str) -> str | None:
    """Return why ``name`` cannot name a remote, or None."""
    if not _REMOTE_NAME.match(name):
        return (
            "a remote name is 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return None


def url_problem(url: str, what: str = "the URL", *, target: str = CONFIG_NAME) -> str | None:
    """Return why ``url`` cannot be stored in ``target`` (``evstore.toml`` by default; it
    embeds a user name or password), or None."""
    if "://" not in url:
        return None
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in netloc:
        return (
            f"{what} embeds a user name or password ({url.split('://', 1)[0]}://...@...); "
            f"that would store a credential in {target}: "
            "credentials come from the backend's usual sources (environment, profiles)"
        )
    return None


def _secret_name(key: str, in_headers: bool) -> bool:
    lowered = key.lower()
    if lowered in CREDENTIAL_OPTIONS:
        return True
    return in_headers and any(part in lowered for part in _SECRET_HEADER_PARTS)


def _credential_problem(
    options: Any, prefix: str = "", in_headers: bool = False, *, target: str = CONFIG_NAME
) -> str | None:
    """Return why ``options`` would put a secret in ``target`` (the configuration file
    being written, ``evstore.toml`` by default), or None: a credential
    option name at any depth (lists included), a header that carries a secret (its name
    mentions auth, token, key or cookie), or a URL with a user name or password."""
    if isinstance(options, dict):
        for key, value in options.items():
            name = str(key)
            if _secret_name(name, in_headers):
                return (
                    f"option {prefix + name!r} would store a credential in {target}; "
                    "credentials come from the backend's usual sources (environment, profiles)"
                )
            problem = _credential_problem(
                value,
                f"{prefix}{name}.",
                in_headers=name.lower() in _HEADER_OPTIONS,
                target=target,
            )
            if problem:
                return problem
    elif isinstance(options, list | tuple):
        for i, item in enumerate(options):
            problem = _credential_problem(
                item, f"{prefix}{i}.", in_headers=in_headers, target=target
            )
            if problem:
                return problem
    elif isinstance(options, str):
        return url_problem(options, f"option {prefix.rstrip('.')!r}", target=target)
    return None


def parse_option(text: str, *, target: str = CONFIG_NAME) -> tuple[list[str], Any]:
    """Parse ``KEY=VALUE`` (``KEY`` may be dotted for nested options).

    ``VALUE`` is read as a TOML value when it is one (``true``, ``3``, ``"x"``) and
    kept as a string otherwise. Credential option names are refused, naming ``target``,
    the file the option would be written to.
    """
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise ConfigError(f"option {text!r}: expected KEY=VALUE")
    parts = [p.strip() for p in parts]
    value: Any
    import tomllib

    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    nested: dict[str, Any] = {}
    cursor = nested
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    problem = _credential_problem(nested, target=target)
    if problem:
        raise ConfigError(problem)
    return parts, value


CONFIG_TEMPLATE = """\
# evstore.toml: the settings of this evidence repository (kept in git).
# Every setting is optional; uncomment what you need. `evstore remote add` and
# `evstore lpips pin` write their tables below this header and keep it.
# Credentials never go here: use the backend's own (environment, ~/.aws, ...).
#
# The local blob store (git-ignored), relative to this file:
# [store]
# path = ".evstore"
#
# Refuse `evstore bundle create` when a file bound for git is larger than this
# many bytes (give such files to the store: `evstore bundle create --external GLOB`):
# [bundle]
# max_git_file_size = 10485760
#
# Remotes, tried in the order written (`evstore remote add NAME URL` adds one;
# `evstore push` uploads to the first writable one):
# [remotes.origin]
# url = "s3://my-bucket/evidence"
# options = { endpoint_url = "https://s3.example.com" }
# read_only = false
# attempts = 4                    # tries per request, with backoff
# timeout = 60.0                  # seconds per connection and read
# max_unregistered_size = 268435456   # bytes: bound for `evstore fetch` of an unnamed digest
"""
"""What ``evstore init`` writes: every setting a user will want, commented out."""


def _leading_comments(path: Path) -> str:
    """The comment block at the top of an existing file ("" when none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line)
    head = "".join(lines).rstrip()
    return head + "\n\n" if head else ""


def save_config(root: str | os.PathLike[str], config: Config, *, local: bool = False) -> Path:
    """Write ``<root>/evstore.toml`` (with ``local``, the untracked
    ``<root>/.evstore/config.toml``) atomically, keeping the comment block at its top
    (the template ``evstore init`` writes)."""
    import tomli_w

    path = Path(root) / (LOCAL_CONFIG_NAMES[-1] if local else CONFIG_NAME)
    if local:
        path.parent.mkdir(parents=True, exist_ok=True)
    from ._atomic import write_replace

    text = _leading_comments(path) + tomli_w.dumps(msgspec.to_builtins(config))
    try:
        write_replace(path, text.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    return path


def local_store(root: str | os.PathLike[str] | None = None) -> LocalBlobStore:
    """Return the local blob store of the evidence repository ``root`` names
    (:func:`as_repository`)."""
    return as_repository(root).local_store()


# What `evstore init` git-ignores: the local store and the per-user configuration.
GIT_IGNORED = (".evstore/", "evstore.local.toml")


class Initialised(NamedTuple):
    """What :func:`init_repository` did: the repository, whether it wrote
    ``evstore.toml`` (an existing one is left unchanged), and the patterns it added to
    ``.gitignore``."""

    repository: Repository
    wrote_config: bool
    ignored: tuple[str, ...]

    @property
    def config_path(self) -> Path:
        """``<root>/evstore.toml``."""
        return self.repository.root / CONFIG_NAME

    @property
    def ignore_path(self) -> Path:
        """``<root>/.gitignore``."""
        return self.repository.root / ".gitignore"


def init_repository(root: str | os.PathLike[str]) -> Initialised:
    """Make ``root`` (created if needed, taken as given, never walked up) an evidence
    repository: ``evstore.toml`` (:data:`CONFIG_TEMPLATE`, every setting commented out)
    unless one exists, ``evidence/``, and
    :data:`GIT_IGNORED` in ``.gitignore``."""
    repo = Repository(root)
    try:
        repo.root.mkdir(parents=True, exist_ok=True)
        wrote = not (repo.root / CONFIG_NAME).exists()
        if wrote:
            from ._atomic import write_replace

            write_replace(repo.root / CONFIG_NAME, CONFIG_TEMPLATE.encode("utf-8"))
        (repo.root / "evidence").mkdir(exist_ok=True)
        ignore = repo.root / ".gitignore"
        text = ignore.read_text() if ignore.exists() else ""
        lines = text.splitlines()
        added: list[str] = []
        for pattern in GIT_IGNORED:
            if pattern not in lines and "/" + pattern not in lines:
                with open(ignore, "a") as fh:
                    fh.write(("\n" if text and not text.endswith("\n") else "") + pattern + "\n")
                text = "\n"
                added.append(pattern)
    except OSError as exc:
        raise ConfigError(
            f"{exc.filename or repo.root}: cannot initialise: {exc.strerror}"
        ) from exc
    return Initialised(repo, wrote, tuple(added))
