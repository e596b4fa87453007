-- q12: bids per bidder in processing-time windows of 10 seconds (p_time: when the bid was
-- written, RisingWave's PROCTIME()).
CREATE MATERIALIZED VIEW nexmark_q12 AS
SELECT bidder, count(*) AS bid_count, window_start, window_end
FROM TUMBLE(bid, p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
