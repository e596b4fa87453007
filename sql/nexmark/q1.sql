-- q1: currency conversion.
CREATE MATERIALIZED VIEW nexmark_q1 AS SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid;
