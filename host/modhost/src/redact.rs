//! Masking: a call's secret values never leave the host in what the call
//! returns.
//!
//! A call granted secrets (`crate::secrets`) gets a [`Redactor`] for their
//! values. Everything its module said passes through it once, as the run
//! ends and before any of it is looked at, kept or passed on
//! (`crate::invoke`): the response (output, text, artifacts, warnings, an
//! error's message, remedy, problems, kind and extra data), the
//! notifications, the host's warnings quoting the module, the stderr tail,
//! a failure's description, and the hosts its egress proxy saw. Progress
//! reaches a live listener through [`Redactor::relay`], masked the same way.
//! So the outcome, the error, the CLI's output, the MCP server's results,
//! spilled outputs and audit records are built from masked data only.
//!
//! Design decisions:
//!
//! - **Each occurrence becomes `[REDACTED:NAME]`**, naming the secret so a
//!   person reading a failure knows what was there.
//! - **Decoded strings, not raw bytes.** A module's answer is parsed first,
//!   then every string of it (object keys too, and a number whose digits
//!   hold a value) is masked: a value written with JSON escapes (`\"`,
//!   `\u0041`) or split across reads of the pipe is whole again there. The
//!   stderr tail, free text, is masked as assembled, not read by read.
//! - **Simple encodings are masked too:** a value as JSON escapes it (JSON
//!   quoted inside text), percent-encoded (in a URL, either hex case), as
//!   hex (either case), and base64 in both alphabets at each of the three
//!   alignments a value can have inside a longer encoded text (an HTTP
//!   Basic `Authorization` header encodes `user:token`): for each, the run
//!   of base64 characters the value alone decides, so at most a character
//!   or two of the neighbours' bits stays at each end. Also every byte as
//!   `%XX`, the bytes as a decimal list (and a JSON array of byte numbers
//!   that holds a value becomes the marker: a buffer serialized as JSON),
//!   and a value of several lines (a PEM key) with CRLF endings and line
//!   by line.
//! - **A tail cut through a value** (the stderr tail keeps the last bytes
//!   only) loses the start of the value to the cut: when the tail is long
//!   enough to have been cut, a beginning that is the end of a value is
//!   masked as well.
//! - **What this does not do:** a module that was given a secret can always
//!   give it away on purpose (reversed, encrypted, case-changed, spaced
//!   with invisible characters, a byte per call, in a file it writes, to a
//!   host it may reach). Masking catches the value a
//!   module prints by accident or by a simple trick; what keeps a secret
//!   from a module is the grant, and the confinement of the modules that
//!   did not get it.
//! - **Nothing for a call without secrets:** its redactor is empty and
//!   every function here returns at once.
//! - **Log lines are masked with every value the process has handed out**
//!   ([`mask_log_line`]): a module's words reach logs by ways that skip a
//!   call's outcome (a `CONNECT` target the egress proxy logs at debug, a
//!   warning quoting the module), and a line may be written after its call
//!   ended. A value, once given to a call, is remembered for the life of
//!   the process; the command line's log writer masks each line with them.

use std::sync::RwLock;

use modhost_egress::Contacts;
use modhost_runner::{CallSecret, Exchange, NotificationSink, RunError, STDERR_TAIL_BYTES};
use modproto::{ErrorKind, Notification, RpcError};
use serde_json::Value;

/// The values of one call's secrets, and how to mask them.
#[derive(Default)]
pub(crate) struct Redactor {
    secrets: Vec<Masked>,
}

/// The shortest start of a value masked where an excerpt was cut through
/// it: shorter ones would mask ordinary words.
const MIN_CUT_START: usize = 4;

/// Every secret value this process has handed to a call, for its log lines.
static HANDED_OUT: RwLock<Vec<Masked>> = RwLock::new(Vec::new());

/// `line` with every form of every secret value this process has handed to
/// a call masked; `None` when it holds none, or when no call got a secret
/// (one uncontended read lock then). For what writes the process's log.
pub fn mask_log_line(line: &str) -> Option<String> {
    let handed_out = HANDED_OUT
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    mask_all(&handed_out, line)
}

