# One S3 Inventory configuration per source bucket: daily, Parquet, into
# s3://<destination bucket>/<inventory_prefix>/<source bucket>/<inventory_config_id>/, which is
# where `inventory-vacuum ingest --destination s3://<destination>/<prefix> --config-id <id>` looks.
#
# The optional fields are those the ingest job loads and the chargeback prices: size and
# modification time (VACUUM's input), storage class and Intelligent-Tiering tier (prices), ETag,
# multipart and encryption status (kept in the inventory table).

resource "aws_s3_bucket_inventory" "source" {
  for_each = var.source_buckets

  bucket                   = each.key
  name                     = var.inventory_config_id
  included_object_versions = each.value.versions
  enabled                  = true

  schedule {
    frequency = "Daily"
  }

  optional_fields = [
    "Size",
    "LastModifiedDate",
    "StorageClass",
    "ETag",
    "IsMultipartUploaded",
    "EncryptionStatus",
    "IntelligentTieringAccessTier",
  ]

  destination {
    bucket {
      format     = "Parquet"
      bucket_arn = aws_s3_bucket.destination.arn
      account_id = local.account_id
      prefix     = var.inventory_prefix

      encryption {
        sse_kms {
          key_id = aws_kms_key.this.arn
        }
      }
    }
  }

  # S3 checks nothing at configuration time; the first delivery (within 48 hours) needs both.
  depends_on = [aws_s3_bucket_policy.destination, aws_s3_bucket_server_side_encryption_configuration.destination]
}
