pytest_plugins = ["evidencestore.testing.s3"]
