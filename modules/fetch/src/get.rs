//! `fetch.get`: one web page as readable text, size-capped.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::{Ctx, ModError};

use crate::client::{Client, Response};
use crate::error::FetchError;
use crate::readable::{self, Kind, SNIFF_BYTES};
use crate::target;

pub const DESCRIPTION: &str = "Fetch one web page (GET an http:// or https:// URL) and return it as readable text: HTML turned \
into text (scripts and styles dropped, links listed as numbered references at the end), plain text, JSON, XML and other text \
as sent; images, PDFs and other binary content are refused. Returns the final URL (after at most 10 redirects), the HTTP \
status (a 404 page is returned, with its status), the content type, and the text cut at `max_bytes` (default 65536, at most \
262144) with `truncated` and a `note` when cut; of an HTML page larger than 1 MiB only the first 1 MiB is read. Reaches only the hosts the operator grants this capability in the modhost \
home's config.toml; a host that is not granted, or a redirect to one, fails with the egress proxy's reason and the line the \
operator would add.";

/// Text returned when the caller names no `max_bytes`.
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024;
const MIN_MAX_BYTES: usize = 1024;
/// The most text one call returns: the output holds it twice (the field
/// and the text rendering), within the host's 1 MiB output limit.
pub const MAX_MAX_BYTES: usize = 256 * 1024;
/// The most HTML downloaded and rendered; past it the rest of the page is
/// not read (the note says so). Markup is most of a page's bytes, so this is
/// well above `max_bytes`; but html5ever's tree and html2text's layout take
/// about 110 bytes of memory per byte of HTML (1 MiB peaked at 115 MB, 2 MiB
/// at 220 MB, whether tables or paragraphs), and a call's memory is capped
/// (256 MiB by default): 1 MiB leaves room, and takes about 2 s to render in
/// a debug build.
pub const MAX_HTML_BYTES: usize = 1 << 20;
/// The time kept back from the host's deadline to turn the page into text
/// and answer: a slow site ends in this module's clear timeout, not in the
/// host killing the call.
const ANSWER_TIME: Duration = Duration::from_secs(3);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetInput {
    /// The page: an absolute http:// or https:// URL.
    #[schemars(length(min = 1, max = 8192))]
    pub url: String,
    /// The most bytes of text returned (1024 to 262144, default 65536).
    #[serde(default)]
    #[schemars(range(min = 1024, max = 262_144))]
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct GetOutput {
    /// The URL the text came from, after redirects.
    pub url: String,
    /// The HTTP status of that response.
    pub status: u16,
    /// Its Content-Type, as the server sent it.
    pub content_type: Option<String>,
    /// The page as readable text, cut at max_bytes.
    pub text: String,
    /// Whether `text` is not the whole page.
    pub truncated: bool,
    /// Where and why `text` was cut, when it was.
    pub note: Option<String>,
}

pub fn run(ctx: &Ctx, client: &Client, input: &GetInput) -> Result<GetOutput, ModError> {
    let url = target::parse(&input.url).map_err(FetchError::from)?;
    let limit = input
        .max_bytes
        .unwrap_or(DEFAULT_MAX_BYTES)
        .clamp(MIN_MAX_BYTES, MAX_MAX_BYTES);
    let response = client.get(url, fetch_deadline(ctx.deadline()))?;
    Ok(read(response, limit)?)
}

/// The deadline of the fetch itself: the host's, less the time to answer
/// (at most a quarter of what is left).
fn fetch_deadline(host_deadline: Instant) -> Instant {
    let left = host_deadline.saturating_duration_since(Instant::now());
    host_deadline - ANSWER_TIME.min(left / 4)
}

/// The response's body as text of at most `limit` bytes.
pub fn read(mut response: Response, limit: usize) -> Result<GetOutput, FetchError> {
    response.fill(SNIFF_BYTES)?;
    let content_type = response.content_type.clone();
    let kind = readable::kind(content_type.as_deref(), &response.bytes).map_err(|not_text| {
        FetchError::NotText {
            url: response.url.to_string(),
            not_text,
        }
    })?;
    // Text is returned as it came, so little more than `limit` is needed
    // (twice: a two-byte encoding may hold fewer characters than bytes);
    // HTML is mostly markup.
    let download = match kind {
        Kind::Html => MAX_HTML_BYTES,
        Kind::Text => 2 * limit + 16,
    };
    response.read_up_to(download)?;
    let readable = readable::render(
        kind,
        content_type.as_deref(),
        &response.bytes,
        &response.url,
        limit,
    );
    let note = note(&response, &readable, limit);
    Ok(GetOutput {
        url: response.url.to_string(),
        status: response.status,
        content_type,
        truncated: note.is_some(),
        text: readable.text,
        note,
    })
}

/// What the caller is told about a cut: where, and how to get more.
fn note(response: &Response, readable: &readable::Readable, limit: usize) -> Option<String> {
    let more = if limit < MAX_MAX_BYTES {
        format!("; call again with a larger max_bytes (at most {MAX_MAX_BYTES}) for more")
    } else {
        String::new()
    };
    let whole = match response.content_length {
        Some(n) => format!(" of a {n}-byte page"),
        None => String::new(),
    };
    if readable.cut && response.complete {
        Some(format!(
            "cut at {} of the page's {} bytes of text{more}",
            readable.text.len(),
            readable.text_bytes
        ))
    } else if readable.cut {
        Some(format!(
            "cut at {} bytes of text, from the first {} bytes downloaded{whole}{more}",
            readable.text.len(),
            response.bytes.len()
        ))
    } else if !response.complete {
        Some(format!(
            "the download stopped at {} bytes{whole}: the text is of that part only",
            response.bytes.len()
        ))
    } else {
        None
    }
}

/// The output as an agent reads it: a header line, the text, the note.
pub fn render(output: &GetOutput) -> String {
    let mut text = format!("{} ({}", output.url, output.status);
    if let Some(content_type) = &output.content_type {
        text.push_str(&format!(", {content_type}"));
    }
    text.push_str(")\n\n");
    text.push_str(&output.text);
    if let Some(note) = &output.note {
        text.push_str(&format!("\n\n[{note}]"));
    }
    text
}
