//! LIST: ListObjectsV2 under the store prefix, following every page (a prefix may hold
//! more than the 1,000 objects of one page), on stores whose pagination is not what AWS
//! documents too.
//!
//! Keys come back relative to the store prefix. A listed name that is not a valid
//! [`ObjectKey`] (written by another tool) is skipped with a warning, never an error.
//!
//! # Pagination
//! A truncated page (`IsTruncated=true`) is followed by the next request, chosen so that
//! every request makes progress or the listing stops with an error, never loops:
//! * a `NextContinuationToken` not used before, if the page brought new keys (AWS S3);
//! * else `start-after=<the last key on the page>` (the full name as the server sent it,
//!   skipped names included), if it is past the previous `start-after`. This is what a
//!   truncated page *without* a token gets (Huawei OBS, and at times DigitalOcean Spaces
//!   and MinIO, answer that way), and what a repeated token gets;
//! * a page that brought no new key prefers `start-after` over a fresh token (a server that
//!   repeats one page with ever new tokens is steered off it).
//!
//! The listing fails with a protocol error naming the page when no request would make
//! progress (a truncated page with no key and no new token, or a `start-after` the server
//! does not honour), after [`MAX_PAGES_WITHOUT_NEW_KEYS`] truncated pages in a row that
//! brought no new key, and after [`MAX_PAGES`] pages. Keys that a server sends twice
//! (overlapping pages) are listed once.

use std::collections::HashSet;
use std::sync::atomic::AtomicU32;

use reqwest::Method;

use super::Inner;
use super::fallback::Feature;
use super::response::child_text;
use crate::transport::wire::protocol_error as protocol;
use crate::transport::wire::{Call, Exchange};
use crate::transport::{Error, ObjectKey, ObjectMeta};

/// Most pages one listing reads (100 million objects at the usual 1,000 per page) before
/// it fails: a bound on a server that never stops answering "truncated".
pub(crate) const MAX_PAGES: u32 = 100_000;

/// Most truncated pages in a row that may bring no key not listed before (empty pages, or
/// pages a server repeats) before the listing fails.
pub(crate) const MAX_PAGES_WITHOUT_NEW_KEYS: u32 = 100;

/// A page of a listing.
#[derive(Debug, Default)]
pub(crate) struct Page {
    /// Objects on this page, keys relative to the store prefix.
    pub objects: Vec<ObjectMeta>,
    /// Every key on the page as the server sent it (full names, including those skipped),
    /// in order.
    pub keys: Vec<String>,
    /// `IsTruncated`: the server says more keys follow.
    pub truncated: bool,
    /// `NextContinuationToken`, if the server sent a non-empty one.
    pub next: Option<String>,
}

/// Parses one ListObjectsV2 answer; `store_prefix` is stripped from keys.
///
/// # Errors
/// [`Error::Protocol`] for a document that is not a `ListBucketResult` or whose objects lack
/// a key or size.
pub(crate) fn parse_page(xml: &str, store_prefix: &str, location: &str) -> Result<Page, Error> {
    let bad = |reason: String| protocol("GET", location, reason, false);
    let document =
        roxmltree::Document::parse(xml).map_err(|e| bad(format!("listing is not XML: {e}")))?;
    let root = document.root_element();
    if root.tag_name().name() != "ListBucketResult" {
        return Err(bad(format!("expected ListBucketResult, got {}", root.tag_name().name())));
    }
    let mut page = Page::default();
    for node in root.children().filter(|n| n.is_element() && n.tag_name().name() == "Contents") {
        let full_key = child_text(node, "Key").ok_or_else(|| bad("an entry has no Key".into()))?;
        let size_bytes = child_text(node, "Size")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| bad(format!("entry {full_key:?} has no valid Size")))?;
        let last_modified = child_text(node, "LastModified")
            .and_then(|t| {
                time::OffsetDateTime::parse(
                    t.trim(),
                    &time::format_description::well_known::Rfc3339,
                )
                .ok()
            })
            .map_or(std::time::SystemTime::UNIX_EPOCH, Into::into);
        page.keys.push(full_key.clone());
        let Some(relative) = full_key.strip_prefix(store_prefix) else {
            tracing::warn!(key = %full_key, "listing returned a key outside the prefix; skipped");
            continue;
        };
        match ObjectKey::new(relative) {
            Ok(key) => page.objects.push(ObjectMeta {
                key,
                size_bytes,
                last_modified,
                etag: child_text(node, "ETag"),
            }),
            Err(e) => tracing::warn!(key = %full_key, "skipping listed object: {e}"),
        }
    }
    page.truncated = child_text(root, "IsTruncated").is_some_and(|t| t.trim() == "true");
    page.next = child_text(root, "NextContinuationToken").filter(|t| !t.is_empty());
    Ok(page)
}