/// Remember `secret` for [`mask_log_line`], once per distinct value.
fn remember(secret: &Masked) {
    let known = |all: &[Masked]| all.iter().any(|m| m == secret);
    if known(&HANDED_OUT.read().unwrap_or_else(|p| p.into_inner())) {
        return;
    }
    let mut all = HANDED_OUT.write().unwrap_or_else(|p| p.into_inner());
    if !known(&all) {
        all.push(secret.clone());
    }
}

/// `text` with every form of every one of `secrets` masked; `None` when it
/// holds none.
fn mask_all(secrets: &[Masked], text: &str) -> Option<String> {
    if secrets.is_empty() {
        return None;
    }
    let mut hits: Vec<(usize, usize, usize)> = Vec::new();
    for (which, secret) in secrets.iter().enumerate() {
        for form in &secret.forms {
            hits.extend(
                text.match_indices(form.as_str())
                    .map(|(at, _)| (at, at + form.len(), which)),
            );
        }
    }
    if hits.is_empty() {
        return None;
    }
    hits.sort_unstable();
    // Overlapping hits (two forms, two values) become one marker.
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(hits.len());
    for (start, end, which) in hits {
        match spans.last_mut() {
            Some(last) if start < last.1 => last.1 = last.1.max(end),
            _ => spans.push((start, end, which)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, which) in spans {
        out.push_str(&text[at..start]);
        out.push_str(&secrets[which].marker);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// One secret: its marker and every form of its value that is masked.
#[derive(Clone, PartialEq, Eq)]
struct Masked {
    marker: String,
    forms: Vec<String>,
}

impl Redactor {
    /// A redactor for `secrets`' values, each also remembered for the
    /// process's log lines ([`mask_log_line`]).
    pub(crate) fn new(secrets: &[CallSecret]) -> Redactor {
        let secrets: Vec<Masked> = secrets
            .iter()
            .map(|s| Masked {
                marker: format!("[REDACTED:{}]", s.name()),
                forms: forms(s.value()),
            })
            .collect();
        secrets.iter().for_each(remember);
        Redactor { secrets }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every form of every value masked; `None` when it holds
    /// none (nothing is copied then).
    pub(crate) fn mask(&self, text: &str) -> Option<String> {
        mask_all(&self.secrets, text)
    }

    /// Mask `text` in place, and the start of a value an excerpt was cut
    /// through ([`Redactor::cut_excerpts`]).
    pub(crate) fn text(&self, text: &mut String) {
        if let Some(masked) = self.mask(text) {
            *text = masked;
        }
        self.cut_excerpts(text);
    }

    /// An excerpt of a module's line in a host message
    /// (`modproto::framing`: the first bytes, quoted, then `...`) may be cut
    /// through a value, leaving a start no form matches: a start of a form
    /// of at least [`MIN_CUT_START`] bytes just before such a cut is masked.
    fn cut_excerpts(&self, text: &mut String) {
        const CUT: &str = "\"...";
        if self.secrets.is_empty() || !text.contains(CUT) {
            return;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(CUT) {
            let before = &rest[..at];
            // The longest start of a form, shorter than it, that `before`
            // ends with.
            let hit = self.longest_cut(|form, at| {
                let start = &form[..at];
                (start.len() >= MIN_CUT_START && before.ends_with(start)).then_some(start.len())
            });
            match hit {
                Some((len, marker)) => {
                    out.push_str(&before[..before.len() - len]);
                    out.push_str(marker);
                }
                None => out.push_str(before),
            }
            out.push_str(CUT);
            rest = &rest[at + CUT.len()..];
        }
        out.push_str(rest);
        *text = out;
    }

    /// Mask every string of `value`: values, object keys, and a number
    /// whose digits hold a value (made the marker's string).
    pub(crate) fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.text(text),
            Value::Array(items) => {
                if let Some(marker) = self.value_held_as_bytes(items) {
                    *value = Value::String(marker.to_owned());
                    return;
                }
                items.iter_mut().for_each(|item| self.value(item));
            }
            Value::Object(map) => {
                if map.keys().any(|key| self.mask(key).is_some()) {
                    let entries = std::mem::take(map);
                    *map = entries
                        .into_iter()
                        .map(|(key, value)| (self.mask(&key).unwrap_or(key), value))
                        .collect();
                }
                map.values_mut().for_each(|item| self.value(item));
            }
            Value::Number(number) => {
                if let Some(masked) = self.mask(&number.to_string()) {
                    *value = Value::String(masked);
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// The marker of a value that `items`, all integers 0 to 255, hold as
    /// bytes (a byte buffer serialized as a JSON array): the whole array
    /// becomes that marker.
    fn value_held_as_bytes(&self, items: &[Value]) -> Option<&str> {
        if items.len() < crate::secrets::MIN_SECRET_BYTES {
            return None;
        }
        let bytes: Vec<u8> = items
            .iter()
            .map(|item| item.as_u64().and_then(|n| u8::try_from(n).ok()))
            .collect::<Option<_>>()?;
        self.secrets
            .iter()
            .find(|secret| {
                secret.forms.iter().any(|form| {
                    let form = form.as_bytes();
                    bytes.windows(form.len()).any(|window| window == form)
                })
            })
            .map(|secret| secret.marker.as_str())
    }

    fn texts<'a>(&self, texts: impl IntoIterator<Item = &'a mut String>) {
        texts.into_iter().for_each(|text| self.text(text));
    }

    /// A module's error answer: message, kind, remedy, problems and any
    /// other data it sent.
    pub(crate) fn rpc_error(&self, error: &mut RpcError) {
        self.text(&mut error.message);
        if let Some(data) = &mut error.data {
            if let Some(kind) = self.mask(data.kind.as_str()) {
                data.kind = ErrorKind::from_wire(&kind);
            }
            if let Some(remedy) = &mut data.remedy {
                self.text(remedy);
            }
            self.texts(&mut data.problems);
            let mut extra = Value::Object(std::mem::take(&mut data.extra));
            self.value(&mut extra);
            if let Value::Object(extra) = extra {
                data.extra = extra;
            }
        }
    }

    /// A notification, as kept in the exchange and as relayed live.
    pub(crate) fn notification(&self, notification: &mut Notification) {
        self.text(&mut notification.method);
        if let Some(params) = &mut notification.params {
            self.value(params);
        }
    }

    /// Everything a call that answered brought back.
    pub(crate) fn exchange(&self, exchange: &mut Exchange) {
        if self.is_empty() {
            return;
        }
        match &mut exchange.response.outcome {
            Ok(result) => self.value(result),
            Err(error) => self.rpc_error(error),
        }
        exchange
            .notifications
            .iter_mut()
            .for_each(|n| self.notification(n));
        self.texts(&mut exchange.host_warnings);
        self.tail(&mut exchange.stderr_tail);
    }

    /// A run's result, masked ([`Redactor::exchange`],
    /// [`Redactor::run_error`]).
    pub(crate) fn ran(&self, mut ran: Result<Exchange, RunError>) -> Result<Exchange, RunError> {
        match &mut ran {
            Ok(exchange) => self.exchange(exchange),
            Err(error) => self.run_error(error),
        }
        ran
    }

    /// A call that did not answer: its description (which may quote the
    /// module's bytes) and its stderr tail.
    pub(crate) fn run_error(&self, error: &mut RunError) {
        if self.is_empty() {
            return;
        }
        // Every variant by name, none by a catch-all: a new one that
        // carries the module's words must be masked here too.
        match error {
            RunError::Timeout { stderr_tail, .. }
            | RunError::OutputLimit { stderr_tail, .. }
            | RunError::MemoryLimit { stderr_tail, .. }
            | RunError::NativeMemoryLimit { stderr_tail, .. } => self.tail(stderr_tail),
            RunError::Trapped {
                trap: words,
                stderr_tail,
            }
            | RunError::Crashed {
                status: words,
                stderr_tail,
            }
            | RunError::BadResponse {
                problem: words,
                stderr_tail,
            } => {
                self.text(words);
                self.tail(stderr_tail);
            }
            RunError::Spawn { message } => self.text(message),
            RunError::Unconfined { reason, remedy } => self.texts([reason, remedy]),
            RunError::Cancelled => {}
        }
    }

    /// The hosts a call's module asked its egress proxy for: names it chose.
    pub(crate) fn contacts(&self, contacts: &mut Contacts) {
        self.texts(&mut contacts.contacted);
        for refusal in &mut contacts.refused {
            self.texts([&mut refusal.host, &mut refusal.reason]);
        }
    }

    /// A stderr tail: masked as text, and, when it is long enough to have
    /// been cut at its start, a beginning that is the end of a value too.
    pub(crate) fn tail(&self, tail: &mut String) {
        self.text(tail);
        if tail.len() < STDERR_TAIL_BYTES {
            return;
        }
        // A cut inside a multi-byte character shows as replacement
        // characters before the rest.
        let body = tail.len() - tail.trim_start_matches('\u{FFFD}').len();
        let rest = &tail[body..];
        // The longest end of a form, shorter than it, that `rest` starts
        // with.
        let cut = self.longest_cut(|form, at| {
            let end = &form[at..];
            rest.starts_with(end).then_some(end.len())
        });
        if let Some((len, marker)) = cut {
            *tail = format!("{marker}{}", &tail[body + len..]);
        }
    }

    /// Over every form of every value, cut at each character boundary
    /// inside it: the longest piece `fits` accepts (it returns the piece's
    /// length), with its value's marker. What a cut through a value left
    /// (a truncated tail's start, an excerpt's end) is found this way.
    fn longest_cut(&self, fits: impl Fn(&str, usize) -> Option<usize>) -> Option<(usize, &str)> {
        self.secrets
            .iter()
            .flat_map(|s| s.forms.iter().map(move |form| (form, s.marker.as_str())))
            .flat_map(|(form, marker)| {
                (1..form.len())
                    .filter(|&at| form.is_char_boundary(at))
                    .filter_map(|at| fits(form, at).map(|len| (len, marker)))
                    .collect::<Vec<_>>()
            })
            .max_by_key(|(len, _)| *len)
    }

    /// Where a call's live notifications go: to `sink` through this
    /// redactor. For a call without secrets, `sink` itself and nothing to
    /// forward; else a sink of its own, whose notifications the returned
    /// [`Relay`] masks and forwards until the sink's every sender is gone.
    pub(crate) fn relay<'a>(
        &'a self,
        sink: Option<&NotificationSink>,
    ) -> (Option<NotificationSink>, Relay<'a>) {
        match sink {
            Some(sink) if !self.is_empty() => {
                let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
                let route = Some((receiver, sink.clone()));
                (
                    Some(sender),
                    Relay {
                        redactor: self,
                        route,
                    },
                )
            }
            sink => (
                sink.cloned(),
                Relay {
                    redactor: self,
                    route: None,
                },
            ),
        }
    }
}

/// Live notifications on their way to a listener, masked
/// ([`Redactor::relay`]).
pub(crate) struct Relay<'a> {
    redactor: &'a Redactor,
    route: Option<(
        tokio::sync::mpsc::UnboundedReceiver<Notification>,
        NotificationSink,
    )>,
}

impl Relay<'_> {
    /// Forward every notification, masked, in order, until the call's end
    /// of the channel is dropped.
    pub(crate) async fn forward(self) {
        let Some((mut receiver, sink)) = self.route else {
            return;
        };
        while let Some(mut notification) = receiver.recv().await {
            self.redactor.notification(&mut notification);
            // A listener that went away only stops listening.
            let _ = sink.send(notification);
        }
    }
}

/// The forms of `value` that are masked: itself, JSON-escaped,
/// percent-encoded and hex (both cases), and its base64 cores.
fn forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_owned()];
    if let Ok(quoted) = serde_json::to_string(value) {
        forms.push(quoted[1..quoted.len() - 1].to_owned());
    }
    forms.push(percent_encoded(value, b"0123456789ABCDEF"));
    forms.push(percent_encoded(value, b"0123456789abcdef"));
    forms.push(every_byte_percent_encoded(value, b"0123456789ABCDEF"));
    forms.push(every_byte_percent_encoded(value, b"0123456789abcdef"));
    // Bytes written as decimal numbers in text (a JSON byte array printed,
    // Node's `Buffer` as JSON); an array in a module's JSON answer is
    // checked as bytes (`Redactor::value`).
    forms.push(decimal_list(value.as_bytes(), ","));
    forms.push(decimal_list(value.as_bytes(), ", "));
    // A value of several lines (a PEM key): with CRLF endings, and each
    // line long enough to mask alone.
    if value.contains('\n') {
        forms.push(value.replace("\r\n", "\n").replace('\n', "\r\n"));
        forms.extend(
            value
                .lines()
                .map(|line| line.trim_end_matches('\r'))
                .filter(|line| line.len() >= crate::secrets::MIN_SECRET_BYTES)
                .map(str::to_owned),
        );
    }
    forms.push(hex(value.as_bytes(), b"0123456789abcdef"));
    forms.push(hex(value.as_bytes(), b"0123456789ABCDEF"));
    for alphabet in [BASE64, BASE64_URL] {
        forms.extend((0..3).map(|offset| base64_core(value.as_bytes(), offset, alphabet)));
    }
    forms.retain(|form| !form.is_empty());
    forms.sort_unstable();
    forms.dedup();
    forms
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` percent-encoded: every byte but RFC 3986's unreserved ones as
/// `%XX` in the given hex digits.
fn percent_encoded(value: &str, digits: &[u8; 16]) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for &byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push('%');
            out.push(digits[usize::from(byte >> 4)] as char);
            out.push(digits[usize::from(byte & 0xf)] as char);
        }
    }
    out
}

/// Every byte of `value` as `%XX`.
fn every_byte_percent_encoded(value: &str, digits: &[u8; 16]) -> String {
    value
        .bytes()
        .flat_map(|b| {
            [
                b'%',
                digits[usize::from(b >> 4)],
                digits[usize::from(b & 0xf)],
            ]
        })
        .map(char::from)
        .collect()
}

/// `bytes` as decimal numbers joined by `separator`.
fn decimal_list(bytes: &[u8], separator: &str) -> String {
    bytes
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

fn hex(bytes: &[u8], digits: &[u8; 16]) -> String {
    bytes
        .iter()
        .flat_map(|b| [digits[usize::from(b >> 4)], digits[usize::from(b & 0xf)]])
        .map(char::from)
        .collect()
}

/// The base64 characters that `bytes` alone decide when they start
/// `offset` (0, 1 or 2) bytes into a longer encoded text: the characters
/// whose six bits all come from `bytes`.
fn base64_core(bytes: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(bytes);
    let encoded = base64(&padded, alphabet);
    let first = (8 * offset).div_ceil(6);
    let end = (8 * (offset + bytes.len()) / 6).min(encoded.len());
    encoded.get(first..end).unwrap_or_default().to_owned()
}

/// `bytes` in base64, without padding.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOKEN: &str = "ghp_S3cr3t\"Value\\42";

    fn redactor() -> Redactor {
        Redactor::new(&[CallSecret::new("GH_TOKEN", TOKEN)])
    }

    /// Encodings a module produces without meaning to: every byte
    /// percent-encoded, a byte buffer as a JSON array or printed as one, a
    /// multi-line value with CRLF endings or one of its lines.
    #[test]
    fn byte_lists_every_byte_escapes_and_lines_of_a_value_are_masked() {
        let value = "tok-0123456789";
        let pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----";
        let r = Redactor::new(&[CallSecret::new("TOK", value), CallSecret::new("PEM", pem)]);
        let bytes: Vec<Value> = value.bytes().map(|b| json!(b)).collect();
        let mut output = json!({
            "buffer": {"type": "Buffer", "data": bytes},
            "plain_numbers": [1, 2, 3, 4, 5, 6, 7, 8, 9],
            "printed": format!("data: {}", decimal_list(value.as_bytes(), ",")),
            "escaped": every_byte_percent_encoded(value, b"0123456789abcdef"),
            "crlf": pem.replace('\n', "\r\n"),
            "one_line": "key line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here",
        });
        r.value(&mut output);
        assert_eq!(output["buffer"]["data"], json!("[REDACTED:TOK]"));
        assert_eq!(output["plain_numbers"], json!([1, 2, 3, 4, 5, 6, 7, 8, 9]));
        assert_eq!(output["printed"], json!("data: [REDACTED:TOK]"));
        assert_eq!(output["escaped"], json!("[REDACTED:TOK]"));
        assert_eq!(output["crlf"], json!("[REDACTED:PEM]"));
        assert_eq!(output["one_line"], json!("key line [REDACTED:PEM] here"));
    }

    /// A bad line's excerpt in a host message stops after 80 bytes, perhaps
    /// inside a value: the start left before the cut is masked too.
    #[test]
    fn an_excerpt_cut_through_a_value_keeps_no_start_of_it() {
        let r = Redactor::new(&[CallSecret::new("TOK", "tokSECRETvalue_9Zq")]);
        let mut message =
            "not JSON: \"DEBUG GET /api header Authorization: Bearer tokSEC\"...".to_owned();
        r.text(&mut message);
        assert_eq!(
            message,
            "not JSON: \"DEBUG GET /api header Authorization: Bearer [REDACTED:TOK]\"..."
        );
        let mut unrelated = "not JSON: \"a line that ends in tok\"...".to_owned();
        r.text(&mut unrelated);
        assert!(unrelated.ends_with("in tok\"..."), "{unrelated}");
    }

    /// A log line written after the call ended (the egress proxy logs a
    /// module's `CONNECT` target at debug) is masked with every value the
    /// process handed out, and one without a value is left alone.
    #[test]
    fn a_log_line_holding_a_value_handed_to_a_call_is_masked() {
        let value = "log-line-secret-7f3a9c";
        let line = format!("DEBUG connect to {value}.example.com:443\n");
        drop(Redactor::new(&[CallSecret::new("LOG_TOKEN", value)]));
        assert_eq!(
            mask_log_line(&line).as_deref(),
            Some("DEBUG connect to [REDACTED:LOG_TOKEN].example.com:443\n")
        );
        assert_eq!(mask_log_line("DEBUG nothing secret here\n"), None);
    }

    /// What a real encoder writes, to check ours against.
    fn std_base64(bytes: &[u8]) -> String {
        let mut text = base64(bytes, BASE64);
        while !text.len().is_multiple_of(4) {
            text.push('=');
        }
        text
    }

    #[test]
    fn base64_is_the_standard_encoding() {
        assert_eq!(std_base64(b""), "");
        assert_eq!(std_base64(b"f"), "Zg==");
        assert_eq!(std_base64(b"fo"), "Zm8=");
        assert_eq!(std_base64(b"foo"), "Zm9v");
        assert_eq!(std_base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(std_base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn every_form_is_masked_and_the_rest_kept() {
        let r = redactor();
        let json_escaped = serde_json::to_string(TOKEN).unwrap();
        let basic = std_base64(format!("x-access-token:{TOKEN}").as_bytes());
        let cases = [
            format!("token={TOKEN}; done"),
            format!("{{\"token\":{json_escaped}}}"),
            format!(
                "https://h/?t={}",
                percent_encoded(TOKEN, b"0123456789ABCDEF")
            ),
            format!(
                "https://h/?t={}",
                percent_encoded(TOKEN, b"0123456789abcdef")
            ),
            format!("dump {}", hex(TOKEN.as_bytes(), b"0123456789abcdef")),
            format!("Authorization: Basic {basic}"),
            format!(
                "{} and {}",
                std_base64(TOKEN.as_bytes()),
                std_base64(format!("a{TOKEN}").as_bytes())
            ),
            base64(format!("ab{TOKEN}").as_bytes(), BASE64_URL),
        ];
        for text in cases {
            let masked = r
                .mask(&text)
                .unwrap_or_else(|| panic!("not masked: {text}"));
            assert!(masked.contains("[REDACTED:GH_TOKEN]"), "{masked}");
            assert!(!masked.contains(TOKEN), "{masked}");
            assert!(!masked.contains("S3cr3t"), "{masked}");
        }
        assert_eq!(
            r.mask(&format!("token={TOKEN}; done")).unwrap(),
            "token=[REDACTED:GH_TOKEN]; done"
        );
        assert!(r.mask("nothing secret here").is_none());
    }

    #[test]
    fn at_most_two_characters_of_a_base64_encoding_survive_at_each_end() {
        let r = redactor();
        for prefix in ["", "a", "ab", "abc"] {
            let encoded = std_base64(format!("{prefix}{TOKEN}").as_bytes());
            let masked = r.mask(&encoded).unwrap();
            let (before, after) = masked.split_once("[REDACTED:GH_TOKEN]").unwrap();
            let prefix_chars = (8 * prefix.len()).div_ceil(6);
            assert!(before.len() <= prefix_chars + 1, "{prefix:?}: {masked}");
            assert!(
                after.trim_end_matches('=').len() <= 2,
                "{prefix:?}: {masked}"
            );
        }
    }

    #[test]
    fn json_is_masked_in_decoded_strings_keys_and_numbers() {
        let r = Redactor::new(&[
            CallSecret::new("GH_TOKEN", TOKEN),
            CallSecret::new("PIN_CODE", "4242424242"),
        ]);
        // Every character written as a `\u` escape: the raw text does not
        // show the value, the decoded string is the value.
        let escaped: String = TOKEN
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let raw = format!(r#"{{"a":"x{escaped}y","key":[1,4242424242,{{"deep":"{escaped}"}}]}}"#);
        assert!(!raw.contains("S3cr3t"));
        let mut value: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
        value["by key"] = json!({ TOKEN: true });
        r.value(&mut value);
        let text = value.to_string();
        assert!(!text.contains("S3cr3t"), "{text}");
        assert!(!text.contains("4242424242"), "{text}");
        assert_eq!(value["a"], "x[REDACTED:GH_TOKEN]y");
        assert_eq!(value["key"][0], 1);
        assert_eq!(value["key"][1], "[REDACTED:PIN_CODE]");
        assert_eq!(value["key"][2]["deep"], "[REDACTED:GH_TOKEN]");
        assert_eq!(value["by key"], json!({"[REDACTED:GH_TOKEN]": true}));
    }

    #[test]
    fn an_error_answer_is_masked_everywhere_it_speaks() {
        let r = redactor();
        let mut error: RpcError = serde_json::from_value(json!({
            "code": -32000, "message": format!("bad {TOKEN}"),
            "data": {"kind": TOKEN, "remedy": format!("use {TOKEN}"), "problems": [TOKEN],
                     "extra": {"nested": TOKEN}}
        }))
        .unwrap();
        r.rpc_error(&mut error);
        let text = serde_json::to_string(&error).unwrap();
        assert!(!text.contains("S3cr3t"), "{text}");
        assert_eq!(error.kind().unwrap().as_str(), "[REDACTED:GH_TOKEN]");
    }

    #[test]
    fn a_tail_cut_through_a_value_loses_the_rest_of_it_too() {
        let r = redactor();
        // The last bytes of a value start the tail, as the tail's cut
        // leaves them.
        let end = &TOKEN[5..];
        let mut tail = format!("{end}\n{}", "x".repeat(STDERR_TAIL_BYTES));
        r.tail(&mut tail);
        assert!(tail.starts_with("[REDACTED:GH_TOKEN]\n"), "{}", &tail[..40]);
        // A short tail was never cut: its beginning is its own.
        let mut short = format!("{end} is how it ends");
        r.tail(&mut short);
        assert!(short.starts_with(end));
    }

    #[tokio::test]
    async fn live_notifications_are_relayed_masked_and_in_order() {
        let r = redactor();
        let (listener, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let (sink, relay) = r.relay(Some(&listener));
        let sink = sink.unwrap();
        let call = async move {
            for n in 0..3 {
                let note = Notification::new(
                    "progress",
                    Some(
                        json!({"request_id": "r", "progress": n, "message": format!("{n} {TOKEN}")}),
                    ),
                );
                sink.send(note).unwrap();
            }
        };
        tokio::join!(call, relay.forward());
        for n in 0..3 {
            let note = heard.try_recv().unwrap();
            assert_eq!(
                note.params.unwrap()["message"],
                format!("{n} [REDACTED:GH_TOKEN]")
            );
        }
        // Without secrets the listener's own sink is used as is.
        let none = Redactor::default();
        let (same, relay) = none.relay(Some(&listener));
        assert!(same.unwrap().same_channel(&listener));
        relay.forward().await;
    }

    #[test]
    fn a_call_without_secrets_masks_nothing() {
        let r = Redactor::default();
        assert!(r.is_empty());
        assert!(r.mask("anything at all").is_none());
    }
}
