# inventory-vacuum on AWS: S3 Inventory of the source buckets, the destination bucket, four
# least-privilege job roles (restore is run by hand), an EMR Serverless application, a daily Step
# Functions run and, optionally, the source buckets' restore window (noncurrent versions expire).
# See docs/deploy-on-aws.md and docs/versioned-buckets.md.

terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = var.tags
  }
}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

data "aws_region" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name
}
