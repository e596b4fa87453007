//! `connector = 'nexmark'`: the Nexmark benchmark's streams (RisingWave's options).
//!
//! Events are numbered globally; event `i` is a person if `i % 50 == 0`, an auction if
//! `i % 50` is 1..=3, else a bid (the standard 1 : 3 : 46 proportions). A source of
//! `nexmark.table.type` = `Person`, `Auction` or `Bid` emits the events of its type among the
//! first `nexmark.event.num` (default unbounded); split `k` of `nexmark.split.num` takes events
//! `k, k + n, ...`. Event `i`'s time is the base time (the source's creation, or
//! `nexmark.base.time` in ms since the epoch) plus `i × nexmark.min.event.gap.in.ns`
//! (default 100 µs). With `nexmark.use.real.time = 'true'` events are not emitted before their
//! time; otherwise as fast as the view consumes them. `nexmark.max.chunk.size` (default 1024)
//! bounds rows per chunk.
//!
//! Values follow the reference generator's shape (ids with the in-flight auction and
//! active-person windows, hot auctions, bidders and sellers, prices `10^(6u) × 100`, the four
//! hot channels, 5 categories) from a deterministic per-event random stream: the same event
//! number always gives the same event, which is what exact resume needs. The values are not
//! byte-identical to another engine's generator.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder};
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use eddy_stream::SplitReader;
use tokio::time::Instant;

use crate::datagen::BASE_TIME_OPTION;
use crate::options::Options;
use crate::random::Rng;
use crate::{decode_u64, Seekable};

const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const PROPORTION_DENOMINATOR: u64 = 50;
const FIRST_PERSON_ID: i64 = 1000;
const FIRST_AUCTION_ID: i64 = 1000;
const FIRST_CATEGORY_ID: i64 = 10;
const NUM_CATEGORIES: u64 = 5;
const NUM_IN_FLIGHT_AUCTIONS: u64 = 100;
const NUM_ACTIVE_PEOPLE: u64 = 1000;
const AUCTION_ID_LEAD: u64 = 10;
const PERSON_ID_LEAD: u64 = 10;
/// Hot auctions / bidders / sellers are multiples of this.
const HOT_RATIO: u64 = 100;
const HOT_AUCTION_RATIO: u64 = 2;
const HOT_BIDDER_RATIO: u64 = 4;
const HOT_SELLER_RATIO: u64 = 4;
const HOT_CHANNEL_RATIO: u64 = 2;
const CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
const FIRST_NAMES: [&str; 11] = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"];
const LAST_NAMES: [&str; 9] = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"];
const CITIES: [&str; 10] = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"];
const STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];

/// Which stream a source emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableType {
    Person,
    Auction,
    Bid,
}

impl TableType {
    /// The columns a source of this type can declare.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            TableType::Person => &["id", "name", "email_address", "credit_card", "city", "state", "date_time", "extra"],
            TableType::Auction => &["id", "item_name", "description", "initial_bid", "reserve", "date_time", "expires", "seller", "category", "extra"],
            TableType::Bid => &["auction", "bidder", "price", "channel", "url", "date_time", "extra"],
        }
    }

    fn of_event(i: u64) -> TableType {
        let rem = i % PROPORTION_DENOMINATOR;
        if rem < PERSON_PROPORTION {
            TableType::Person
        } else if rem < PERSON_PROPORTION + AUCTION_PROPORTION {
            TableType::Auction
        } else {
            TableType::Bid
        }
    }
}

fn last_base0_person_id(event: u64) -> u64 {
    event / PROPORTION_DENOMINATOR
}

fn last_base0_auction_id(event: u64) -> u64 {
    let epoch = event / PROPORTION_DENOMINATOR;
    let offset = event % PROPORTION_DENOMINATOR;
    if offset < PERSON_PROPORTION {
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    } else {
        epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION
    }
}

fn next_base0_auction_id(event: u64, rng: &mut Rng) -> u64 {
    let max = last_base0_auction_id(event);
    let min = max.saturating_sub(NUM_IN_FLIGHT_AUCTIONS);
    min + rng.below(max - min + 1 + AUCTION_ID_LEAD)
}

