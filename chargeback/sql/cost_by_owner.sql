-- Monthly storage cost per owner (tables.yaml); objects under no registered table are 'unowned',
-- objects of a table tables.yaml no longer lists are 'unknown'.
--@ (`python -m chargeback.sql cost_by_owner` prints this query runnable, the shared pricing included)
--@include _pricing.sql
SELECT
  CASE WHEN p.`table` IS NULL THEN 'unowned' ELSE coalesce(w.owner, 'unknown') END AS owner,
  count(*) AS objects,
  sum(p.length) AS bytes,
  sum(p.monthly_cost) AS monthly_cost
FROM priced p
LEFT JOIN owners w ON w.`table` = p.`table`
GROUP BY CASE WHEN p.`table` IS NULL THEN 'unowned' ELSE coalesce(w.owner, 'unknown') END
ORDER BY monthly_cost DESC, owner