/// Where the next page of a listing starts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    /// The first page.
    Start,
    /// `continuation-token=<token>`.
    Token(String),
    /// `start-after=<full key>`.
    After(String),
}

impl Cursor {
    fn describe(&self) -> String {
        match self {
            Cursor::Start => "the first page".to_owned(),
            Cursor::Token(token) => format!("continuation-token={token:?}"),
            Cursor::After(key) => format!("start-after={key:?}"),
        }
    }
}

/// The state of one listing across its pages: what makes the next request progress.
#[derive(Debug, Default)]
struct Pagination {
    /// Full keys listed so far.
    seen: HashSet<String>,
    /// Continuation tokens already sent.
    tokens: HashSet<String>,
    /// The last `start-after` sent.
    after: Option<String>,
    /// Pages read.
    pages: u32,
    /// Truncated pages in a row that brought no new key.
    idle: u32,
}

impl Pagination {
    /// Takes in one page read at `cursor`; returns where the next page starts (`None`: the
    /// listing is complete), or why no request can make progress.
    fn next(&mut self, cursor: &Cursor, page: &Page) -> Result<Option<Cursor>, String> {
        self.pages += 1;
        let new_keys = page.keys.iter().filter(|k| self.seen.insert((*k).clone())).count();
        if !page.truncated {
            return Ok(None);
        }
        let at = || {
            format!(
                "page {} (requested with {}) is truncated ({} keys, {new_keys} new, \
                 NextContinuationToken {:?})",
                self.pages,
                cursor.describe(),
                page.keys.len(),
                page.next.as_deref().unwrap_or("absent"),
            )
        };
        if self.pages >= MAX_PAGES {
            return Err(format!("{}, and the listing has reached {MAX_PAGES} pages", at()));
        }
        if new_keys == 0 {
            self.idle += 1;
            if self.idle >= MAX_PAGES_WITHOUT_NEW_KEYS {
                return Err(format!(
                    "{}: {} truncated pages in a row brought no new key",
                    at(),
                    self.idle
                ));
            }
        } else {
            self.idle = 0;
        }
        let token = page.next.clone().filter(|t| !self.tokens.contains(t)).map(Cursor::Token);
        let after = page
            .keys
            .last()
            .filter(|last| self.after.as_ref().is_none_or(|previous| *last > previous))
            .map(|last| Cursor::After(last.clone()));
        let next = if new_keys > 0 { token.or(after) } else { after.or(token) };
        match &next {
            Some(Cursor::Token(t)) => {
                self.tokens.insert(t.clone());
            }
            Some(Cursor::After(key)) => {
                if page.next.is_none() {
                    tracing::debug!(start_after = %key, "truncated page without a continuation token; continuing after its last key");
                }
                self.after = Some(key.clone());
            }
            Some(Cursor::Start) | None => {}
        }
        match next {
            Some(next) => Ok(Some(next)),
            None => Err(format!(
                "{}, and no request would make progress: the token (if any) was used before \
                 and the page's last key is not past start-after {:?}; the store's \
                 ListObjectsV2 pagination is broken (report it to the store's operator)",
                at(),
                self.after.as_deref().unwrap_or("")
            )),
        }
    }
}

