"""Former name of :mod:`helpers.remotes`, kept so that tests written against it still import."""

from helpers.remotes import *  # noqa: F403
