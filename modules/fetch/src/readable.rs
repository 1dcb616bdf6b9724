//! A response body as readable text: what it is, its characters, HTML
//! turned into text, and the cut.
//!
//! Design decisions:
//!
//! - **The declared type first, the bytes second.** HTML (`text/html`,
//!   XHTML) is rendered; other text (`text/*`, JSON, XML, YAML, JavaScript)
//!   is returned as it is; a declared binary type (images, audio, video,
//!   fonts, PDF, archives) is not text. A missing or vague type
//!   (`application/octet-stream`) is decided from the first bytes, as a
//!   browser sniffs: markup that opens an HTML document is HTML, bytes
//!   without NULs or control characters are text, the rest is binary.
//! - **Characters by the declared charset**: the `Content-Type`'s, else a
//!   byte-order mark, else (HTML) a `<meta charset>` near the start, else
//!   UTF-8; what does not decode becomes U+FFFD, never an error.
//! - **HTML through html2text** (html5ever's parser, as browsers parse):
//!   scripts, styles and markup go, headings, lists and tables (without
//!   borders: box-drawing characters are three bytes each) stay readable,
//!   and each link's target is listed as a numbered reference at the end,
//!   resolved against the page's URL so an agent can follow it.
//! - **The cut is on text, not on the download**, at a line end when one
//!   is near, never inside a character.

use encoding_rs::{Encoding, UTF_8};
use url::Url;

/// The column width HTML is wrapped to: readable in a terminal, and long
/// lines (a URL, a table row) may run past it rather than fail.
const HTML_WIDTH: usize = 100;

/// How many leading bytes sniffing and `<meta charset>` look at.
pub const SNIFF_BYTES: usize = 1024;

/// What a body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Html,
    Text,
}

/// A body that is not text, by its declared type or its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the content is {what}, not text")]
pub struct NotText {
    pub what: String,
}

/// The page as text, and whether it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readable {
    pub text: String,
    /// Bytes of text before the cut (of what was downloaded).
    pub text_bytes: usize,
    pub cut: bool,
}

/// What `head` (the body's first bytes) is, given its `Content-Type`.
pub fn kind(content_type: Option<&str>, head: &[u8]) -> Result<Kind, NotText> {
    let essence = content_type.map(essence).unwrap_or_default();
    match essence.as_str() {
        "text/html" | "application/xhtml+xml" => return Ok(Kind::Html),
        e if is_textual(e) => return Ok(Kind::Text),
        e if is_binary(e) => return Err(NotText { what: e.to_owned() }),
        _ => {}
    }
    sniff(head).ok_or_else(|| NotText {
        what: if essence.is_empty() {
            "binary (no content type, and the bytes are not text)".to_owned()
        } else {
            format!("{essence} (the bytes are not text)")
        },
    })
}

/// The body of the page at `url` as text of `kind`, cut at `limit` bytes.
pub fn render(
    kind: Kind,
    content_type: Option<&str>,
    body: &[u8],
    url: &Url,
    limit: usize,
) -> Readable {
    let encoding = charset(content_type, kind, body);
    let (decoded, _, _) = encoding.decode(body);
    let text = match kind {
        Kind::Html => resolve_references(&html_to_text(&decoded), url),
        Kind::Text => decoded.into_owned(),
    };
    let kept = cut_point(&text, limit);
    Readable {
        text_bytes: text.len(),
        cut: kept < text.len(),
        text: text[..kept].trim_end().to_owned(),
    }
}

/// A `Content-Type`'s media type, lower case, without parameters.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn is_textual(essence: &str) -> bool {
    let (top, sub) = essence.split_once('/').unwrap_or((essence, ""));
    top == "text"
        || sub.ends_with("+json")
        || sub.ends_with("+xml")
        || matches!(
            sub,
            "json"
                | "xml"
                | "javascript"
                | "ecmascript"
                | "x-javascript"
                | "yaml"
                | "x-yaml"
                | "toml"
                | "x-sh"
                | "x-ndjson"
                | "sql"
                | "graphql"
        ) && top == "application"
}

fn is_binary(essence: &str) -> bool {
    let (top, sub) = essence.split_once('/').unwrap_or((essence, ""));
    matches!(top, "image" | "audio" | "video" | "font" | "model")
        || (top == "application"
            && matches!(
                sub,
                "pdf"
                    | "zip"
                    | "gzip"
                    | "x-gzip"
                    | "x-tar"
                    | "x-7z-compressed"
                    | "x-bzip2"
                    | "x-xz"
                    | "zstd"
                    | "wasm"
                    | "msword"
                    | "vnd.ms-excel"
                    | "x-executable"
            ))
        || sub.starts_with("vnd.openxmlformats")
}