/// Reads the page at `cursor`: ListObjectsV2, or ListObjects (version 1) on a server that
/// lacks it ([`Feature::ListObjectsV2`]; `marker` stands for `start-after`, and a
/// continuation token never comes up since version 1 sends none).
async fn read_page(
    inner: &Inner,
    cursor: &Cursor,
    prefix: &str,
    retries: &AtomicU32,
) -> Result<Page, Error> {
    let store_prefix = inner.config.prefix.clone();
    let location = inner.config.location(prefix);
    let v1 = inner.lacks.lacks(Feature::ListObjectsV2);
    let mut query = Vec::new();
    if !v1 {
        query.push(("list-type", "2".to_owned()));
    }
    query.push(("prefix", format!("{store_prefix}{prefix}")));
    match cursor {
        Cursor::Start => {}
        Cursor::Token(token) => query.push(("continuation-token", token.clone())),
        Cursor::After(key) if v1 => query.push(("marker", key.clone())),
        Cursor::After(key) => query.push(("start-after", key.clone())),
    }
    let call = Call {
        method: Method::GET,
        target: None,
        query,
        headers: Vec::new(),
        payload: crate::transport::wire::Payload::Empty,
        location: location.clone(),
        close_connection: false,
    };
    inner
        .send(&call, retries, |response| {
            let location = location.clone();
            let store_prefix = store_prefix.clone();
            async move {
                let text = response
                    .text()
                    .await
                    .map_err(|e| crate::transport::wire::body_error("GET", &location, e))?;
                let mut page = parse_page(&text, &store_prefix, &location)?;
                if v1 {
                    // Version 1's NextMarker (sent only with a delimiter) is not a token.
                    page.next = None;
                }
                Ok(page)
            }
        })
        .await
}

