variable "region" {
  description = "AWS Region of everything here. The source buckets, the destination bucket and the inventory table must be in it (S3 Inventory delivers within a Region's partition; EMR Serverless reads S3 in its own Region without a VPC)."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of every named resource (roles, application, state machine, topic, log groups, schedule)."
  type        = string
  default     = "inventory-vacuum"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,29}$", var.name_prefix))
    error_message = "name_prefix: 1-30 characters, lower-case letters, digits and '-', starting with a letter."
  }
}

variable "tags" {
  description = "Tags for every resource (provider default_tags)."
  type        = map(string)
  default     = { project = "inventory-vacuum" }
}

# ---- S3 Inventory ----------------------------------------------------------------------------

variable "source_buckets" {
  description = "Buckets to inventory (existing, this account), name -> { versions = \"Current\" or \"All\" }. \"All\" also lists noncurrent versions and delete markers, which the chargeback prices; the vacuum reads current versions only."
  type = map(object({
    versions = string
  }))

  validation {
    condition     = length(var.source_buckets) > 0 && alltrue([for b in values(var.source_buckets) : contains(["Current", "All"], b.versions)])
    error_message = "source_buckets: at least one bucket, each with versions = \"Current\" or \"All\"."
  }
}

variable "inventory_config_id" {
  description = "Name of the S3 Inventory configuration on every source bucket: the ingest job's --config-id."
  type        = string
  default     = "daily"

  validation {
    condition     = can(regex("^[A-Za-z0-9._-]{1,64}$", var.inventory_config_id))
    error_message = "inventory_config_id: 1-64 characters of letters, digits, '.', '_' and '-'."
  }
}

variable "destination_bucket_name" {
  description = "Name of the bucket created here to receive the deliveries (and, usually, to hold the inventory table: see inventory_table_location)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.destination_bucket_name))
    error_message = "destination_bucket_name: a valid S3 bucket name (3-63 characters: a-z, 0-9, '.', '-')."
  }
}

variable "inventory_prefix" {
  description = "Key prefix of the deliveries in the destination bucket, without slashes at either end. Deliveries land under <prefix>/<source bucket>/<config id>/: the ingest job's --destination is s3://<destination bucket>/<prefix>."
  type        = string
  default     = "inventory"

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$", var.inventory_prefix))
    error_message = "inventory_prefix: a non-empty key prefix without a leading or trailing '/'."
  }
}

variable "inventory_expiration_days" {
  description = "Days after which a delivery (manifest and data files) is deleted by the destination bucket's lifecycle rule. The ingest job needs only the newest one; keep a few days to re-ingest with --date."
  type        = number
  default     = 14

  validation {
    condition     = var.inventory_expiration_days >= 1 && floor(var.inventory_expiration_days) == var.inventory_expiration_days
    error_message = "inventory_expiration_days: a whole number of days >= 1."
  }
}

variable "inventory_table_location" {
  description = "Location of the inventory Delta table, e.g. s3://<destination bucket>/warehouse/inventory (any bucket of this account). inventory_runs, inventory_usage, vacuum_runs and vacuum_deletions are its siblings (same parent prefix), as the jobs' defaults put them."
  type        = string

  validation {
    condition     = can(regex("^s3[an]?://[a-z0-9][a-z0-9.-]+[a-z0-9]/[^/]+(/[^/]+)*/[^/]+/?$", var.inventory_table_location))
    error_message = "inventory_table_location: s3://BUCKET/PREFIX/NAME, with a parent prefix (the warehouse) that the history tables share."
  }
}

# ---- The registry ------------------------------------------------------------------------------

variable "tables_yaml" {
  description = "Path (relative to this directory, or absolute) of the tables.yaml the jobs read. The vacuum role's S3 permissions are derived from its table paths, so the policy and the registry cannot drift apart; it is uploaded as the jobs' --tables unless tables_yaml_s3_uri names another copy."
  type        = string
}

variable "tables_yaml_s3_uri" {
  description = "Where the jobs read tables.yaml (--tables). null: this configuration uploads var.tables_yaml to s3://<code_bucket>/config/tables.yaml. Set it only if you manage that object yourself, and keep it identical to var.tables_yaml: the vacuum role can touch only the tables that file lists."
  type        = string
  default     = null

  validation {
    condition     = var.tables_yaml_s3_uri == null || can(regex("^s3://[^/]+/.+[^/]$", coalesce(var.tables_yaml_s3_uri, "-")))
    error_message = "tables_yaml_s3_uri: null or s3://BUCKET/KEY."
  }
}

variable "tables_per_policy" {
  description = "Registered tables per managed IAM policy of the vacuum role. A managed policy holds at most 6,144 characters (about 20-30 tables of ordinary path length) and a role at most 10 managed policies (20 after a quota increase); lower this if apply fails with a PolicySize error."
  type        = number
  default     = 15

  validation {
    condition     = var.tables_per_policy >= 1 && floor(var.tables_per_policy) == var.tables_per_policy
    error_message = "tables_per_policy: a whole number >= 1."
  }
}

variable "extra_kms_key_arns" {
  description = "KMS keys (ARNs) of SSE-KMS-encrypted source buckets, code bucket or meta bucket, which the job roles may use to decrypt and encrypt. The key created here (destination bucket, logs, topic) is always included."
  type        = list(string)
  default     = []
}

# ---- Code and EMR Serverless -------------------------------------------------------------------

variable "code_bucket" {
  description = "Existing bucket holding the code the job runs read: jobs/ingest_inventory.py, jobs/vacuum_tables.py, jobs/chargeback_report.py, jobs/restore_tables.py and the packed Python environment (python_env_archive). It may be the destination bucket."
  type        = string
}

