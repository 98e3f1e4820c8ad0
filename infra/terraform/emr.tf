# The EMR Serverless application the three jobs run on, their log group, and tables.yaml on S3.

resource "aws_emrserverless_application" "this" {
  name          = var.name_prefix
  release_label = var.release_label
  type          = "SPARK" # the API's spelling; the provider stores it lower-cased
  architecture  = var.architecture

  # Starts on the first job run of the day, stops when idle: nothing is paid between runs.
  auto_start_configuration {
    enabled = true
  }

  auto_stop_configuration {
    enabled              = true
    idle_timeout_minutes = var.idle_timeout_minutes
  }

  maximum_capacity {
    cpu    = var.maximum_capacity.cpu
    memory = var.maximum_capacity.memory
    disk   = var.maximum_capacity.disk
  }
}

resource "aws_cloudwatch_log_group" "jobs" {
  name              = local.jobs_log_group_name
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
}

# The registry the jobs read (--tables) is the file the vacuum role's policy is derived from.
resource "aws_s3_object" "tables_yaml" {
  count = var.tables_yaml_s3_uri == null ? 1 : 0

  # the destination bucket may double as the code bucket: then it must exist first
  bucket     = var.code_bucket == var.destination_bucket_name ? aws_s3_bucket.destination.id : var.code_bucket
  key        = "config/tables.yaml"
  source     = var.tables_yaml
  kms_key_id = aws_kms_key.this.arn
  # a changed file is uploaded again (etag cannot be used with a KMS key: it is not the MD5 then)
  source_hash = filemd5(var.tables_yaml)
}

locals {
  code_uri = "s3://${var.code_bucket}"

  # The platform's Spark and Delta (emr-spark-8.0.0: Spark 4.0.2, Delta 4.0.0, the tested Spark 4.0
  # line's minors) with the project's Python environment: spark.jars names EMR's own Delta jars (no
  # --packages, no Maven at run time), the archive holds inventory-vacuum, boto3, pyarrow, PyYAML
  # and delta-spark's Python API (4.0.1, the Spark 4.0 line's pin). The jobs refuse a Spark and Delta
  # pair that is not a tested line. They address tables by path only: no metastore (Glue) is used.
  spark_submit_parameters = trimspace(join(" ", [
    "--conf spark.jars=/usr/share/aws/delta/lib/delta-spark.jar,/usr/share/aws/delta/lib/delta-storage.jar",
    "--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
    "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "--conf spark.sql.catalogImplementation=in-memory",
    "--conf spark.archives=${local.code_uri}/${var.python_env_archive}#environment",
    "--conf spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON=./environment/bin/python",
    "--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON=./environment/bin/python",
    "--conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python",
    var.extra_spark_submit_parameters,
  ]))

  ingest_arguments = concat(
    ["--destination", "s3://${aws_s3_bucket.destination.id}/${var.inventory_prefix}"],
    flatten([for bucket in sort(keys(var.source_buckets)) : ["--source-bucket", bucket]]),
    ["--config-id", var.inventory_config_id, "--inventory-table", var.inventory_table_location, "--tables", local.tables_yaml_uri, "--json"],
  )

  vacuum_arguments = concat(
    ["--inventory-table", var.inventory_table_location, "--tables", local.tables_yaml_uri, "--json"],
    var.vacuum_dry_run ? ["--dry-run"] : [],
    var.vacuum_arguments,
  )

  chargeback_arguments = ["--inventory-table", var.inventory_table_location, "--tables", local.tables_yaml_uri, "--format", "json"]
}
