"""A stand-in OCI 1.1 registry with the referrers API, in memory, for one test.

Debian packages only distribution 2.8 (``docker-registry``), which has no referrers API;
evstore's other branch (the registry answers a manifest with a ``subject`` by an
``OCI-Subject`` header, and lists referrers at ``GET /v2/<name>/referrers/<digest>``, as
distribution 3, zot and Harbor do) is exercised against this stub. It is written by us
and shares our reading of the spec, so it implements only what the distribution spec
says those requests answer, and keeps every request it served for the test to inspect:
monolithic blob uploads, manifests by tag or digest (digests checked), tag listing and
the referrers index. Nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from evidencestore.testing.http import serve_app

INDEX = "application/vnd.oci.image.index.v1+json"
_PATH = re.compile(r"/v2/(?P<name>.+?)/(?P<kind>blobs/uploads|blobs|manifests|referrers|tags)/?(?P<ref>[^/]*)")  # fmt: skip


@dataclass
class ReferrersRegistry:
    """The stub's state: blobs and manifests by ``sha256:`` digest, tags, and the
    ``(method, path)`` of every request served, in order."""

    host: str = ""
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def url(self, repo: str) -> str:
        return f"oci+http://{self.host}/{repo}"

    def referrers_of(self, subject: str) -> list[dict[str, Any]]:
        """What ``GET .../referrers/<subject>`` lists: every manifest whose ``subject``
        is ``subject``, as a descriptor with its artifact type and annotations."""
        out = []
        for digest, (media_type, data) in sorted(self.manifests.items()):
            manifest = json.loads(data)
            if (manifest.get("subject") or {}).get("digest") == subject:
                out.append({
                    "mediaType": media_type, "digest": digest, "size": len(data),
                    "artifactType": manifest.get("artifactType"),
                    "annotations": manifest.get("annotations") or {},
                })  # fmt: skip
        return out

    def app(self) -> Any:
        from aiohttp import web

        async def handle(request: web.Request) -> web.StreamResponse:
            self.requests.append((request.method, request.path))
            if request.path == "/v2/":
                return web.json_response({})
            found = _PATH.fullmatch(request.path)
            if found is None:
                return web.Response(status=404)
            name, kind, ref = found["name"], found["kind"], found["ref"]
            body = await request.read()
            if kind == "blobs/uploads" and request.method == "POST":
                location = f"/v2/{name}/blobs/uploads/{uuid.uuid4().hex}"
                return web.Response(status=202, headers={"Location": location})
            if kind == "blobs/uploads" and request.method == "PUT":
                digest = request.query.get("digest", "")
                if digest != "sha256:" + hashlib.sha256(body).hexdigest():
                    return web.json_response({"errors": [{"code": "DIGEST_INVALID"}]}, status=400)
                self.blobs[digest] = body
                return web.Response(status=201, headers={"Docker-Content-Digest": digest})
            if kind == "blobs":
                if ref not in self.blobs:
                    return web.Response(status=404)
                return web.Response(body=self.blobs[ref], content_type="application/octet-stream")
            if kind == "tags":
                return web.json_response({"name": name, "tags": sorted(self.tags)})
            if kind == "referrers":
                index = {
                    "schemaVersion": 2,
                    "mediaType": INDEX,
                    "manifests": self.referrers_of(ref),
                }
                return web.Response(body=json.dumps(index).encode(), content_type=INDEX)
            return self._manifest(request, ref, body)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app

    def _manifest(self, request: Any, ref: str, body: bytes) -> Any:
        from aiohttp import web

        digest = self.tags.get(ref, ref)
        if request.method == "PUT":
            sha = "sha256:" + hashlib.sha256(body).hexdigest()
            if ref.startswith("sha256:") and ref != sha:
                return web.json_response({"errors": [{"code": "DIGEST_INVALID"}]}, status=400)
            manifest = json.loads(body)
            self.manifests[sha] = (request.headers.get("Content-Type", ""), body)
            if not ref.startswith("sha256:"):
                self.tags[ref] = sha
            headers = {"Docker-Content-Digest": sha}
            if "subject" in manifest:  # OCI 1.1: the registry indexed it as a referrer
                headers["OCI-Subject"] = manifest["subject"]["digest"]
            return web.Response(status=201, headers=headers)
        if request.method == "DELETE":
            self.manifests.pop(digest, None)
            self.tags = {t: d for t, d in self.tags.items() if d != digest}
            return web.Response(status=202)
        if digest not in self.manifests:
            return web.Response(status=404)
        media_type, data = self.manifests[digest]
        return web.Response(
            body=data, headers={"Content-Type": media_type, "Docker-Content-Digest": digest}
        )


@contextlib.contextmanager
def referrers_registry() -> Iterator[ReferrersRegistry]:
    """Serve a fresh :class:`ReferrersRegistry` on 127.0.0.1 (a free port)."""
    registry = ReferrersRegistry()
    with serve_app(registry.app(), 0, name="oci-referrers-stub") as port:
        registry.host = f"127.0.0.1:{port}"
        yield registry
