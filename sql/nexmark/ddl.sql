-- Nexmark's three event types as tables (the schema RisingWave's Nexmark benchmark uses),
-- plus the side table of q13.
CREATE TABLE person (id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP, extra VARCHAR);
CREATE TABLE auction (id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR);
-- bid's p_time is the processing time (when the row was written), for q12.
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR, p_time TIMESTAMPTZ AS PROCTIME());
CREATE TABLE side_input (key BIGINT PRIMARY KEY, value VARCHAR);