/// Lists every object whose key (relative to the store prefix) starts with `prefix`,
/// following every page (see the module docs), sorted by key, each key once.
///
/// # Errors
/// Network, HTTP ([`Error::NoSuchBucket`], [`Error::AccessDenied`], …) and protocol errors,
/// including a pagination that does not progress (see the module docs).
pub(crate) async fn list_all(
    inner: &Inner,
    prefix: &str,
    retries: &AtomicU32,
) -> Result<Vec<ObjectMeta>, Error> {
    let location = inner.config.location(prefix);
    let mut cursor = Cursor::Start;
    let mut pagination = Pagination::default();
    let mut out = Vec::new();
    loop {
        let mut page = read_page(inner, &cursor, prefix, retries).await;
        if let Err(e) = &page
            && !inner.lacks.lacks(Feature::ListObjectsV2)
            && inner.lacks.fall_back(Feature::ListObjectsV2, &inner.config.describe(), e)
        {
            page = read_page(inner, &cursor, prefix, retries).await;
        }
        let page = page?;
        let next = pagination
            .next(&cursor, &page)
            .map_err(|reason| protocol("GET", &location, reason, false))?;
        out.extend(page.objects);
        match next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_page() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated><NextContinuationToken>tok+/=</NextContinuationToken>
  <Contents><Key>p/a/one</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size></Contents>
  <Contents><Key>p/a/../bad</Key><Size>1</Size></Contents>
</ListBucketResult>"#;
        let page = parse_page(xml, "p/", "s3://b/p/").unwrap();
        assert_eq!(page.objects.len(), 1);
        let one = &page.objects[0];
        assert_eq!(one.key.as_str(), "a/one");
        assert_eq!(one.size_bytes, 434_234);
        assert_eq!(one.etag.as_deref(), Some("\"fba9dede5f27731c9771645a39863328\""));
        assert_eq!(page.next.as_deref(), Some("tok+/="));
        assert!(page.truncated);
        // The skipped name still counts as the page's last key (start-after).
        assert_eq!(page.keys, ["p/a/one", "p/a/../bad"]);
        let err = parse_page("<Error><Code>x</Code></Error>", "", "s3://b/").unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err}");
        // Truncated without a token is a page like any other (OBS answers this way).
        let xml = "<ListBucketResult><IsTruncated>true</IsTruncated>\
                   <Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>";
        let page = parse_page(xml, "", "s3://b/").unwrap();
        assert!(page.truncated && page.next.is_none() && page.keys == ["k"]);
    }

    fn page(keys: &[&str], truncated: bool, next: Option<&str>) -> Page {
        Page {
            objects: Vec::new(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            truncated,
            next: next.map(str::to_owned),
        }
    }

    #[test]
    fn a_truncated_page_without_a_token_continues_after_its_last_key() {
        let mut p = Pagination::default();
        let next = p.next(&Cursor::Start, &page(&["a", "b"], true, None)).unwrap();
        assert_eq!(next, Some(Cursor::After("b".into())));
        let next = p.next(&Cursor::After("b".into()), &page(&["c", "d"], true, None)).unwrap();
        assert_eq!(next, Some(Cursor::After("d".into())));
        assert_eq!(p.next(&Cursor::After("d".into()), &page(&["e"], false, None)).unwrap(), None);
    }

    #[test]
    fn tokens_are_followed_while_they_bring_new_keys() {
        let mut p = Pagination::default();
        let next = p.next(&Cursor::Start, &page(&["a"], true, Some("t1"))).unwrap();
        assert_eq!(next, Some(Cursor::Token("t1".into())));
        let next = p.next(&Cursor::Token("t1".into()), &page(&["b"], true, Some("t2"))).unwrap();
        assert_eq!(next, Some(Cursor::Token("t2".into())));
        // A repeated token with new keys: continue after the last key instead.
        let next = p.next(&Cursor::Token("t2".into()), &page(&["c"], true, Some("t1"))).unwrap();
        assert_eq!(next, Some(Cursor::After("c".into())));
    }

    #[test]
    fn a_repeated_page_stops_with_an_error() {
        // The same page and token forever: the token, then start-after, then an error.
        let mut p = Pagination::default();
        let same = page(&["a", "b"], true, Some("t"));
        assert_eq!(p.next(&Cursor::Start, &same).unwrap(), Some(Cursor::Token("t".into())));
        let next = p.next(&Cursor::Token("t".into()), &same).unwrap();
        assert_eq!(next, Some(Cursor::After("b".into())));
        let err = p.next(&Cursor::After("b".into()), &same).unwrap_err();
        assert!(err.contains("page 3 (requested with start-after=\"b\")"), "{err}");
        assert!(err.contains("no request would make progress"), "{err}");
        // The same page without a token: start-after once, then an error.
        let mut p = Pagination::default();
        let same = page(&["a", "b"], true, None);
        assert_eq!(p.next(&Cursor::Start, &same).unwrap(), Some(Cursor::After("b".into())));
        assert!(p.next(&Cursor::After("b".into()), &same).is_err());
        // A truncated empty page without a token.
        let err = Pagination::default().next(&Cursor::Start, &page(&[], true, None)).unwrap_err();
        assert!(
            err.contains("page 1 (requested with the first page) is truncated (0 keys"),
            "{err}"
        );
    }

    #[test]
    fn fresh_tokens_on_a_repeated_page_are_bounded() {
        let mut p = Pagination::default();
        let mut cursor = Cursor::Start;
        let mut pages = 0;
        let err = loop {
            pages += 1;
            let token = format!("t{pages}");
            match p.next(&cursor, &page(&["a", "b"], true, Some(&token))) {
                Ok(Some(next)) => cursor = next,
                Ok(None) => panic!("a truncated page ended the listing"),
                Err(e) => break e,
            }
        };
        assert_eq!(pages, MAX_PAGES_WITHOUT_NEW_KEYS + 1);
        assert!(err.contains("truncated pages in a row brought no new key"), "{err}");
    }
}
