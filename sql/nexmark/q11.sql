-- q11: each bidder's sessions, a session ending once 10 seconds pass without a bid. Written
-- with window functions (a bid 10 seconds or more after the bidder's previous one starts a
-- new session, and a running count of session starts numbers them), as Eddy has no
-- SESSION() window; the result is the Nexmark query's: bids per session, its first bid's
-- time and 10 seconds after its last.
CREATE MATERIALIZED VIEW nexmark_q11 AS
SELECT bidder, count(*) AS bid_count, min(date_time) AS starttime, max(date_time) + INTERVAL '10' SECOND AS endtime
FROM (
    SELECT bidder, date_time,
           sum(new_session) OVER (PARTITION BY bidder ORDER BY date_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session
    FROM (
        SELECT bidder, date_time,
               CASE WHEN lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time) > date_time - INTERVAL '10' SECOND THEN 0 ELSE 1 END AS new_session
        FROM bid
    ) starts
) sessions
GROUP BY bidder, session;
