"""Former name of :mod:`helpers.media`, kept so that tests written against it still import."""

from helpers.media import *  # noqa: F403
