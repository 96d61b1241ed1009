"""``videos-job``: the multipart request of ``videos-sync`` POSTed as a job; the
transport polls ``{path}/{id}`` until it completes and GETs ``{path}/{id}/content``."""

from __future__ import annotations

from .videos_sync import VideosSync

__all__ = ["ENDPOINT", "VideosJob"]


class VideosJob(VideosSync):
    """POST the request, poll ``{path}/{id}`` until it completes, GET the content."""

    kind = "videos-job"
    job = True


ENDPOINT = VideosJob()
