-- q0: pass-through.
CREATE MATERIALIZED VIEW nexmark_q0 AS SELECT auction, bidder, price, date_time FROM bid;
