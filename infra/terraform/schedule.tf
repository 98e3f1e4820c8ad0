# The daily run: EventBridge Scheduler starts a Step Functions state machine that runs the ingest,
# then the vacuum, then (optionally) the chargeback as EMR Serverless job runs, each waited for
# (.sync). A failed job run publishes to the alert topic and fails the execution: a failed ingest
# never goes on to a vacuum.

locals {
  state_machine_name = var.name_prefix
  state_machine_arn  = "arn:${local.partition}:states:${local.region}:${local.account_id}:stateMachine:${local.state_machine_name}"
  # aws:SourceArn of the scheduler's AssumeRole: its schedule group (as AWS documents it), or the
  # schedule itself; no other schedule of the account can use the role.
  schedule_source_arns = [
    "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule-group/default",
    "arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule/default/${var.name_prefix}-daily",
  ]

  jobs = {
    Ingest = {
      role        = aws_iam_role.ingest.arn
      entry_point = "${local.code_uri}/jobs/ingest_inventory.py"
      arguments   = local.ingest_arguments
      next        = "Vacuum"
    }
    Vacuum = {
      role        = aws_iam_role.vacuum.arn
      entry_point = "${local.code_uri}/jobs/vacuum_tables.py"
      arguments   = local.vacuum_arguments
      next        = var.run_chargeback ? "Chargeback" : "Done"
    }
    Chargeback = {
      role        = aws_iam_role.chargeback.arn
      entry_point = "${local.code_uri}/jobs/chargeback_report.py"
      arguments   = local.chargeback_arguments
      next        = "Done"
    }
  }
  run_jobs = { for name, job in local.jobs : name => job if name != "Chargeback" || var.run_chargeback }

  job_states = {
    for name, job in local.run_jobs : name => {
      Type     = "Task"
      Resource = "arn:${local.partition}:states:::emr-serverless:startJobRun.sync"
      Parameters = {
        ApplicationId           = aws_emrserverless_application.this.id
        ExecutionRoleArn        = job.role
        Name                    = "${var.name_prefix}-${lower(name)}"
        "ClientToken.$"         = "States.UUID()"
        ExecutionTimeoutMinutes = var.job_timeout_minutes
        JobDriver = {
          SparkSubmit = {
            EntryPoint            = job.entry_point
            EntryPointArguments   = job.arguments
            SparkSubmitParameters = local.spark_submit_parameters
          }
        }
        ConfigurationOverrides = {
          MonitoringConfiguration = {
            CloudWatchLoggingConfiguration = {
              Enabled             = true
              LogGroupName        = aws_cloudwatch_log_group.jobs.name
              LogStreamNamePrefix = lower(name)
            }
          }
        }
      }
      ResultPath = "$.${lower(name)}"
      Next       = job.next
      Catch = [{
        ErrorEquals = ["States.ALL"]
        ResultPath  = "$.error"
        Next        = "Notify${name}Failed"
      }]
    }
  }

  notify_states = {
    for name, job in local.run_jobs : "Notify${name}Failed" => {
      Type     = "Task"
      Resource = "arn:${local.partition}:states:::sns:publish"
      Parameters = {
        TopicArn    = aws_sns_topic.alerts.arn
        Subject     = "${var.name_prefix}: the ${lower(name)} job failed"
        "Message.$" = "States.JsonToString($)"
      }
      ResultPath = "$.notification"
      Next       = "Failed"
    }
  }

  definition = {
    Comment = "inventory-vacuum daily run: ingest, vacuum${var.run_chargeback ? ", chargeback" : ""}"
    StartAt = "Ingest"
    States = merge(local.job_states, local.notify_states, {
      Done   = { Type = "Succeed" }
      Failed = { Type = "Fail", Error = "JobRunFailed", Cause = "A job run failed; the alert topic has the error." }
    })
  }
}

# ---- Alerts ----------------------------------------------------------------------------------------

resource "aws_sns_topic" "alerts" {
  name              = "${var.name_prefix}-alerts"
  kms_master_key_id = aws_kms_key.this.arn
}

resource "aws_sns_topic_subscription" "email" {
  count     = var.alert_email == null ? 0 : 1
  topic_arn = aws_sns_topic.alerts.arn
  protocol  = "email"
  endpoint  = var.alert_email
}

# ---- The state machine -------------------------------------------------------------------------------

