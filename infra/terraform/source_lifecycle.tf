# Optional (noncurrent_expiration_days, off by default): a lifecycle configuration on the source
# buckets that ends the restore window. On a versioned bucket a vacuum's delete leaves a delete
# marker and the bytes as a noncurrent version, billed until something removes them;
# `inventory-vacuum restore` brings them back while they exist. This rule expires a noncurrent
# version noncurrent_expiration_days after it became noncurrent, and then the delete marker left
# with no version behind it. A second rule aborts multipart uploads left unfinished for 7 days.
#
# S3 keeps one lifecycle configuration per bucket: this resource REPLACES whatever configuration a
# bucket has. Leave out (noncurrent_expiration_buckets) a bucket whose rules are managed elsewhere.

locals {
  noncurrent_expiration_on = coalesce(var.noncurrent_expiration_days, 0) > 0
  noncurrent_expiration_buckets = local.noncurrent_expiration_on ? toset(
    var.noncurrent_expiration_buckets == null ? keys(var.source_buckets) : var.noncurrent_expiration_buckets
  ) : toset([])
}

resource "aws_s3_bucket_lifecycle_configuration" "source" {
  for_each = local.noncurrent_expiration_buckets

  bucket = each.key

  # Every object of the bucket, the registered tables and anything else in it.
  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"

    filter {}

    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_expiration_days
    }

    # a delete marker with no noncurrent version left behind it
    expiration {
      expired_object_delete_marker = true
    }
  }

  # S3 bills the parts of an upload nobody completed or aborted; a job killed mid-upload leaves them.
  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"

    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  lifecycle {
    precondition {
      condition     = contains(keys(var.source_buckets), each.key)
      error_message = "noncurrent_expiration_buckets: ${each.key} is not one of source_buckets."
    }
  }
}