fn next_base0_person_id(event: u64, rng: &mut Rng) -> u64 {
    let people = last_base0_person_id(event) + 1;
    let active = people.min(NUM_ACTIVE_PEOPLE);
    people - active + rng.below(active + PERSON_ID_LEAD)
}

fn next_price(rng: &mut Rng) -> i64 {
    (10f64.powf(rng.unit() * 6.0) * 100.0).round() as i64
}

/// Random extra bytes to bring an event near its average size.
fn extra(rng: &mut Rng, out: &mut String) {
    let len = rng.below(20) as usize;
    rng.letters(len, out);
}

/// The generator of one split.
struct NexmarkSplit {
    /// The columns to produce (by name), in the source's order and types.
    schema: SchemaRef,
    table: TableType,
    /// Splits in all (this split's events are `count` apart).
    count: u64,
    /// Next global event number this split looks at (its position).
    next_event: u64,
    /// Events in the whole stream.
    event_num: u64,
    /// Event time of event 0, microseconds since the epoch.
    base_us: i64,
    /// Event time step.
    gap_ns: u64,
    /// Emit events no earlier than their time.
    real_time: bool,
    /// When this reader started, and the event time at that moment (real-time pacing).
    started: Instant,
    started_at_event_us: i64,
    max_chunk: usize,
}

/// The splits of a nexmark source.
pub(crate) fn splits(options: &Options, schema: &SchemaRef) -> Result<Vec<Box<dyn Seekable>>> {
    let table = match options.get("nexmark.table.type").map(|t| t.to_ascii_lowercase()) {
        Some(t) if t == "person" => TableType::Person,
        Some(t) if t == "auction" => TableType::Auction,
        Some(t) if t == "bid" => TableType::Bid,
        Some(t) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "nexmark.table.type must be Person, Auction or Bid, not '{t}'")),
        None => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "source option 'nexmark.table.type' is required (Person, Auction or Bid)")),
    };
    for f in schema.fields() {
        if !table.columns().contains(&f.name().as_str()) {
            return Err(user_err!(
                sqlstate::UNDEFINED_COLUMN,
                "a nexmark {table:?} source has no column \"{}\" (columns: {})",
                f.name(),
                table.columns().join(", ")
            ));
        }
    }
    let count = options.number("nexmark.split.num", 1u64)?.max(1);
    let event_num = options.number("nexmark.event.num", u64::MAX)?;
    let gap_ns = options.number("nexmark.min.event.gap.in.ns", 100_000u64)?;
    let base_ms: Option<i64> = options.get("nexmark.base.time").map(|_| options.number("nexmark.base.time", 0i64)).transpose()?;
    let base_us = match base_ms {
        Some(ms) => ms.saturating_mul(1000),
        None => options.number(BASE_TIME_OPTION, 0i64)?,
    };
    let real_time = options.flag("nexmark.use.real.time", false)?;
    let max_chunk = options.number("nexmark.max.chunk.size", 1024usize)?.clamp(1, 1 << 16);
    Ok((0..count)
        .map(|index| {
            Box::new(NexmarkSplit {
                schema: schema.clone(),
                table,
                count,
                next_event: index,
                event_num,
                base_us,
                gap_ns,
                real_time,
                started: Instant::now(),
                started_at_event_us: i64::MIN,
                max_chunk,
            }) as Box<dyn Seekable>
        })
        .collect())
}

/// Builders for the columns of one chunk.
enum Col {
    Int(Int64Builder),
    Str(StringBuilder),
    Time(TimestampMicrosecondBuilder),
}

impl NexmarkSplit {
    fn event_time_us(&self, event: u64) -> i64 {
        self.base_us.saturating_add(((u128::from(event) * u128::from(self.gap_ns)) / 1000).min(i64::MAX as u128) as i64)
    }

    /// True if the next event may be emitted now (real-time pacing).
    fn due(&self, event: u64) -> bool {
        !self.real_time || self.ready_at_event(event) <= Instant::now()
    }

