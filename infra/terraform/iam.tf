# Four job roles, each with only what its job does (see jobs/iam_policy.py, which renders the same
# S3 statements for users without Terraform: `inventory-vacuum iam-policy`). Ingest, vacuum and
# chargeback run every day; restore runs only when started by hand.

locals {
  # The registry the jobs read. The vacuum and restore roles' reach is derived from its paths:
  # policy and registry cannot drift apart.
  registry = yamldecode(file(var.tables_yaml))

  tables = {
    for table in local.registry.tables : table.name => {
      bucket = regex(local.s3_path_pattern, trimspace(table.path))[0]
      key    = regex(local.s3_path_pattern, trimspace(table.path))[1]
    } if can(regex(local.s3_path_pattern, trimspace(table.path)))
  }
  # Paths IAM cannot grant (file://, a whole bucket): the vacuum and restore roles' preconditions
  # name them.
  tables_not_on_s3 = [for table in local.registry.tables : "${table.name} (${table.path})" if !can(regex(local.s3_path_pattern, trimspace(table.path)))]
  # IAM reads * and ? in a resource as wildcards and $ as the start of a policy variable: a table
  # path holding one would widen the grant beyond the table, so such a path stops the plan.
  tables_with_wildcards = [for table in local.registry.tables : "${table.name} (${table.path})" if can(regex("[*?$]", table.path))]

  # Tables sorted by name, in chunks of tables_per_policy: one managed policy each.
  table_chunks = chunklist(sort(keys(local.tables)), var.tables_per_policy)

  tables_yaml_uri = coalesce(var.tables_yaml_s3_uri, "s3://${var.code_bucket}/config/tables.yaml")
  tables_yaml_arn = "arn:${local.partition}:s3:::${regex("^s3://(.+)$", local.tables_yaml_uri)[0]}"

  meta_bucket_arn = "arn:${local.partition}:s3:::${local.meta_bucket}"

  # Hadoop's S3A probes a table's own key and the warehouse prefix (HEAD and a one-key LIST)
  # before it creates a table's directory, and S3 answers a HEAD of a missing key with 404 only
  # when the caller may list that name: both are readable and listable as exact names.
  ingest_keys     = [local.meta_key, local.inventory_runs_key, local.inventory_usage_key]
  vacuum_meta     = [local.meta_key, local.vacuum_runs_key, local.vacuum_deletions_key]
  restore_meta    = [local.meta_key, local.vacuum_runs_key, local.vacuum_deletions_key]
  chargeback_keys = [local.meta_key, local.inventory_runs_key, local.inventory_usage_key, local.vacuum_runs_key, local.vacuum_deletions_key]
}

# ---- Trust: EMR Serverless job runs of this application only -----------------------------------
# (aws:SourceArn: the application, or one of its job runs)

