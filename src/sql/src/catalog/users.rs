//! Users (roles that log in) and their SCRAM-SHA-256 verifiers.
//!
//! A password is never stored: `CREATE USER ... PASSWORD 'pw'` stores PostgreSQL's verifier
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (RFC 5802/7677, base64 fields),
//! from which a server can check a client's proof but not recover the password or log in as
//! the user. A client may also send a verifier it computed itself (psql's `\password` does);
//! it is stored as given once it parses.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};
use serde::{Deserialize, Serialize};

use super::FIRST_USER_OID;

/// PostgreSQL's default SCRAM iteration count.
pub const SCRAM_ITERATIONS: u32 = 4096;

/// A user (`CREATE USER`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserCatalog {
    /// Object id (OID = 16384 + id).
    pub id: u32,
    /// User name (case as stored: folded unless quoted).
    pub name: String,
    /// SCRAM-SHA-256 verifier, if the user has a password.
    pub verifier: Option<String>,
    /// May log in.
    pub login: bool,
    /// Superuser.
    pub superuser: bool,
}

impl UserCatalog {
    /// PostgreSQL OID.
    pub fn oid(&self) -> u32 {
        FIRST_USER_OID + self.id
    }
}

/// A parsed SCRAM-SHA-256 verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `SHA-256(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), msg).as_ref().to_vec()
}

impl ScramVerifier {
    /// The verifier of `password` with `salt` (the password is SASLprep-normalized first, as
    /// libpq does; one that cannot be normalized is used as is, as PostgreSQL does).
    pub fn new(password: &str, salt: &[u8], iterations: u32) -> Self {
        let normalized = stringprep::saslprep(password).map(|p| p.into_owned()).unwrap_or_else(|_| password.to_string());
        let mut salted = [0u8; 32];
        let rounds = std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
        pbkdf2::derive(pbkdf2::PBKDF2_HMAC_SHA256, rounds, salt, normalized.as_bytes(), &mut salted);
        let client_key = hmac_sha256(&salted, b"Client Key");
        let stored_key = digest::digest(&digest::SHA256, &client_key).as_ref().to_vec();
        let server_key = hmac_sha256(&salted, b"Server Key");
        Self { iterations, salt: salt.to_vec(), stored_key, server_key }
    }

    /// The verifier of `password` with a fresh random 16-byte salt.
    pub fn generate(password: &str) -> Self {
        let salt: [u8; 16] = rand::random();
        Self::new(password, &salt, SCRAM_ITERATIONS)
    }

    /// A verifier no password matches, the same for the same `user` and `secret`: what an
    /// unknown user is checked against, so that (as in PostgreSQL) the exchange looks the same
    /// as for a real user, salt included, and fails the same way.
    pub fn mock(secret: &[u8], user: &str) -> Self {
        let derive = |what: &[u8]| {
            let mut ctx = digest::Context::new(&digest::SHA256);
            ctx.update(secret);
            ctx.update(what);
            ctx.update(user.as_bytes());
            ctx.finish().as_ref().to_vec()
        };
        Self { iterations: SCRAM_ITERATIONS, salt: derive(b"salt")[..16].to_vec(), stored_key: derive(b"stored"), server_key: derive(b"server") }
    }

    /// Parses PostgreSQL's text form; `None` if `text` is not a SCRAM-SHA-256 verifier.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let v = Self {
            iterations: iterations.parse().ok().filter(|n| *n > 0)?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored).ok()?,
            server_key: STANDARD.decode(server).ok()?,
        };
        (v.stored_key.len() == 32 && v.server_key.len() == 32 && !v.salt.is_empty()).then_some(v)
    }

    /// PostgreSQL's text form.
    pub fn to_text(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }

    /// True if `password` is the password this verifier was made from.
    pub fn matches(&self, password: &str) -> bool {
        let other = Self::new(password, &self.salt, self.iterations);
        // Compared in constant time.
        other.stored_key.len() == self.stored_key.len()
            && other.stored_key.iter().zip(&self.stored_key).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiers_round_trip_and_check_passwords() {
        let v = ScramVerifier::generate("s3cret");
        let text = v.to_text();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"));
        assert!(!text.contains("s3cret"));
        let back = ScramVerifier::parse(&text).expect("parses");
        assert_eq!(back, v);
        assert!(back.matches("s3cret"));
        assert!(!back.matches("s3cret "));
        assert!(ScramVerifier::parse("md5abc").is_none());
        assert!(ScramVerifier::parse("SCRAM-SHA-256$0:AAAA$AAAA:AAAA").is_none());
    }

    #[test]
    fn the_server_signature_matches_rfc_7677() {
        // RFC 7677, section 3: user "user", password "pencil".
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let v = ScramVerifier::new("pencil", &salt, 4096);
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth = format!("n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r={nonce}");
        let signature = STANDARD.encode(hmac_sha256(&v.server_key, auth.as_bytes()));
        assert_eq!(signature, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }
}