    fn ready_at_event(&self, event: u64) -> Instant {
        let ahead_us = self.event_time_us(event).saturating_sub(self.started_at_event_us).max(0) as u64;
        self.started + Duration::from_micros(ahead_us)
    }

    fn generate(&self, event: u64, cols: &mut [Col], scratch: &mut String) {
        let mut rng = Rng::new(0x006e_6578_6d61_726b, event);
        let ts = self.event_time_us(event);
        let names = self.schema.fields();
        // Values are drawn in one fixed order per type, whichever columns are declared.
        match self.table {
            TableType::Bid => {
                let auction = if rng.below(HOT_AUCTION_RATIO) > 0 {
                    (last_base0_auction_id(event) / HOT_RATIO) * HOT_RATIO
                } else {
                    next_base0_auction_id(event, &mut rng)
                } as i64
                    + FIRST_AUCTION_ID;
                let bidder = if rng.below(HOT_BIDDER_RATIO) > 0 {
                    (last_base0_person_id(event) / HOT_RATIO) * HOT_RATIO + 1
                } else {
                    next_base0_person_id(event, &mut rng)
                } as i64
                    + FIRST_PERSON_ID;
                let price = next_price(&mut rng);
                let (channel, url) = if rng.below(HOT_CHANNEL_RATIO) > 0 {
                    let c = rng.below(4) as usize;
                    (CHANNELS[c].to_string(), format!("https://www.nexmark.com/{}/item.htm?query=1", CHANNELS[c].to_lowercase()))
                } else {
                    let c = rng.below(10_000);
                    let mut path = String::new();
                    rng.letters(5, &mut path);
                    (format!("channel-{c}"), format!("https://www.nexmark.com/{path}/item.htm?query=1&channel_id={c}"))
                };
                scratch.clear();
                extra(&mut rng, scratch);
                for (f, col) in names.iter().zip(cols.iter_mut()) {
                    match (f.name().as_str(), col) {
                        ("auction", Col::Int(b)) => b.append_value(auction),
                        ("bidder", Col::Int(b)) => b.append_value(bidder),
                        ("price", Col::Int(b)) => b.append_value(price),
                        ("channel", Col::Str(b)) => b.append_value(&channel),
                        ("url", Col::Str(b)) => b.append_value(&url),
                        ("date_time", Col::Time(b)) => b.append_value(ts),
                        ("extra", Col::Str(b)) => b.append_value(scratch.as_str()),
                        _ => {}
                    }
                }
            }
            TableType::Auction => {
                let id = last_base0_auction_id(event) as i64 + FIRST_AUCTION_ID;
                let seller = if rng.below(HOT_SELLER_RATIO) > 0 {
                    (last_base0_person_id(event) / HOT_RATIO) * HOT_RATIO
                } else {
                    next_base0_person_id(event, &mut rng)
                } as i64
                    + FIRST_PERSON_ID;
                let category = FIRST_CATEGORY_ID + rng.below(NUM_CATEGORIES) as i64;
                let initial_bid = next_price(&mut rng);
                let reserve = initial_bid + next_price(&mut rng);
                // Auctions run for up to ~2 × (in-flight auctions × the time between them).
                let span_us = (NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR / AUCTION_PROPORTION) as u128 * u128::from(self.gap_ns) / 1000;
                let expires = ts.saturating_add(rng.below((2 * span_us).clamp(1, u64::MAX as u128) as u64) as i64);
                let mut item = String::new();
                rng.letters(20, &mut item);
                let mut description = String::new();
                rng.letters(100, &mut description);
                scratch.clear();
                extra(&mut rng, scratch);
                for (f, col) in names.iter().zip(cols.iter_mut()) {
                    match (f.name().as_str(), col) {
                        ("id", Col::Int(b)) => b.append_value(id),
                        ("item_name", Col::Str(b)) => b.append_value(&item),
                        ("description", Col::Str(b)) => b.append_value(&description),
                        ("initial_bid", Col::Int(b)) => b.append_value(initial_bid),
                        ("reserve", Col::Int(b)) => b.append_value(reserve),
                        ("date_time", Col::Time(b)) => b.append_value(ts),
                        ("expires", Col::Time(b)) => b.append_value(expires),
                        ("seller", Col::Int(b)) => b.append_value(seller),
                        ("category", Col::Int(b)) => b.append_value(category),
                        ("extra", Col::Str(b)) => b.append_value(scratch.as_str()),
                        _ => {}
                    }
                }
            }
            TableType::Person => {
                let id = last_base0_person_id(event) as i64 + FIRST_PERSON_ID;
                let name = format!("{} {}", FIRST_NAMES[rng.below(11) as usize], LAST_NAMES[rng.below(9) as usize]);
                let mut email = String::new();
                rng.letters(7, &mut email);
                email.push('@');
                rng.letters(5, &mut email);
                email.push_str(".com");
                let card = (0..4).map(|_| format!("{:04}", rng.below(10_000))).collect::<Vec<_>>().join(" ");
                let city = CITIES[rng.below(CITIES.len() as u64) as usize];
                let state = STATES[rng.below(STATES.len() as u64) as usize];
                scratch.clear();
                extra(&mut rng, scratch);
                for (f, col) in names.iter().zip(cols.iter_mut()) {
                    match (f.name().as_str(), col) {
                        ("id", Col::Int(b)) => b.append_value(id),
                        ("name", Col::Str(b)) => b.append_value(&name),
                        ("email_address", Col::Str(b)) => b.append_value(&email),
                        ("credit_card", Col::Str(b)) => b.append_value(&card),
                        ("city", Col::Str(b)) => b.append_value(city),
                        ("state", Col::Str(b)) => b.append_value(state),
                        ("date_time", Col::Time(b)) => b.append_value(ts),
                        ("extra", Col::Str(b)) => b.append_value(scratch.as_str()),
                        _ => {}
                    }
                }
            }
        }
    }

