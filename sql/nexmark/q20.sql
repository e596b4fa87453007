-- q20: bids with the auction's details, for one category (join).
CREATE MATERIALIZED VIEW nexmark_q20 AS
SELECT auction, bidder, price, channel, url, B.date_time, B.extra, item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires, seller, category
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
