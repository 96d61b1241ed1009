"""Helpers shared by the tests, one module per concept.

* :mod:`helpers.repos`: evidence repositories and bundles (files, ``bundle create``, git);
* :mod:`helpers.remotes`: remotes, fetch, gc and S3 (blobs, configured remotes, the CLI);
* :mod:`helpers.media`: clips encoded with PyAV at test time and check lookups.

``tests/conftest.py`` puts the tests directory on ``sys.path``, so tests import them as
``from helpers.repos import add_bundle``.
"""