variable "python_env_archive" {
  description = "Key, in code_bucket, of the packed Python environment (venv-pack) with inventory-vacuum, boto3, pyarrow, PyYAML and delta-spark's Python API; see the README."
  type        = string
  default     = "python/inventory-vacuum-env.tar.gz"
}

variable "release_label" {
  description = "EMR Serverless release. The default, emr-spark-8.0.0 (Spark 4.0.2, Delta 4.0.0, Python 3.11), is the newest EMR Serverless release whose Spark line is tested here: the Spark 4.0 line (pyspark 4.0.1 + delta-spark 4.0.1; same Spark 4.0 and Delta 4.0 minors). No known EMR release runs the default Spark 4.2 line; emr-spark-8.1.0 runs Spark 4.1, which the jobs refuse. An EMR 7.x release (Spark 3.5) matches the Spark 3.5 line from 7.8.0 on (Delta 3.3); the Python environment's delta-spark must match the release's line (README: The pins and the EMR release)."
  type        = string
  default     = "emr-spark-8.0.0"

  validation {
    condition     = can(regex("^emr-", var.release_label))
    error_message = "release_label: an EMR release label such as emr-spark-8.0.0."
  }
}

variable "architecture" {
  description = "CPU architecture of the application: X86_64 or ARM64. The packed Python environment must be built for the same one."
  type        = string
  default     = "X86_64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.architecture)
    error_message = "architecture: X86_64 or ARM64."
  }
}

variable "maximum_capacity" {
  description = "Upper bound of the application's workers, all job runs together (EMR Serverless units: \"16 vCPU\", \"64 GB\", \"200 GB\")."
  type = object({
    cpu    = string
    memory = string
    disk   = string
  })
  default = {
    cpu    = "32 vCPU"
    memory = "128 GB"
    disk   = "500 GB"
  }
}

variable "idle_timeout_minutes" {
  description = "Minutes without a job run after which the application stops (it starts by itself for the next run)."
  type        = number
  default     = 15

  validation {
    condition     = var.idle_timeout_minutes >= 1 && var.idle_timeout_minutes <= 10080
    error_message = "idle_timeout_minutes: 1 to 10080."
  }
}

variable "extra_spark_submit_parameters" {
  description = "Appended to every job run's sparkSubmitParameters, e.g. \"--conf spark.executor.cores=4 --conf spark.executor.memory=14g\"."
  type        = string
  default     = ""
}

variable "job_timeout_minutes" {
  description = "executionTimeoutMinutes of each job run."
  type        = number
  default     = 360

  validation {
    condition     = var.job_timeout_minutes >= 5
    error_message = "job_timeout_minutes: at least 5."
  }
}

# ---- The daily run -----------------------------------------------------------------------------

variable "schedule_expression" {
  description = "When the daily run starts (EventBridge Scheduler expression, in schedule_timezone). Deliveries usually arrive within 48 hours of the first configuration and then daily; ingest takes the newest complete one."
  type        = string
  default     = "cron(0 6 * * ? *)"

  validation {
    condition     = can(regex("^(cron|rate|at)\\(.+\\)$", var.schedule_expression))
    error_message = "schedule_expression: cron(...), rate(...) or at(...)."
  }
}

variable "schedule_timezone" {
  description = "Time zone of schedule_expression."
  type        = string
  default     = "UTC"
}

variable "vacuum_dry_run" {
  description = "Run the scheduled vacuum with --dry-run (plans and reports, deletes nothing). The default; set false once the dry runs' reports look right."
  type        = bool
  default     = true
}

variable "vacuum_arguments" {
  description = "Extra arguments of the scheduled vacuum job, e.g. [\"--verify-existence\", \"--parallel\", \"8\"]."
  type        = list(string)
  default     = []
}

variable "run_chargeback" {
  description = "Run the chargeback (--format json, into the job's stdout log) after the vacuum."
  type        = bool
  default     = true
}

variable "alert_email" {
  description = "E-mail address subscribed to the failure topic (it must confirm the subscription). null: no subscription."
  type        = string
  default     = null
}

variable "log_retention_days" {
  description = "Retention of the job and state machine log groups, in days (a value CloudWatch Logs accepts)."
  type        = number
  default     = 365

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days: one of the values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, ...)."
  }
}

# ---- Versioned source buckets ------------------------------------------------------------------

variable "noncurrent_expiration_days" {
  description = "The restore window, in days; null (the default) or 0: off. When set, each source bucket (or each of noncurrent_expiration_buckets) gets a lifecycle configuration whose rules apply to every object of the bucket: NoncurrentVersionExpiration after this many days with ExpiredObjectDeleteMarker, and aborting multipart uploads left unfinished for 7 days. A vacuum on a versioned bucket can then be undone with inventory-vacuum restore for this many days, after which S3 removes the deleted objects' bytes. S3 keeps one lifecycle configuration per bucket: this one REPLACES any configuration the bucket already has, and its rules are lost."
  type        = number
  default     = null

  validation {
    condition     = var.noncurrent_expiration_days == null || try(var.noncurrent_expiration_days >= 0 && floor(var.noncurrent_expiration_days) == var.noncurrent_expiration_days, false)
    error_message = "noncurrent_expiration_days: null, 0 (off) or a whole number of days >= 1."
  }
}

variable "noncurrent_expiration_buckets" {
  description = "The source buckets that get the lifecycle configuration of noncurrent_expiration_days; null (the default): every source bucket. Leave out a bucket whose lifecycle configuration is managed elsewhere, which this one would replace."
  type        = list(string)
  default     = null
}
