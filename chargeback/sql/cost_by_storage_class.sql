-- Monthly storage cost per storage class (INTELLIGENT_TIERING split by access tier).
--@ (`python -m chargeback.sql cost_by_storage_class` prints this query runnable, the shared pricing included)
--@include _pricing.sql
SELECT
  price_key AS storage_class,
  count(*) AS objects,
  sum(length) AS bytes,
  sum(monthly_cost) AS monthly_cost
FROM priced
GROUP BY price_key
ORDER BY monthly_cost DESC, storage_class
