//! DataFusion integration (layer 3 of the SQL crate): scalar functions, checked arithmetic,
//! PostgreSQL text casts, the table providers that read Eddy's state, and the stream planner
//! that turns a view's `LogicalPlan` into incremental operators. It reads the database only
//! through [`crate::catalog::Relations`].

pub mod arbitrary;
pub mod date_input;
pub mod enums;
pub mod grouping_sets;
pub mod interval_join;
pub mod jsonb;
pub mod lazy_logic;
pub mod jsonb_value;
pub mod to_json;
pub mod names;
pub mod numeric_div;
pub mod optimizer_rules;
pub mod ordered_set;
pub mod overflow;
pub mod parse;
pub mod pg_aggregates;
pub mod physical_rules;
pub mod provider;
pub mod stream_plan;
pub mod temporal;
pub mod text_cast;
pub mod truth_tests;
pub mod udf;
pub mod settings;
pub mod single_value;