    fn builders(&self) -> Vec<Col> {
        self.schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                "date_time" | "expires" => Col::Time(TimestampMicrosecondBuilder::new()),
                "name" | "email_address" | "credit_card" | "city" | "state" | "extra" | "item_name" | "description" | "channel" | "url" => {
                    Col::Str(StringBuilder::new())
                }
                _ => Col::Int(Int64Builder::new()),
            })
            .collect()
    }
}

impl SplitReader for NexmarkSplit {
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>> {
        if self.started_at_event_us == i64::MIN {
            self.started = Instant::now();
            self.started_at_event_us = self.event_time_us(self.next_event);
        }
        let mut cols = self.builders();
        let mut scratch = String::new();
        let mut rows = 0;
        let limit = max_rows.min(self.max_chunk);
        while rows < limit && self.next_event < self.event_num && self.due(self.next_event) {
            let e = self.next_event;
            self.next_event = e.saturating_add(self.count);
            if TableType::of_event(e) == self.table {
                self.generate(e, &mut cols, &mut scratch);
                rows += 1;
            }
        }
        if rows == 0 && self.next_event >= self.event_num {
            return Ok(None);
        }
        let columns = cols
            .into_iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                let a: ArrayRef = match c {
                    Col::Int(mut b) => Arc::new(b.finish()),
                    Col::Str(mut b) => Arc::new(b.finish()),
                    Col::Time(mut b) => Arc::new(b.finish()),
                };
                if a.data_type() == f.data_type() {
                    return Ok(a);
                }
                if matches!(f.data_type(), DataType::Timestamp(..)) {
                    return Ok(arrow::compute::cast(&a, f.data_type())?);
                }
                eddy_common::cast::cast_checked(&a, f.data_type())
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }

    fn position(&self) -> Vec<u8> {
        self.next_event.to_be_bytes().to_vec()
    }

    fn ready_at(&self) -> Option<Instant> {
        (self.real_time && self.started_at_event_us != i64::MIN && self.next_event < self.event_num).then(|| self.ready_at_event(self.next_event))
    }

