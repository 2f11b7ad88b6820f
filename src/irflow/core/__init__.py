"""The contracts every stage shares: Parquet schemas, errors, manifests, fingerprints, timing, and
the configuration's validation (which features extend by registering checks)."""
