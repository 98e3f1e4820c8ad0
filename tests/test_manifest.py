"""Finding and verifying deliveries: boto3 against the moto S3 server (no Spark)."""

from datetime import date

import pytest

from core.errors import DeliveryError, InventoryDataError
from core.paths import StorageLocation
from inventory.manifest import find_delivery
from tests.support.deliveries import CSV_SCHEMA, csv_gz, put_delivery

pytestmark = pytest.mark.smoke

ROW = [["src", "a.txt", "1", "2024-01-15T00:00:00.000Z", "e", "STANDARD", "false", "SSE-S3"]]


def destination(bucket: str) -> StorageLocation:
    return StorageLocation.parse(f"s3://{bucket}/inventory")


def test_newest_complete_delivery_wins_and_in_progress_is_skipped(s3, bucket):
    put_delivery(s3, bucket, "src", "daily", "2024-01-14T01-00Z", {"a.csv.gz": csv_gz(ROW)})
    put_delivery(s3, bucket, "src", "daily", "2024-01-15T01-00Z", {"b.csv.gz": csv_gz(ROW)})
    put_delivery(s3, bucket, "src", "weekly", "2024-01-16T01-00Z", {"c.csv.gz": csv_gz(ROW)})
    # a delivery still being written: data present, no manifest.json yet
    s3.put_object(Bucket=bucket, Key="inventory/src/daily/2024-01-16T01-00Z/manifest.checksum", Body=b"x")
    delivery = find_delivery(s3, destination(bucket), "src", "daily")
    assert delivery.manifest_key == "inventory/src/daily/2024-01-15T01-00Z/manifest.json"
    assert delivery.inventory_date == "2024-01-15"
    assert delivery.file_format == "CSV"
    assert [f.key for f in delivery.files] == ["inventory/src/daily/data/b.csv.gz"]
    older = find_delivery(s3, destination(bucket), "src", "daily", date(2024, 1, 14))
    assert older.manifest_key.endswith("2024-01-14T01-00Z/manifest.json")
    assert find_delivery(s3, destination(bucket), "src", "weekly").inventory_date == "2024-01-16"


def test_paginates_many_delivery_folders(s3, bucket):
    for day in range(1, 4):
        put_delivery(s3, bucket, "src", "daily", f"2024-02-0{day}T01-00Z", {f"{day}.csv.gz": csv_gz(ROW)})
    client = s3
    paginator = client.get_paginator("list_objects_v2")
    pages = list(paginator.paginate(Bucket=bucket, Prefix="inventory/src/daily/", Delimiter="/", MaxKeys=1))
    assert len(pages) > 1  # the folders span several pages, and all are still found
    assert find_delivery(s3, destination(bucket), "src", "daily").inventory_date == "2024-02-03"


def test_no_delivery_for_date(s3, bucket):
    put_delivery(s3, bucket, "src", "daily", "2024-01-15T01-00Z", {"a.csv.gz": csv_gz(ROW)})
    with pytest.raises(
        DeliveryError, match="no complete S3 Inventory delivery for 2024-01-20 for bucket src"
    ):
        find_delivery(s3, destination(bucket), "src", "daily", date(2024, 1, 20))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"manifest_body": b"{not json"}, "not valid JSON"),
        (
            {"manifest_overrides": {"files": None}, "manifest_body": b'{"sourceBucket": "src"}'},
            "missing field",
        ),
        ({"checksum": "0" * 32}, "does not match manifest.checksum"),
        ({"file_format": "Avro"}, "unknown fileFormat 'Avro'"),
        ({"file_schema": "Bucket, Size, LastModifiedDate"}, "fileSchema has no Key field"),
        ({"file_schema": "Bucket, Key, LastModifiedDate"}, "fileSchema has no Size field"),
        ({"manifest_overrides": {"sourceBucket": "other"}}, "sourceBucket is 'other'"),
        ({"manifest_overrides": {"files": []}}, "'files' must be a non-empty list"),
    ],
)
def test_bad_manifests_are_refused_with_their_location(s3, bucket, kwargs, message):
    put_delivery(s3, bucket, "src", "daily", "2024-01-15T01-00Z", {"a.csv.gz": csv_gz(ROW)}, **kwargs)
    with pytest.raises(DeliveryError, match=message) as error:
        find_delivery(s3, destination(bucket), "src", "daily")
    assert f"s3://{bucket}/inventory/src/daily/2024-01-15T01-00Z/manifest.json" in str(error.value)
    assert "\n" not in str(error.value)


def test_missing_checksum_is_refused(s3, bucket):
    put_delivery(s3, bucket, "src", "daily", "2024-01-15T01-00Z", {"a.csv.gz": csv_gz(ROW)})
    s3.delete_object(Bucket=bucket, Key="inventory/src/daily/2024-01-15T01-00Z/manifest.checksum")
    with pytest.raises(DeliveryError, match="manifest.checksum is missing"):
        find_delivery(s3, destination(bucket), "src", "daily")


def test_missing_or_truncated_data_file_is_refused(s3, bucket):
    put_delivery(
        s3, bucket, "src", "daily", "2024-01-15T01-00Z", {"a.csv.gz": csv_gz(ROW), "b.csv.gz": csv_gz(ROW)}
    )
    s3.delete_object(Bucket=bucket, Key="inventory/src/daily/data/b.csv.gz")
    with pytest.raises(InventoryDataError, match="data/b.csv.gz is missing"):
        find_delivery(s3, destination(bucket), "src", "daily")
    s3.put_object(Bucket=bucket, Key="inventory/src/daily/data/b.csv.gz", Body=b"short")
    with pytest.raises(InventoryDataError, match="has 5 bytes, the manifest says"):
        find_delivery(s3, destination(bucket), "src", "daily")


def test_schema_fields_of_each_format(s3, bucket):
    from inventory.schema import file_schema_fields

    assert file_schema_fields("CSV", CSV_SCHEMA)[:4] == ["bucket", "key", "size", "last_modified_date"]
    assert file_schema_fields("CSV", "Bucket, Key, ETag, IsMultipartUploaded")[2:] == [
        "e_tag",
        "is_multipart_uploaded",
    ]
    assert file_schema_fields("ORC", "struct<bucket:string,key:string,size:bigint>") == [
        "bucket",
        "key",
        "size",
    ]
    parquet = "message s3.inventory { required binary bucket (STRING); optional int64 size; required binary key (UTF8);}"
    assert file_schema_fields("Parquet", parquet) == ["bucket", "size", "key"]
