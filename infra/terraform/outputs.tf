output "destination_bucket" {
  description = "Bucket receiving the S3 Inventory deliveries."
  value       = aws_s3_bucket.destination.id
}

output "ingest_destination" {
  description = "The ingest job's --destination."
  value       = "s3://${aws_s3_bucket.destination.id}/${var.inventory_prefix}"
}

output "ingest_role_arn" {
  description = "Job runtime role of the ingest job."
  value       = aws_iam_role.ingest.arn
}

output "vacuum_role_arn" {
  description = "Job runtime role of the vacuum job: deletes only inside the tables of tables.yaml."
  value       = aws_iam_role.vacuum.arn
}

output "chargeback_role_arn" {
  description = "Job runtime role of the chargeback job (read-only)."
  value       = aws_iam_role.chargeback.arn
}

output "restore_role_arn" {
  description = "Job runtime role of inventory-vacuum restore, run by hand (aws emr-serverless start-job-run): removes delete markers only inside the tables of tables.yaml."
  value       = aws_iam_role.restore.arn
}

output "restore_entry_point" {
  description = "entryPoint of a restore job run started by hand."
  value       = "${local.code_uri}/jobs/restore_tables.py"
}

output "application_id" {
  description = "EMR Serverless application the job runs use."
  value       = aws_emrserverless_application.this.id
}

output "state_machine_arn" {
  description = "The daily run (start it by hand with aws stepfunctions start-execution)."
  value       = aws_sfn_state_machine.daily.arn
}

output "alerts_topic_arn" {
  description = "SNS topic a failed job run publishes to."
  value       = aws_sns_topic.alerts.arn
}

output "job_log_group" {
  description = "CloudWatch Logs group of the job runs (streams ingest/, vacuum/, chargeback/)."
  value       = aws_cloudwatch_log_group.jobs.name
}

output "tables_yaml_uri" {
  description = "The --tables every job reads."
  value       = local.tables_yaml_uri
}

output "spark_submit_parameters" {
  description = "sparkSubmitParameters of the job runs, for runs started by hand."
  value       = local.spark_submit_parameters
}

output "kms_key_arn" {
  description = "Key encrypting the deliveries, the logs and the topic."
  value       = aws_kms_key.this.arn
}