    /// Rows of this split's table still to come: those due by now when paced in real time,
    /// else all up to `nexmark.event.num` (`None`: an endless stream read as fast as it can be).
    fn backlog(&self) -> Option<u64> {
        let end = if self.real_time {
            if self.started_at_event_us == i64::MIN {
                return None;
            }
            // The first event not due yet (event times only grow).
            let (mut lo, mut hi) = (self.next_event, self.event_num.min(self.next_event.saturating_add(1 << 40)));
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if self.due(mid) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        } else if self.event_num == u64::MAX {
            return None;
        } else {
            self.event_num
        };
        // This split's events are `count` apart; the table has its share of them.
        let events = end.saturating_sub(self.next_event).div_ceil(self.count.max(1));
        let share = match self.table {
            TableType::Person => PERSON_PROPORTION,
            TableType::Auction => AUCTION_PROPORTION,
            TableType::Bid => PROPORTION_DENOMINATOR - PERSON_PROPORTION - AUCTION_PROPORTION,
        };
        Some((u128::from(events) * u128::from(share) / u128::from(PROPORTION_DENOMINATOR)) as u64)
    }
}

impl Seekable for NexmarkSplit {
    fn seek(&mut self, position: &[u8]) -> Result<()> {
        self.next_event = decode_u64(position)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema, TimeUnit};

    use super::*;

    fn bid_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new("price", DataType::Int64, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new("date_time", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]))
    }

    fn opts(pairs: &[(&str, &str)]) -> Options {
        Options::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn bids_are_46_of_every_50_events_and_resume_exactly() {
        let o = opts(&[("nexmark.table.type", "Bid"), ("nexmark.event.num", "1000")]);
        let mut s = splits(&o, &bid_schema()).unwrap().pop().unwrap();
        let first = s.next_batch(300).unwrap().unwrap();
        let pos = s.position();
        let mut rest = 0;
        let mut batches = vec![];
        while let Some(b) = s.next_batch(300).unwrap() {
            rest += b.num_rows();
            batches.push(b);
        }
        assert_eq!(first.num_rows() + rest, 920);
        let mut again = splits(&o, &bid_schema()).unwrap().pop().unwrap();
        again.seek(&pos).unwrap();
        assert_eq!(again.next_batch(300).unwrap().unwrap(), batches[0]);
    }

    #[test]
    fn two_splits_emit_the_same_events_as_one() {
        let one = opts(&[("nexmark.table.type", "Bid"), ("nexmark.event.num", "500")]);
        let two = opts(&[("nexmark.table.type", "Bid"), ("nexmark.event.num", "500"), ("nexmark.split.num", "2")]);
        let count = |o: &Options| -> usize {
            let mut n = 0;
            for mut s in splits(o, &bid_schema()).unwrap() {
                while let Some(b) = s.next_batch(100).unwrap() {
                    n += b.num_rows();
                }
            }
            n
        };
        assert_eq!(count(&one), count(&two));
    }

    #[test]
    fn a_bounded_stream_reports_the_rows_still_to_come() {
        let o = opts(&[("nexmark.table.type", "Bid"), ("nexmark.event.num", "1000")]);
        let mut s = splits(&o, &bid_schema()).unwrap().pop().unwrap();
        assert_eq!(s.backlog(), Some(920));
        let first = s.next_batch(300).unwrap().unwrap();
        let left = s.backlog().unwrap();
        // Counted by the table's share of the events left, exact to a few rows.
        assert!(left.abs_diff(920 - first.num_rows() as u64) <= 3, "{left} after {} rows", first.num_rows());
        while s.next_batch(300).unwrap().is_some() {}
        assert_eq!(s.backlog(), Some(0));
        let endless = splits(&opts(&[("nexmark.table.type", "Bid")]), &bid_schema()).unwrap().pop().unwrap();
        assert_eq!(endless.backlog(), None);
    }

    #[test]
    fn an_unknown_column_is_named() {
        let schema = Arc::new(Schema::new(vec![Field::new("colour", DataType::Utf8, true)]));
        let e = splits(&opts(&[("nexmark.table.type", "Bid")]), &schema).err().unwrap();
        assert!(e.message.contains("colour"), "{}", e.message);
    }
}
