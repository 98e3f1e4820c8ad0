"""S3 Inventory ingestion: find deliveries, verify them, load them into one Delta table."""