data "aws_iam_policy_document" "job_trust" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["emr-serverless.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [aws_emrserverless_application.this.arn, "${aws_emrserverless_application.this.arn}/jobruns/*"]
    }
  }
}

# ---- What every job run needs: its code, its log group, the keys ---------------------------------

data "aws_iam_policy_document" "job_common" {
  statement {
    sid       = "ReadJobCode"
    actions   = ["s3:GetObject"]
    resources = ["arn:${local.partition}:s3:::${var.code_bucket}/jobs/*", "arn:${local.partition}:s3:::${var.code_bucket}/${var.python_env_archive}"]
  }

  statement {
    sid       = "ReadTablesFile"
    actions   = ["s3:GetObject"]
    resources = [local.tables_yaml_arn]
  }

  # What EMR Serverless needs to write a job run's logs to CloudWatch Logs.
  statement {
    sid       = "FindLogGroup"
    actions   = ["logs:DescribeLogGroups"]
    resources = ["arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:*"]
  }

  statement {
    sid       = "WriteJobLogs"
    actions   = ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
    resources = [aws_cloudwatch_log_group.jobs.arn, "${aws_cloudwatch_log_group.jobs.arn}:*"]
  }

  statement {
    sid       = "UseDataKeys"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = concat([aws_kms_key.this.arn], var.extra_kms_key_arns)
  }
}

# ---- ingest: read the deliveries, read and write the inventory tables; delete nothing ------------

data "aws_iam_policy_document" "ingest" {
  source_policy_documents = [data.aws_iam_policy_document.job_common.json]

  statement {
    sid       = "ReadInventoryDeliveries"
    actions   = ["s3:GetObject"]
    resources = ["${aws_s3_bucket.destination.arn}/${var.inventory_prefix}/*"]
  }

  statement {
    sid       = "ListInventoryDeliveries"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.destination.arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [var.inventory_prefix, "${var.inventory_prefix}/", "${var.inventory_prefix}/*"]
    }
  }

  statement {
    sid       = "ReadInventoryTables"
    actions   = ["s3:GetObject"]
    resources = concat(["${local.meta_bucket_arn}/${local.warehouse_prefix}"], flatten([for key in local.ingest_keys : ["${local.meta_bucket_arn}/${key}", "${local.meta_bucket_arn}/${key}/*"]]))
  }

  statement {
    sid       = "ListInventoryTables"
    actions   = ["s3:ListBucket"]
    resources = [local.meta_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = concat([local.warehouse_prefix, "${local.warehouse_prefix}/"], flatten([for key in local.ingest_keys : [key, "${key}/", "${key}/*"]]))
    }
  }

  statement {
    sid       = "WriteInventoryTables"
    actions   = ["s3:PutObject"]
    resources = [for key in local.ingest_keys : "${local.meta_bucket_arn}/${key}/*"]
  }
}

resource "aws_iam_role" "ingest" {
  name               = "${var.name_prefix}-ingest"
  description        = "inventory-vacuum ingest job runs: read S3 Inventory deliveries, write the inventory table"
  assume_role_policy = data.aws_iam_policy_document.job_trust.json
}

resource "aws_iam_role_policy" "ingest" {
  name   = "ingest"
  role   = aws_iam_role.ingest.id
  policy = data.aws_iam_policy_document.ingest.json
}

# ---- vacuum: read the inventory, write its history, delete only inside registered tables ----------

data "aws_iam_policy_document" "vacuum" {
  source_policy_documents = [data.aws_iam_policy_document.job_common.json]

  statement {
    sid       = "ReadInventoryAndVacuumHistory"
    actions   = ["s3:GetObject"]
    resources = concat(["${local.meta_bucket_arn}/${local.warehouse_prefix}"], flatten([for key in local.vacuum_meta : ["${local.meta_bucket_arn}/${key}", "${local.meta_bucket_arn}/${key}/*"]]))
  }

  statement {
    sid       = "ListInventoryAndVacuumHistory"
    actions   = ["s3:ListBucket"]
    resources = [local.meta_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = concat([local.warehouse_prefix, "${local.warehouse_prefix}/"], flatten([for key in local.vacuum_meta : [key, "${key}/", "${key}/*"]]))
    }
  }

  statement {
    sid       = "WriteVacuumHistory"
    actions   = ["s3:PutObject"]
    resources = ["${local.meta_bucket_arn}/${local.vacuum_runs_key}/*", "${local.meta_bucket_arn}/${local.vacuum_deletions_key}/*"]
  }
}

# The registered tables, tables_per_policy at a time (IAM limits a managed policy to 6,144
# characters). For each table: read it, list it, write its _delta_log/ (Delta's VACUUM commits its
# start and end there), and delete inside it: "<key>/*", never "<key>*", so events/* cannot reach
# events_v2/.
data "aws_iam_policy_document" "vacuum_tables" {
  count = length(local.table_chunks)

  statement {
    sid       = "ReadTableBucketVersioning"
    actions   = ["s3:GetBucketVersioning"]
    resources = [for bucket in sort(distinct([for name in local.table_chunks[count.index] : local.tables[name].bucket])) : "arn:${local.partition}:s3:::${bucket}"]
  }

  statement {
    sid       = "ReadTables"
    actions   = ["s3:GetObject"]
    resources = flatten([for name in local.table_chunks[count.index] : ["arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}", "arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/*"]])
  }

  dynamic "statement" {
    # one per bucket: s3:ListBucket limited to the tables' prefixes
    for_each = { for bucket in distinct([for name in local.table_chunks[count.index] : local.tables[name].bucket]) : bucket => [for name in local.table_chunks[count.index] : local.tables[name].key if local.tables[name].bucket == bucket] }

    content {
      actions   = ["s3:ListBucket"]
      resources = ["arn:${local.partition}:s3:::${statement.key}"]

      condition {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = flatten([for key in statement.value : [key, "${key}/", "${key}/*"]])
      }
    }
  }

  statement {
    sid       = "WriteTableLogs"
    actions   = ["s3:PutObject"]
    resources = [for name in local.table_chunks[count.index] : "arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/_delta_log/*"]
  }

  statement {
    sid       = "DeleteOnlyInsideRegisteredTables"
    actions   = ["s3:DeleteObject"]
    resources = [for name in local.table_chunks[count.index] : "arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/*"]
  }
}

resource "aws_iam_role" "vacuum" {
  name               = "${var.name_prefix}-vacuum"
  description        = "inventory-vacuum vacuum job runs: delete only inside the tables of tables.yaml"
  assume_role_policy = data.aws_iam_policy_document.job_trust.json

  lifecycle {
    precondition {
      condition     = length(local.tables) > 0 && length(local.tables_not_on_s3) == 0
      error_message = "${var.tables_yaml}: every table's path must be s3://BUCKET/KEY (or s3a://, s3n://) below the bucket's root; not: ${join(", ", local.tables_not_on_s3)}"
    }
    precondition {
      condition     = length(local.tables_with_wildcards) == 0
      error_message = "${var.tables_yaml}: a table path with *, ? or $ would be an IAM wildcard or variable, granting deletes beyond the table: ${join(", ", local.tables_with_wildcards)}"
    }
  }
}

resource "aws_iam_role_policy" "vacuum" {
  name   = "vacuum"
  role   = aws_iam_role.vacuum.id
  policy = data.aws_iam_policy_document.vacuum.json
}

resource "aws_iam_policy" "vacuum_tables" {
  count       = length(local.table_chunks)
  name        = "${var.name_prefix}-vacuum-tables-${count.index + 1}"
  description = "inventory-vacuum vacuum: tables ${count.index * var.tables_per_policy + 1} to ${count.index * var.tables_per_policy + length(local.table_chunks[count.index])} of ${var.tables_yaml}, by name"
  policy      = data.aws_iam_policy_document.vacuum_tables[count.index].json
}

resource "aws_iam_role_policy_attachment" "vacuum_tables" {
  count      = length(local.table_chunks)
  role       = aws_iam_role.vacuum.name
  policy_arn = aws_iam_policy.vacuum_tables[count.index].arn
}

# ---- chargeback: read the inventory table and its history tables, nothing else ----------------------

data "aws_iam_policy_document" "chargeback" {
  source_policy_documents = [data.aws_iam_policy_document.job_common.json]

  statement {
    sid       = "ReadInventoryAndHistory"
    actions   = ["s3:GetObject"]
    resources = concat(["${local.meta_bucket_arn}/${local.warehouse_prefix}"], flatten([for key in local.chargeback_keys : ["${local.meta_bucket_arn}/${key}", "${local.meta_bucket_arn}/${key}/*"]]))
  }

  statement {
    sid       = "ListInventoryAndHistory"
    actions   = ["s3:ListBucket"]
    resources = [local.meta_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = concat([local.warehouse_prefix, "${local.warehouse_prefix}/"], flatten([for key in local.chargeback_keys : [key, "${key}/", "${key}/*"]]))
    }
  }
}

resource "aws_iam_role" "chargeback" {
  name               = "${var.name_prefix}-chargeback"
  description        = "inventory-vacuum chargeback job runs: read the inventory table and its history"
  assume_role_policy = data.aws_iam_policy_document.job_trust.json
}

resource "aws_iam_role_policy" "chargeback" {
  name   = "chargeback"
  role   = aws_iam_role.chargeback.id
  policy = data.aws_iam_policy_document.chargeback.json
}

# ---- restore: remove the vacuum's delete markers inside registered tables; started by hand ---------
# `inventory-vacuum restore` (jobs/restore_tables.py) finds the delete markers a vacuum made on a
# versioned bucket (ListObjectVersions) and removes them by version id (DeleteObjects, authorized as
# s3:DeleteObjectVersion per key). It reads the inventory table, and reads and appends to the
# vacuum's history and ledger. It has no s3:DeleteObject: without a version id it deletes nothing.

data "aws_iam_policy_document" "restore" {
  source_policy_documents = [data.aws_iam_policy_document.job_common.json]

  statement {
    sid       = "ReadInventoryAndVacuumHistory"
    actions   = ["s3:GetObject"]
    resources = concat(["${local.meta_bucket_arn}/${local.warehouse_prefix}"], flatten([for key in local.restore_meta : ["${local.meta_bucket_arn}/${key}", "${local.meta_bucket_arn}/${key}/*"]]))
  }

  statement {
    sid       = "ListInventoryAndVacuumHistory"
    actions   = ["s3:ListBucket"]
    resources = [local.meta_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = concat([local.warehouse_prefix, "${local.warehouse_prefix}/"], flatten([for key in local.restore_meta : [key, "${key}/", "${key}/*"]]))
    }
  }

  statement {
    sid       = "WriteVacuumHistory"
    actions   = ["s3:PutObject"]
    resources = ["${local.meta_bucket_arn}/${local.vacuum_runs_key}/*", "${local.meta_bucket_arn}/${local.vacuum_deletions_key}/*"]
  }
}

# The registered tables, tables_per_policy at a time, as for the vacuum role. For each table: read
# the bucket's versioning state and lifecycle configuration, read the table's objects in any
# version (a restored version is checked), list the table and its versions (s3:prefix-limited;
# s3:ListBucket too, so that S3 answers a HEAD of a missing key with 404), and delete a version
# only inside it: "<key>/*", never "<key>*".
data "aws_iam_policy_document" "restore_tables" {
  count = length(local.table_chunks)

  statement {
    sid       = "ReadTableBucketVersioningAndLifecycle"
    actions   = ["s3:GetBucketVersioning", "s3:GetLifecycleConfiguration"]
    resources = [for bucket in sort(distinct([for name in local.table_chunks[count.index] : local.tables[name].bucket])) : "arn:${local.partition}:s3:::${bucket}"]
  }

  statement {
    sid       = "ReadTableVersions"
    actions   = ["s3:GetObject", "s3:GetObjectVersion"]
    resources = flatten([for name in local.table_chunks[count.index] : ["arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}", "arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/*"]])
  }

  dynamic "statement" {
    # one per bucket: listing objects and versions, limited to the tables' prefixes
    for_each = { for bucket in distinct([for name in local.table_chunks[count.index] : local.tables[name].bucket]) : bucket => [for name in local.table_chunks[count.index] : local.tables[name].key if local.tables[name].bucket == bucket] }

    content {
      actions   = ["s3:ListBucket", "s3:ListBucketVersions"]
      resources = ["arn:${local.partition}:s3:::${statement.key}"]

      condition {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = flatten([for key in statement.value : [key, "${key}/", "${key}/*"]])
      }
    }
  }

  statement {
    sid       = "DeleteVersionsOnlyInsideRegisteredTables"
    actions   = ["s3:DeleteObjectVersion"]
    resources = [for name in local.table_chunks[count.index] : "arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/*"]
  }
}

resource "aws_iam_role" "restore" {
  name               = "${var.name_prefix}-restore"
  description        = "inventory-vacuum restore job runs (by hand): remove delete markers only inside the tables of tables.yaml"
  assume_role_policy = data.aws_iam_policy_document.job_trust.json

  lifecycle {
    precondition {
      condition     = length(local.tables) > 0 && length(local.tables_not_on_s3) == 0
      error_message = "${var.tables_yaml}: every table's path must be s3://BUCKET/KEY (or s3a://, s3n://) below the bucket's root; not: ${join(", ", local.tables_not_on_s3)}"
    }
    precondition {
      condition     = length(local.tables_with_wildcards) == 0
      error_message = "${var.tables_yaml}: a table path with *, ? or $ would be an IAM wildcard or variable, granting deletes beyond the table: ${join(", ", local.tables_with_wildcards)}"
    }
  }
}

resource "aws_iam_role_policy" "restore" {
  name   = "restore"
  role   = aws_iam_role.restore.id
  policy = data.aws_iam_policy_document.restore.json
}

resource "aws_iam_policy" "restore_tables" {
  count       = length(local.table_chunks)
  name        = "${var.name_prefix}-restore-tables-${count.index + 1}"
  description = "inventory-vacuum restore: tables ${count.index * var.tables_per_policy + 1} to ${count.index * var.tables_per_policy + length(local.table_chunks[count.index])} of ${var.tables_yaml}, by name"
  policy      = data.aws_iam_policy_document.restore_tables[count.index].json
}

resource "aws_iam_role_policy_attachment" "restore_tables" {
  count      = length(local.table_chunks)
  role       = aws_iam_role.restore.name
  policy_arn = aws_iam_policy.restore_tables[count.index].arn
}
