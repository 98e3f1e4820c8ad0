--@ The pricing shared by the analysts' queries: each query's "--@include _pricing.sql" line is
--@ replaced by the lines below (chargeback.sql.sql_text; lines starting with --@ are left out).
-- Reads three views: inventory (the inventory Delta table, e.g. CREATE TEMPORARY VIEW inventory AS
-- SELECT * FROM delta.`s3://meta/warehouse/inventory`), prices (price_key, price_per_gb_month,
-- minimum_billable_bytes, overhead_bytes, standard_overhead_bytes, monitoring_per_object,
-- monitoring_minimum_bytes: one row per storage class and per INTELLIGENT_TIERING:<access tier>,
-- see README "Chargeback") and owners (table, owner: the entries of tables.yaml).
-- Spark SQL / Databricks SQL; the same rules as `inventory-vacuum chargeback`.
WITH objects AS (
  SELECT
    i.`table`,
    i.storage_class,
    CASE
      WHEN i.storage_class IS NULL THEN '(none)'
      WHEN i.storage_class = 'INTELLIGENT_TIERING'
        THEN concat('INTELLIGENT_TIERING:', coalesce(i.intelligent_tiering_access_tier, 'FREQUENT'))
      ELSE i.storage_class
    END AS price_key,
    coalesce(i.length, 0) AS length
  FROM inventory i
  WHERE coalesce(i.is_latest, true) AND NOT coalesce(i.is_delete_marker, false)
),
standard AS (
  SELECT price_per_gb_month FROM prices WHERE price_key = 'STANDARD'
),
priced AS (
  SELECT
    o.`table`,
    o.price_key,
    o.length,
    -- 1 GB = 2^30 bytes; minimum billable size and archive overhead at the class's price, the
    -- archive classes' 8 KB of metadata at STANDARD, a class missing from prices at STANDARD
    ((greatest(o.length, coalesce(p.minimum_billable_bytes, 0)) + coalesce(p.overhead_bytes, 0))
        * coalesce(p.price_per_gb_month, s.price_per_gb_month)
      + coalesce(p.standard_overhead_bytes, 0) * s.price_per_gb_month) / 1073741824
    + CASE
        WHEN o.storage_class = 'INTELLIGENT_TIERING' AND o.length >= coalesce(p.monitoring_minimum_bytes, 0)
          THEN coalesce(p.monitoring_per_object, 0)
        ELSE 0
      END AS monthly_cost
  FROM objects o
  LEFT JOIN prices p ON p.price_key = o.price_key
  CROSS JOIN standard s
)
