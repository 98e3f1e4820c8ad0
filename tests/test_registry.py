import pytest

from core.errors import ConfigError, UsageError
from core.paths import StorageLocation
from core.registry import load_registry, parse_registry

pytestmark = pytest.mark.smoke

GOOD = """
tables:
  - name: events
    path: s3://lake/warehouse/events
    owner: growth
  - name: events_v2
    path: s3a://lake/warehouse/events_v2/
    owner: ads
    retain_hours: 240
  - name: local
    path: file:///tmp/tables/local
    owner: me
    enabled: false
"""


def test_valid_registry_parses_and_selects():
    registry = parse_registry(GOOD)
    assert [t.name for t in registry.select(None)] == ["events", "events_v2"]  # disabled skipped
    assert registry.get("events_v2").location == StorageLocation("s3a", "lake", "warehouse/events_v2")
    assert registry.get("events_v2").retain_hours == 240.0
    assert [t.name for t in registry.select(["local"])] == ["local"]  # named: even when disabled


def test_unknown_table_is_a_usage_error():
    with pytest.raises(UsageError, match="'nope' is not registered"):
        parse_registry(GOOD).select(["events", "nope"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tables: [{name: a, path: s3://b/t, owner: x, colour: red}]", "unknown key.*colour"),
        (
            "tables: [{name: a, path: s3://b/t, owner: x}, {name: a, path: s3://b/u, owner: y}]",
            "'a' appears twice",
        ),
        ("tables: [{name: a, path: hdfs://nn/t, owner: x}]", "must start with s3://"),
        ("tables: [{name: a, path: /tmp/t, owner: x}]", "must start with s3://"),
        (
            "tables: [{name: a, path: s3://b/w/t, owner: x}, {name: c, path: s3a://b/w/t/inner, owner: y}]",
            "overlap",
        ),
        ("tables: [{name: a, path: s3://b/t, owner: x}, {name: c, path: s3://b/t, owner: y}]", "overlap"),
        ("tables: [{name: a, path: s3://b/t}]", "'owner' is required"),
        ("tables: [{name: a, path: s3://b/t, owner: x, retain_hours: soon}]", "retain_hours"),
        ("tables: [{name: a, path: s3://b/t, owner: x, enabled: maybe}]", "enabled"),
        ("tables: [{name: a, path: s3://bucket, owner: x}]", "whole bucket"),
        ("tables: {a: 1}", "'tables' must be a list"),
        ("other: []", "expected a mapping with a 'tables' list"),
        ("tables: [\n  - {", "not valid YAML"),
        ("tables: []\nextra: 1", "unknown top-level key"),
    ],
)
def test_invalid_registries_give_one_line_errors(text, message):
    with pytest.raises(ConfigError, match=message) as error:
        parse_registry(text, "conf/tables.yaml")
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("conf/tables.yaml")


def test_sibling_with_shared_name_prefix_is_not_nested():
    registry = parse_registry(
        "tables: [{name: a, path: s3://b/w/events, owner: x}, {name: b, path: s3://b/w/events_v2, owner: y}]"
    )
    assert len(registry.tables) == 2


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read tables file"):
        load_registry(str(tmp_path / "absent.yaml"))


def test_paths_parse_all_schemes():
    assert StorageLocation.parse("s3://b/k/").key == "k"
    assert StorageLocation.parse("file:/tmp/x") == StorageLocation.parse("file:///tmp/x/")
    assert StorageLocation.parse("s3://b/a#b?c%20").key == "a#b?c%20"
    assert StorageLocation.parse("s3a://b/w/e").same_place(StorageLocation.parse("s3://b/w/e"))
    assert not StorageLocation.parse("s3://b/w/e").contains(StorageLocation.parse("s3://b/w/e_v2"))
    assert (
        StorageLocation.parse("s3://b/w/inventory").sibling("inventory_runs").uri == "s3://b/w/inventory_runs"
    )
