# The destination bucket of the S3 Inventory deliveries, its encryption key, and where the
# inventory table and its history tables ("the warehouse") live.

locals {
  # s3://bucket/key, s3a:// or s3n:// (as tables.yaml accepts), trailing slashes stripped
  s3_path_pattern = "^(?i:s3[an]?)://([^/]+)/(.*[^/])/*$"

  meta_bucket = regex(local.s3_path_pattern, trimspace(var.inventory_table_location))[0]
  meta_key    = regex(local.s3_path_pattern, trimspace(var.inventory_table_location))[1]
  # The parent prefix of the inventory table: its history tables are siblings there.
  warehouse_prefix = join("/", slice(split("/", local.meta_key), 0, length(split("/", local.meta_key)) - 1))

  inventory_runs_key   = "${local.warehouse_prefix}/inventory_runs"
  inventory_usage_key  = "${local.warehouse_prefix}/inventory_usage"
  vacuum_runs_key      = "${local.warehouse_prefix}/vacuum_runs"
  vacuum_deletions_key = "${local.warehouse_prefix}/vacuum_deletions"

  # Every Delta table this configuration knows of in the destination bucket.
  delta_keys_in_destination = concat(
    local.meta_bucket == var.destination_bucket_name ? [
      local.meta_key, local.inventory_runs_key, local.inventory_usage_key, local.vacuum_runs_key, local.vacuum_deletions_key,
    ] : [],
    [for table in values(local.tables) : table.key if table.bucket == var.destination_bucket_name],
  )

  jobs_log_group_name   = "/aws/emr-serverless/${var.name_prefix}"
  states_log_group_name = "/aws/vendedlogs/states/${var.name_prefix}"
}

resource "aws_kms_key" "this" {
  description             = "${var.name_prefix}: inventory deliveries, job and state machine logs, failure topic"
  enable_key_rotation     = true
  deletion_window_in_days = 30

  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        # IAM policies of this account decide who else may use the key (the job roles do).
        Sid       = "AccountAdministersTheKey"
        Effect    = "Allow"
        Principal = { AWS = "arn:${local.partition}:iam::${local.account_id}:root" }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        Sid       = "CloudWatchLogsEncryptsTheLogGroups"
        Effect    = "Allow"
        Principal = { Service = "logs.${local.region}.amazonaws.com" }
        Action    = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
        Resource  = "*"
        Condition = {
          ArnEquals = {
            "kms:EncryptionContext:aws:logs:arn" = [
              "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${local.jobs_log_group_name}",
              "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${local.states_log_group_name}",
            ]
          }
        }
      },
      {
        # S3 Inventory encrypts each delivery with this key (SSE-KMS in the configuration).
        Sid       = "S3InventoryEncryptsDeliveries"
        Effect    = "Allow"
        Principal = { Service = "s3.amazonaws.com" }
        Action    = "kms:GenerateDataKey"
        Resource  = "*"
        Condition = {
          StringEquals = { "aws:SourceAccount" = local.account_id }
          ArnLike      = { "aws:SourceArn" = [for bucket in keys(var.source_buckets) : "arn:${local.partition}:s3:::${bucket}"] }
        }
      },
    ]
  })
}

resource "aws_kms_alias" "this" {
  name          = "alias/${var.name_prefix}"
  target_key_id = aws_kms_key.this.key_id
}

resource "aws_s3_bucket" "destination" {
  #checkov:skip=CKV_AWS_18: server access logs need a second bucket this configuration does not own; every request here is made by S3 Inventory or the job roles, whose calls CloudTrail records
  #checkov:skip=CKV_AWS_21: versioning would keep every expired delivery as a noncurrent version; the warehouse's Delta tables keep their own history, and no role here may delete their data files
  #checkov:skip=CKV_AWS_144: the deliveries are regenerated daily from the source buckets and the inventory table by the next ingest; replicate the warehouse (the deletion ledger) with your own rule if your recovery plan needs it in a second Region
  #checkov:skip=CKV2_AWS_62: nothing consumes object events here: the daily schedule starts the pipeline, and the ingest job finds the newest complete delivery itself
  bucket = var.destination_bucket_name
}

resource "aws_s3_bucket_ownership_controls" "destination" {
  bucket = aws_s3_bucket.destination.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "destination" {
  bucket                  = aws_s3_bucket.destination.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "destination" {
  bucket = aws_s3_bucket.destination.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.this.arn
    }
    bucket_key_enabled = true
  }
}

# S3 Inventory writes the deliveries as the service principal s3.amazonaws.com, on behalf of the
# source buckets of this account only.
data "aws_iam_policy_document" "destination" {
  statement {
    sid       = "S3InventoryDeliversFromTheSourceBuckets"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.destination.arn}/${var.inventory_prefix}/*"]

    principals {
      type        = "Service"
      identifiers = ["s3.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [for bucket in keys(var.source_buckets) : "arn:${local.partition}:s3:::${bucket}"]
    }

    condition {
      test     = "StringEquals"
      variable = "s3:x-amz-acl"
      values   = ["bucket-owner-full-control"]
    }
  }
}

resource "aws_s3_bucket_policy" "destination" {
  bucket = aws_s3_bucket.destination.id
  policy = data.aws_iam_policy_document.destination.json

  depends_on = [aws_s3_bucket_public_access_block.destination]
}

resource "aws_s3_bucket_lifecycle_configuration" "destination" {
  bucket = aws_s3_bucket.destination.id

  # Old deliveries: the ingest job reads the newest complete one (or the one of --date).
  rule {
    id     = "expire-inventory-deliveries"
    status = "Enabled"

    filter {
      prefix = "${var.inventory_prefix}/"
    }

    expiration {
      days = var.inventory_expiration_days
    }
  }

  # Everywhere, the warehouse included: only uploads a crashed job left unfinished are aborted.
  # Nothing else expires: the inventory table and its history tables are Delta tables.
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
      # The expiration rule must never reach a Delta table, and no table may hold the deliveries.
      condition = alltrue([
        for key in local.delta_keys_in_destination :
        !startswith("${key}/", "${var.inventory_prefix}/") && !startswith("${var.inventory_prefix}/", "${key}/")
      ])
      error_message = "Deliveries under ${var.inventory_prefix}/ in ${var.destination_bucket_name} expire after ${var.inventory_expiration_days} days: neither the inventory table, its history tables nor a registered table may be under that prefix or contain it."
    }
  }
}
