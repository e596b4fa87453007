-- q19: the ten highest bids of each auction (group top-N).
CREATE MATERIALIZED VIEW nexmark_q19 AS
SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid) B
WHERE rank_number <= 10;
