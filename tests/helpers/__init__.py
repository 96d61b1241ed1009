"""Helpers shared by the tests, one module per concept.

* :mod:`helpers.paths`: where things are (``ROOT``, ``DOCS``, ``SCHEMAS``, ``DATA``,
  ``FIXTURES``), wherever a test file sits;
* :mod:`helpers.cli`: ``evstore`` in-process under ``capsys``;
* :mod:`helpers.repos`: evidence repositories and bundles (files, ``bundle create``, git);
* :mod:`helpers.remotes`: remotes, fetch, gc and S3 (blobs, configured remotes, the CLI);
* :mod:`helpers.media`: clips encoded with PyAV at test time and check lookups;
* :mod:`helpers.matrix`: the media verdict matrix's cells and what first principles expect;
* :mod:`helpers.corpus`: the legacy corpus and a repository of every record kind;
* :mod:`helpers.protocols`: the smallest protocol as written;
* :mod:`helpers.campaigns`: campaigns in git against the reference video server;
* :mod:`helpers.ledger`: the campaign ledger's bench (one campaign, six runs, reseal);
* :mod:`helpers.run_records`: hand-written run records, registered as bundles;
* :mod:`helpers.browser`: headless Chromium over the DevTools protocol (report pages);
* :mod:`helpers.loadgen_sut`: a system under test for MLPerf LoadGen.

``tests/conftest.py`` puts the tests directory on ``sys.path``, so tests import them as
``from helpers.repos import add_bundle``. Fixtures are not here but in ``conftest.py``.
"""
