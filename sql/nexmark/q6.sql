-- q6: average selling price by seller over its last ten closed auctions (over-window).
CREATE MATERIALIZED VIEW nexmark_q6 AS
SELECT Q.seller, AVG(Q.final) OVER (PARTITION BY Q.seller ORDER BY Q.date_time ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg
FROM (
    SELECT MAX(B.price) AS final, A.seller, MAX(B.date_time) AS date_time
    FROM auction AS A, bid AS B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.seller
) AS Q;
