-- Monthly storage cost per registered table; objects under no registered table are 'unowned'.
--@ (`python -m chargeback.sql cost_by_table` prints this query runnable, the shared pricing included)
--@include _pricing.sql
SELECT
  coalesce(`table`, 'unowned') AS `table`,
  count(*) AS objects,
  sum(length) AS bytes,
  sum(monthly_cost) AS monthly_cost
FROM priced
GROUP BY coalesce(`table`, 'unowned')
ORDER BY monthly_cost DESC, `table`