/// HTML, text, or neither, from the first bytes alone.
fn sniff(head: &[u8]) -> Option<Kind> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    let start = head
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(head)
        .trim_ascii_start();
    let opens =
        |tag: &[u8]| start.len() >= tag.len() && start[..tag.len()].eq_ignore_ascii_case(tag);
    if ["<!doctype html", "<html", "<head", "<body"]
        .iter()
        .any(|tag| opens(tag.as_bytes()))
    {
        return Some(Kind::Html);
    }
    // UTF-16 text has NULs; its byte-order mark says so.
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        return Some(Kind::Text);
    }
    let control = |b: &u8| *b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b);
    (!head.iter().any(control)).then_some(Kind::Text)
}

/// The encoding of `body` (see the module documentation for the order).
fn charset(content_type: Option<&str>, kind: Kind, body: &[u8]) -> &'static Encoding {
    if let Some((bom, _)) = Encoding::for_bom(body) {
        return bom;
    }
    let declared = content_type.and_then(|ct| {
        ct.split(';').skip(1).find_map(|param| {
            let (name, value) = param.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
        })
    });
    let declared = declared.or_else(|| (kind == Kind::Html).then(|| meta_charset(body)).flatten());
    declared
        .and_then(|label| Encoding::for_label(label.as_bytes()))
        // A page cannot really be UTF-16 if its bytes say so in ASCII.
        .map(|e| {
            if e.is_single_byte() || e == UTF_8 {
                e
            } else {
                e.output_encoding()
            }
        })
        .unwrap_or(UTF_8)
}

/// `<meta charset="…">` or `<meta http-equiv=… content="…; charset=…">`
/// among the first bytes (a simplification of HTML's prescan).
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(SNIFF_BYTES)]).to_ascii_lowercase();
    let at = head.find("<meta")?;
    let rest = &head[at..];
    let value = &rest[rest.find("charset")? + "charset".len()..];
    let value = value.trim_start().strip_prefix('=')?.trim_start();
    let value = value.trim_start_matches(['"', '\'']);
    let label: String = value
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
        .collect();
    (!label.is_empty()).then_some(label)
}

/// HTML as text (see the module documentation). html2text cannot fail on
/// malformed HTML (html5ever repairs it as a browser does); should it fail
/// anyway, the text without its markup is better than no answer.
fn html_to_text(html: &str) -> String {
    let rendered = html2text::config::plain()
        .no_table_borders()
        .allow_width_overflow()
        .string_from_read(html.as_bytes(), HTML_WIDTH)
        .or_else(|_| {
            html2text::config::plain_no_decorate()
                .raw_mode(true)
                .allow_width_overflow()
                .string_from_read(html.as_bytes(), HTML_WIDTH)
        })
        .unwrap_or_default();
    tidy(&rendered)
}

/// The link references html2text lists last (`[3]: /docs`), each resolved
/// against the page's URL. Only that closing block is touched: a line of
/// the page's own text that looks like one is left as it is.
fn resolve_references(text: &str, base: &Url) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let block = lines
        .iter()
        .rev()
        .take_while(|line| reference(line).is_some())
        .count();
    let (body, references) = lines.split_at(lines.len() - block);
    let mut out: Vec<String> = body.iter().map(|line| (*line).to_owned()).collect();
    for line in references {
        let Some((number, target)) = reference(line) else {
            continue;
        };
        let resolved = base
            .join(target)
            .map_or_else(|_| target.to_owned(), String::from);
        out.push(format!("[{number}]: {resolved}"));
    }
    out.join("\n")
}

/// `[3]: /docs` as its number and target.
fn reference(line: &str) -> Option<(&str, &str)> {
    let (number, target) = line.strip_prefix('[')?.split_once("]: ")?;
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some((number, target))
}