resource "aws_cloudwatch_log_group" "states" {
  name              = local.states_log_group_name
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
}

data "aws_iam_policy_document" "states_trust" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["states.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [local.state_machine_arn]
    }
  }
}

data "aws_iam_policy_document" "states" {
  statement {
    sid       = "StartJobRuns"
    actions   = ["emr-serverless:StartJobRun"]
    resources = [aws_emrserverless_application.this.arn]
  }

  statement {
    sid       = "WatchJobRuns"
    actions   = ["emr-serverless:GetJobRun", "emr-serverless:CancelJobRun"]
    resources = ["${aws_emrserverless_application.this.arn}/jobruns/*"]
  }

  # .sync: Step Functions learns that a job run ended from an EventBridge rule it manages.
  statement {
    sid       = "ManageSyncRule"
    actions   = ["events:PutTargets", "events:PutRule", "events:DescribeRule"]
    resources = ["arn:${local.partition}:events:${local.region}:${local.account_id}:rule/StepFunctionsGetEventsForEMRServerlessJobRule"]
  }

  statement {
    sid       = "PassTheJobRolesToEmrServerless"
    actions   = ["iam:PassRole"]
    resources = [aws_iam_role.ingest.arn, aws_iam_role.vacuum.arn, aws_iam_role.chargeback.arn]

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["emr-serverless.amazonaws.com"]
    }
  }

  statement {
    sid       = "PublishFailures"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alerts.arn]
  }

  statement {
    sid       = "EncryptForTheTopic"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [aws_kms_key.this.arn]
  }

  # Execution logs and X-Ray traces: these actions take no resource-level permissions.
  statement {
    sid = "DeliverExecutionLogs"
    actions = [
      "logs:CreateLogDelivery",
      "logs:DeleteLogDelivery",
      "logs:DescribeLogGroups",
      "logs:DescribeResourcePolicies",
      "logs:GetLogDelivery",
      "logs:ListLogDeliveries",
      "logs:PutResourcePolicy",
      "logs:UpdateLogDelivery",
    ]
    resources = ["*"]
  }

  statement {
    sid       = "Trace"
    actions   = ["xray:GetSamplingRules", "xray:GetSamplingTargets", "xray:PutTelemetryRecords", "xray:PutTraceSegments"]
    resources = ["*"]
  }
}

resource "aws_iam_role" "states" {
  name               = "${var.name_prefix}-state-machine"
  description        = "inventory-vacuum daily state machine: start the job runs, publish failures"
  assume_role_policy = data.aws_iam_policy_document.states_trust.json
}

resource "aws_iam_role_policy" "states" {
  name   = "state-machine"
  role   = aws_iam_role.states.id
  policy = data.aws_iam_policy_document.states.json
}

resource "aws_sfn_state_machine" "daily" {
  name       = local.state_machine_name
  role_arn   = aws_iam_role.states.arn
  definition = jsonencode(local.definition)

  logging_configuration {
    log_destination        = "${aws_cloudwatch_log_group.states.arn}:*"
    include_execution_data = true
    level                  = "ERROR"
  }

  tracing_configuration {
    enabled = true
  }

  # the role's policy must exist before the first execution
  depends_on = [aws_iam_role_policy.states]
}

# ---- The schedule -------------------------------------------------------------------------------------

data "aws_iam_policy_document" "scheduler_trust" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = local.schedule_source_arns
    }
  }
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid       = "StartTheDailyRun"
    actions   = ["states:StartExecution"]
    resources = [aws_sfn_state_machine.daily.arn]
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${var.name_prefix}-scheduler"
  description        = "inventory-vacuum schedule: start the daily state machine"
  assume_role_policy = data.aws_iam_policy_document.scheduler_trust.json
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "scheduler"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.scheduler.json
}

resource "aws_scheduler_schedule" "daily" {
  #checkov:skip=CKV_AWS_297: a customer managed key would protect only the schedule's target input, which is {} here
  name                         = "${var.name_prefix}-daily"
  group_name                   = "default"
  description                  = "inventory-vacuum: ingest, vacuum, chargeback"
  schedule_expression          = var.schedule_expression
  schedule_expression_timezone = var.schedule_timezone

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_sfn_state_machine.daily.arn
    role_arn = aws_iam_role.scheduler.arn
    input    = jsonencode({})

    retry_policy {
      maximum_retry_attempts       = 3
      maximum_event_age_in_seconds = 3600
    }
  }
}
