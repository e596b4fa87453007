-- q13: bids enriched from a side table (a plain join of the side table's current contents).
CREATE MATERIALIZED VIEW nexmark_q13 AS
SELECT B.auction, B.bidder, B.price, B.date_time, S.value FROM bid B JOIN side_input S ON B.auction = S.key;
