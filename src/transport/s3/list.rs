//! LIST: ListObjectsV2 under the store prefix, following `NextContinuationToken` across
//! every page (the reference read one page of at most 1,000 objects; spec §7 item 4).
//!
//! Keys come back relative to the store prefix. A listed name that is not a valid
//! [`ObjectKey`] (written by another tool) is skipped with a warning, never an error.

use std::sync::atomic::AtomicU32;

use reqwest::Method;

use super::get::protocol_error as protocol;
use super::response::child_text;
use super::{Call, Inner};
use crate::transport::{Error, ObjectKey, ObjectMeta};

/// A page of a listing.
#[derive(Debug, Default)]
pub(crate) struct Page {
    /// Objects on this page, keys relative to the store prefix.
    pub objects: Vec<ObjectMeta>,
    /// Token for the next page, if the listing is truncated.
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
    let truncated = child_text(root, "IsTruncated").is_some_and(|t| t.trim() == "true");
    if truncated {
        page.next = child_text(root, "NextContinuationToken").filter(|t| !t.is_empty());
        if page.next.is_none() {
            return Err(bad("truncated listing without NextContinuationToken".into()));
        }
    }
    Ok(page)
}

/// Lists every object whose key (relative to the store prefix) starts with `prefix`.
///
/// # Errors
/// Network, HTTP ([`Error::NoSuchBucket`], [`Error::AccessDenied`], …) and protocol errors.
pub(crate) async fn list_all(
    inner: &Inner,
    prefix: &str,
    retries: &AtomicU32,
) -> Result<Vec<ObjectMeta>, Error> {
    let store_prefix = inner.config.prefix.clone();
    let location = inner.config.location(prefix);
    let mut token: Option<String> = None;
    let mut out = Vec::new();
    loop {
        let mut query =
            vec![("list-type", "2".to_owned()), ("prefix", format!("{store_prefix}{prefix}"))];
        if let Some(token) = &token {
            query.push(("continuation-token", token.clone()));
        }
        let call = Call {
            method: Method::GET,
            full_key: None,
            query,
            headers: Vec::new(),
            payload: super::sign::Payload::Empty,
            location: location.clone(),
        };
        let page = inner
            .send(&call, retries, |response| {
                let location = location.clone();
                let store_prefix = store_prefix.clone();
                async move {
                    let text = response
                        .text()
                        .await
                        .map_err(|e| super::response::network_error("GET", &location, e))?;
                    parse_page(&text, &store_prefix, &location)
                }
            })
            .await?;
        out.extend(page.objects);
        match page.next {
            Some(next) if Some(&next) != token.as_ref() => token = Some(next),
            Some(_) => {
                return Err(protocol(
                    "GET",
                    &location,
                    "the server repeated a continuation token".into(),
                    false,
                ));
            }
            None => break,
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
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
        let err = parse_page("<Error><Code>x</Code></Error>", "", "s3://b/").unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err}");
    }
}
