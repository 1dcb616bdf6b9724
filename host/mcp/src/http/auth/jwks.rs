//! The authorization server's JWKS, fetched over HTTPS and cached.
//!
//! Design decisions:
//!
//! - **HTTPS only, verified.** The key set decides who gets in, so it is
//!   fetched only over TLS (rustls, ring) against the web's roots, or
//!   against exactly the roots in `[http.oauth] jwks_ca_file` (an internal
//!   authorization server; the tests' own CA). No plain-HTTP exception,
//!   not even on the loopback: the tests serve their JWKS over TLS too.
//!   Redirects stay on HTTPS (ureq's `https_only`).
//! - **Fetched when first needed, then kept.** The first token fetches the
//!   set; a set older than [`JwksSettings::refresh_after`] is refreshed in
//!   the background while its keys keep serving; one older than
//!   [`JwksSettings::max_age`] (the server unreachable that long) is no
//!   longer trusted, so a key the authorization server withdrew stops
//!   working within that time whatever the network does.
//! - **An unknown `kid` refetches, at most once per
//!   [`JwksSettings::min_refetch_interval`].** Key rotation then works
//!   without a restart, while a stream of tokens with made-up `kid`s
//!   costs the authorization server one request per interval, not one
//!   each. Concurrent requests wait for the one fetch under way instead of
//!   starting their own.
//! - **A failed fetch refuses, never admits, never panics.** An endpoint
//!   down, slow (bounded by [`JwksSettings::timeout`]), answering non-200,
//!   huge (more than [`JwksSettings::max_body_bytes`]) or garbage leaves the
//!   previous set in place (within its age) or none: a token it cannot
//!   check is refused as invalid, and a warning names the cause.
//! - **Blocking I/O off the runtime.** ureq is a blocking client (the
//!   host's one HTTP client, as `fetch` and telemetry use it); a fetch runs
//!   on the blocking pool.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;

use super::config_error::AuthConfigError;
use super::key_set::{KeySet, Lookup, VerificationKey};

/// How the cache behaves (the defaults in production; tests shorten them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JwksSettings {
    /// A set older than this is refreshed (in the background).
    pub(crate) refresh_after: Duration,
    /// A set older than this is not used at all.
    pub(crate) max_age: Duration,
    /// The least time between two fetches on an unknown `kid` or a failure.
    pub(crate) min_refetch_interval: Duration,
    /// The whole of one fetch: connect, TLS, request, body.
    pub(crate) timeout: Duration,
    /// The largest JWKS document read.
    pub(crate) max_body_bytes: u64,
}

impl Default for JwksSettings {
    fn default() -> Self {
        JwksSettings {
            refresh_after: Duration::from_secs(5 * 60),
            max_age: Duration::from_secs(60 * 60),
            min_refetch_interval: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
            max_body_bytes: 256 * 1024,
        }
    }
}

/// A key set and when it was fetched.
#[derive(Debug)]
struct Fetched {
    keys: KeySet,
    at: Instant,
}

/// Why no key was found for a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// The set (fresh) has no key with the token's `kid`.
    Unknown,
    /// The key named does not allow the token's algorithm.
    WrongAlgorithm,
    /// No `kid`, several keys fit.
    Ambiguous,
    /// No usable set: the endpoint could not be read.
    Unavailable,
}

/// The JWKS of one `jwks_uri`.
#[derive(Debug)]
pub(crate) struct JwksCache {
    uri: String,
    agent: ureq::Agent,
    settings: JwksSettings,
    current: RwLock<Option<Arc<Fetched>>>,
    /// Held through a fetch: when the last one started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    refreshing: AtomicBool,
    fetches: AtomicU64,
}

impl JwksCache {
    /// A cache for `uri`, trusting the roots in `ca_file` (PEM) instead of
    /// the web's when given.
    pub(crate) fn new(
        uri: &str,
        ca_file: Option<&Path>,
        settings: JwksSettings,
    ) -> Result<JwksCache, AuthConfigError> {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(path) = ca_file {
            tls = tls.root_certs(read_roots(path)?);
        }
        let config = ureq::Agent::config_builder()
            .https_only(true)
            .max_redirects(3)
            .timeout_global(Some(settings.timeout))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .build();
        Ok(JwksCache {
            uri: uri.to_owned(),
            agent: ureq::Agent::new_with_config(config),
            settings,
            current: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
            refreshing: AtomicBool::new(false),
            fetches: AtomicU64::new(0),
        })
    }

    /// How many fetches were started (tests: the refetch bounds).
    #[cfg(test)]
    pub(crate) fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    fn snapshot(&self) -> Option<Arc<Fetched>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn usable(&self, fetched: &Fetched) -> bool {
        fetched.at.elapsed() < self.settings.max_age
    }

