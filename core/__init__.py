"""What every job shares: the Spark session, errors, paths, the S3 client, the registry and the tool's own tables."""