/// Trailing spaces off every line, and no more than one empty line in a
/// row: html2text pads cells and keeps the blank lines of the source's
/// layout, which only cost an agent bytes.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// Where to cut `text` to keep at most `limit` bytes: all of it when it
/// fits; else after the last line end in the second half of the limit; else
/// at the last character boundary within it.
pub fn cut_point(text: &str, limit: usize) -> usize {
    if text.len() <= limit {
        return text.len();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(newline) if newline >= limit / 2 => newline + 1,
        _ => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://example.org/docs/intro").unwrap()
    }

    #[test]
    fn the_declared_type_decides_and_vague_ones_are_sniffed() {
        let html = Some("text/html; charset=utf-8");
        assert_eq!(kind(html, b"anything"), Ok(Kind::Html));
        for text in [
            "text/plain",
            "application/json",
            "application/ld+json",
            "image/svg+xml",
            "text/markdown",
        ] {
            assert_eq!(kind(Some(text), b"\x00"), Ok(Kind::Text), "{text}");
        }
        assert!(kind(Some("image/png"), b"plain words").is_err());
        assert!(kind(Some("application/pdf"), b"%PDF-1.7").is_err());
        assert_eq!(
            kind(None, b"\xEF\xBB\xBF  <!DOCTYPE html><p>x"),
            Ok(Kind::Html)
        );
        assert_eq!(
            kind(Some("application/octet-stream"), b"# readme\n"),
            Ok(Kind::Text)
        );
        assert_eq!(kind(None, "naïve café".as_bytes()), Ok(Kind::Text));
        let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
        let err = kind(None, png).unwrap_err();
        assert!(err.to_string().contains("not text"), "{err}");
    }

    #[test]
    fn html_becomes_text_without_scripts_styles_or_markup_and_links_are_listed() {
        let html = r#"<!doctype html><html><head><title>T</title>
            <style>body { color: red }</style><script>alert("hidden")</script></head>
            <body><h1>Release notes</h1>
            <p>Version <b>2.0</b> is out.&nbsp;See <a href="https://example.org/changes">the changes</a>, <a href="next">next</a>, <a href="/">home</a>.</p>
            <ul><li>faster</li><li>smaller</li></ul>
            <table><tr><th>os</th><th>status</th></tr><tr><td>linux</td><td>ok</td></tr></table>
            </body></html>"#;
        let out = render(
            Kind::Html,
            Some("text/html"),
            html.as_bytes(),
            &base(),
            1 << 20,
        );
        let text = &out.text;
        for expected in [
            "Release notes",
            "Version **2.0** is out",
            "faster",
            "smaller",
            "linux ok",
            "[1]: https://example.org/changes",
            "[2]: https://example.org/docs/next",
            "[3]: https://example.org/",
        ] {
            assert!(
                text.contains(expected),
                "{expected:?} missing from:\n{text}"
            );
        }
        for hidden in ["alert", "color: red", "<p>", "<b>", "&nbsp;", "│", "─"] {
            assert!(!text.contains(hidden), "{hidden:?} shows in:\n{text}");
        }
        assert!(!out.cut);
        assert!(
            !text.contains("\n\n\n") && !text.lines().any(|l| l.ends_with(' ')),
            "{text:?}"
        );
    }

    #[test]
    fn only_the_closing_block_of_references_is_resolved() {
        let text = "[1]: not/a/reference here\nbody\n\n[1]: /a\n[2]: b?x=1\n[3]: mailto:someone@example.org";
        assert_eq!(
            resolve_references(text, &base()),
            "[1]: not/a/reference here\nbody\n\n[1]: https://example.org/a\n[2]: https://example.org/docs/b?x=1\n[3]: mailto:someone@example.org"
        );
    }

    #[test]
    fn charsets_come_from_the_header_the_bom_or_the_meta_tag() {
        // "café" in Latin-1.
        let latin1 = b"caf\xE9";
        let out = render(
            Kind::Text,
            Some("text/plain; charset=ISO-8859-1"),
            latin1,
            &base(),
            100,
        );
        assert_eq!(out.text, "café");
        let html = b"<html><head><meta charset=\"windows-1252\"></head><body>caf\xE9</body></html>";
        assert_eq!(
            render(Kind::Html, Some("text/html"), html, &base(), 100).text,
            "café"
        );
        let html = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\"><p>caf\xE9";
        assert_eq!(render(Kind::Html, None, html, &base(), 100).text, "café");
        let utf16 = b"\xFF\xFEc\x00a\x00f\x00\xE9\x00";
        assert_eq!(kind(None, utf16), Ok(Kind::Text));
        assert_eq!(render(Kind::Text, None, utf16, &base(), 100).text, "café");
        // Undeclared: UTF-8, and bytes that do not decode are replaced.
        assert_eq!(
            render(Kind::Text, None, b"ok \xFF", &base(), 100).text,
            "ok \u{FFFD}"
        );
        // JSON is returned as it is.
        let json = br#"{"a": [1, 2], "b": "x"}"#;
        assert_eq!(
            render(Kind::Text, Some("application/json"), json, &base(), 100).text,
            r#"{"a": [1, 2], "b": "x"}"#
        );
    }

    #[test]
    fn the_cut_keeps_at_most_the_limit_on_a_line_end_or_a_character_boundary() {
        let text = "first line\nsecond line\nthird";
        assert_eq!(cut_point(text, 100), text.len());
        assert_eq!(&text[..cut_point(text, 20)], "first line\n");
        assert_eq!(cut_point("abcdefgh", 5), 5);
        // "é" is two bytes: never split.
        assert_eq!(cut_point("aéé", 2), 1);
        let long = "x".repeat(5000);
        let out = render(Kind::Text, None, long.as_bytes(), &base(), 1024);
        assert_eq!(
            (out.text.len(), out.text_bytes, out.cut),
            (1024, 5000, true)
        );
    }

    #[test]
    fn deeply_nested_and_unclosed_html_is_still_text() {
        let nested = "<div>".repeat(5000) + "deep" + &"</div>".repeat(10);
        let out = render(Kind::Html, None, nested.as_bytes(), &base(), 1 << 20);
        assert!(
            out.text.contains("deep"),
            "{:?}",
            &out.text[..out.text.len().min(200)]
        );
        let broken = "<p>one<p>two<table><tr><td>three";
        let out = render(Kind::Html, None, broken.as_bytes(), &base(), 1 << 20);
        for word in ["one", "two", "three"] {
            assert!(out.text.contains(word), "{word}: {:?}", out.text);
        }
    }
}
