//! Connection startup: the trust path (parameters, backend key, ReadyForQuery) and the
//! parameters sent on the SCRAM path, from the client's startup parameters.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{protocol_negotiation, save_startup_parameters_to_metadata, ServerParameterProvider, StartupHandler};
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::response::{ReadyForQuery, TransactionStatus};
use pgwire::messages::startup::{Authentication, BackendKeyData, ParameterStatus, SecretKey};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::Handlers;

/// Parses the startup `options` parameter (`-c a=b`, `-ca=b`, `--a=b`).
pub(super) fn parse_options(options: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        let setting = if w == "-c" {
            words.next().map(|s| s.to_string())
        } else if let Some(r) = w.strip_prefix("-c") {
            Some(r.to_string())
        } else {
            w.strip_prefix("--").map(|r| r.to_string())
        };
        if let Some((k, v)) = setting.as_deref().and_then(|s| s.split_once('=')) {
            out.push((k.replace('-', "_"), v.to_string()));
        }
    }
    out
}

/// ParameterStatus values sent after authentication.
fn startup_parameters<C: ClientInfo>(client: &C) -> HashMap<String, String> {
    let meta = client.metadata();
    let mut p = HashMap::new();
    p.insert("server_version".into(), eddy_sql::planner::settings::PG_VERSION.into());
    p.insert("server_encoding".into(), "UTF8".into());
    p.insert("client_encoding".into(), "UTF8".into());
    p.insert("DateStyle".into(), meta.get("DateStyle").cloned().unwrap_or_else(|| "ISO, MDY".into()));
    p.insert("TimeZone".into(), meta.get("TimeZone").cloned().unwrap_or_else(|| "UTC".into()));
    p.insert("IntervalStyle".into(), "postgres".into());
    p.insert("integer_datetimes".into(), "on".into());
    p.insert("standard_conforming_strings".into(), "on".into());
    p.insert("is_superuser".into(), "on".into());
    p.insert("in_hot_standby".into(), "off".into());
    p.insert("default_transaction_read_only".into(), "off".into());
    p.insert("session_authorization".into(), meta.get("user").cloned().unwrap_or_else(|| "root".into()));
    p.insert("application_name".into(), meta.get("application_name").cloned().unwrap_or_default());
    if let Some(v) = meta.get("extra_float_digits") {
        p.insert("extra_float_digits".into(), v.clone());
    }
    p
}

/// Server parameters for the SCRAM startup path.
#[derive(Debug)]
pub struct EddyParameters;

impl ServerParameterProvider for EddyParameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        Some(startup_parameters(client))
    }
}

/// Startup: trust, or SCRAM-SHA-256 when a password is configured.
pub enum Startup {
    Trust(Arc<Handlers>),
    Scram(SASLAuthStartupHandler<EddyParameters>),
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let handlers = match self {
            Startup::Scram(s) => return s.on_startup(client, message).await,
            Startup::Trust(h) => h,
        };
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            let pid = handlers.next_pid.fetch_add(1, Ordering::Relaxed);
            let key = SecretKey::I32(rand::random::<i32>());
            client.set_pid_and_secret_key(pid, key.clone());
            let (handle, guard) = handlers.manager.register(pid, key.clone());
            client.session_extensions().insert(handle);
            client.session_extensions().insert(guard);
            client.feed(PgWireBackendMessage::Authentication(Authentication::Ok)).await?;
            for (k, v) in startup_parameters(client) {
                client.feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(k, v))).await?;
            }
            client.feed(PgWireBackendMessage::BackendKeyData(BackendKeyData::new(pid, key))).await?;
            client.send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(TransactionStatus::Idle))).await?;
            client.set_state(PgWireConnectionState::ReadyForQuery);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_options_accept_every_spelling() {
        let o = parse_options("-c search_path=a -csearch_path=b --search-path=c");
        assert_eq!(o, vec![("search_path".into(), "a".into()), ("search_path".into(), "b".into()), ("search_path".into(), "c".into())]);
    }
}
