"""Former name of :mod:`helpers.repos`, kept so that tests written against it still import."""

from helpers.repos import *  # noqa: F403