    /// The key a token with `kid` and `alg` is checked with.
    pub(crate) async fn key_for(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Arc<VerificationKey>, KeyError> {
        let seen = self.snapshot();
        if let Some(fetched) = seen.as_ref().filter(|f| self.usable(f)) {
            match find(fetched, kid, alg) {
                Ok(key) => {
                    if fetched.at.elapsed() >= self.settings.refresh_after {
                        self.refresh_in_background();
                    }
                    return Ok(key);
                }
                Err(KeyError::Unknown) => {}
                Err(other) => return Err(other),
            }
        }
        // Unknown kid, or no usable set: fetch, once per interval.
        let mut last = self.fetching.lock().await;
        let now = self.snapshot();
        let changed = match (&seen, &now) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, Some(_)) => true,
            _ => false,
        };
        if !changed && last.is_none_or(|at| at.elapsed() >= self.settings.min_refetch_interval) {
            *last = Some(Instant::now());
            self.fetch_now().await;
        }
        drop(last);
        match self.snapshot().filter(|f| self.usable(f)) {
            Some(fetched) => find(&fetched, kid, alg),
            None => Err(KeyError::Unavailable),
        }
    }

    /// Fetch the set now unless a fetch was ever started: at a server's
    /// start, so a wrong `jwks_uri` or CA shows in the log at once and the
    /// first caller does not wait for the keys.
    pub(crate) async fn prefetch(&self) {
        let mut last = self.fetching.lock().await;
        if last.is_none() {
            *last = Some(Instant::now());
            self.fetch_now().await;
        }
    }

    /// Fetch the set in the background, unless a fetch is under way or the
    /// last started within the refetch interval.
    fn refresh_in_background(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            let mut last = cache.fetching.lock().await;
            if last.is_none_or(|at| at.elapsed() >= cache.settings.min_refetch_interval) {
                *last = Some(Instant::now());
                cache.fetch_now().await;
            }
            drop(last);
            cache.refreshing.store(false, Ordering::Release);
        });
    }

    /// One fetch; on success the new set replaces the old.
    async fn fetch_now(&self) {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let agent = self.agent.clone();
        let uri = self.uri.clone();
        let max = self.settings.max_body_bytes;
        let fetched = tokio::task::spawn_blocking(move || fetch_blocking(&agent, &uri, max))
            .await
            .unwrap_or_else(|e| Err(format!("the fetch task failed: {e}")));
        match fetched.and_then(|body| KeySet::parse(&body)) {
            Ok(keys) => {
                tracing::debug!(uri = %self.uri, keys = keys.len(), "fetched the authorization server's JWKS");
                *self
                    .current
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(Fetched {
                    keys,
                    at: Instant::now(),
                }));
            }
            Err(why) => tracing::warn!(
                uri = %self.uri,
                "could not fetch the authorization server's keys (OAuth tokens that need them are refused): {why}"
            ),
        }
    }
}

fn find(
    fetched: &Fetched,
    kid: Option<&str>,
    alg: Algorithm,
) -> Result<Arc<VerificationKey>, KeyError> {
    match fetched.keys.lookup(kid, alg) {
        Lookup::Found(key) => Ok(Arc::clone(key)),
        Lookup::Unknown => Err(KeyError::Unknown),
        Lookup::WrongAlgorithm => Err(KeyError::WrongAlgorithm),
        Lookup::Ambiguous => Err(KeyError::Ambiguous),
    }
}

/// GET `uri`: its body when the answer is 200 and at most `max` bytes.
fn fetch_blocking(agent: &ureq::Agent, uri: &str, max: u64) -> Result<Vec<u8>, String> {
    let mut response = agent
        .get(uri)
        .header("Accept", "application/jwk-set+json, application/json")
        .call()
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status != 200 {
        return Err(format!("the answer was {status}, not 200"));
    }
    response
        .body_mut()
        .with_config()
        .limit(max)
        .read_to_vec()
        .map_err(|e| format!("the body could not be read (at most {max} bytes): {e}"))
}

/// The certificates of the PEM file at `path`.
fn read_roots(path: &Path) -> Result<ureq::tls::RootCerts, AuthConfigError> {
    let refused = |why: String| AuthConfigError::CaFile {
        path: path.to_path_buf(),
        why,
    };
    let pem = std::fs::read(path).map_err(|e| refused(e.to_string()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let ureq::tls::PemItem::Certificate(cert) = item.map_err(|e| refused(e.to_string()))? {
            certs.push(cert);
        }
    }
    if certs.is_empty() {
        return Err(refused("it holds no PEM certificate".into()));
    }
    Ok(ureq::tls::RootCerts::new_with_certs(&certs))
}
