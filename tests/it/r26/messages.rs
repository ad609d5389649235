//! Item 6: messages that said something untrue or unhelpful.

use std::time::Duration;

use strata::transport::{ObjectKey, TransportOptions, open_store_with_env};

use crate::transport::proxy::{Fault, FaultProxy, Rule};
use crate::transport::server::{S3sServer, fast_options, url_for};

#[test]
fn r26_a_body_read_timeout_says_so() {
    let server = S3sServer::start();
    let k: ObjectKey = "slow.bin".parse().unwrap();
    server.store("p", &fast_options()).put_bytes_if_absent(&k, &[7u8; 1000]).unwrap();
    let rule = Rule {
        method: "GET",
        contains: "/p/slow.bin",
        fault: Fault::StallBody(Duration::from_secs(5)),
        times: None,
    };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let options = TransportOptions {
        request_timeout: Duration::from_millis(700),
        max_retries: 1,
        ..fast_options()
    };
    let store =
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &options, server.env()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A ranged read into memory, a whole download, a small read: each one says where it
    // timed out.
    let errors = [
        store.get_range(&k, 0, 10).unwrap_err(),
        store.get_to_file(&k, &dir.path().join("out")).unwrap_err(),
        store.get_small(&k, 4096).unwrap_err(),
    ];
    for err in errors {
        let text = strata::message::one_line(&err);
        assert!(err.is_timeout(), "{text}");
        assert!(
            text.contains(": timed out while reading the answer's body (after 1 retries"),
            "{text}"
        );
        assert!(!text.contains("error sending request"), "{text}");
    }
}

#[test]
fn r26_wrong_region_without_a_name_and_a_400_to_a_head() {
    let server = S3sServer::start();
    let head = |status, headers| Rule {
        method: "HEAD",
        contains: "/",
        fault: Fault::Answer(status, headers, ""),
        times: None,
    };
    let open = |proxy: &FaultProxy| {
        open_store_with_env(&url_for(&proxy.endpoint, "p"), &fast_options(), server.env()).unwrap()
    };
    let k: ObjectKey = "k".parse().unwrap();
    // A 301 without x-amz-bucket-region: no "set region=another region".
    let proxy = FaultProxy::start(&server.endpoint, vec![head("301 Moved Permanently", "")]);
    let text = open(&proxy).head(&k).unwrap_err().to_string();
    assert!(!text.contains("another region"), "{text}");
    assert!(text.contains("without naming the bucket's region"), "{text}");
    assert!(text.contains("set region=<the bucket's region>"), "{text}");
    // A 400 to a HEAD naming the region in its header (as AWS answers).
    let rule = head("400 Bad Request", "x-amz-bucket-region: eu-north-1\r\n");
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let text = open(&proxy).head(&k).unwrap_err().to_string();
    assert!(text.contains("the bucket is in eu-north-1; set region=eu-north-1"), "{text}");
    // A bare 400 to a HEAD: the one-byte GET's error body names the region.
    let rules = vec![
        head("400 Bad Request", ""),
        Rule {
            method: "GET",
            contains: "range=bytes=0-0",
            fault: Fault::Answer(
                "400 Bad Request",
                "content-type: application/xml\r\n",
                "<Error><Code>AuthorizationHeaderMalformed</Code><Message>wrong region</Message>\
                 <Region>ap-south-2</Region></Error>",
            ),
            times: None,
        },
    ];
    let proxy = FaultProxy::start(&server.endpoint, rules);
    let err = open(&proxy).head(&k).unwrap_err();
    assert!(
        err.to_string().contains("the bucket is in ap-south-2; set region=ap-south-2"),
        "{err}"
    );
    assert_eq!(proxy.injected(), 2, "{:?}", proxy.seen());
}

#[test]
fn r26_remote_tier_messages_name_what_happened() {
    use crate::engine::TestContext;
    use crate::remote::{action, with_store};
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let produced = ctx
        .run(&with_store(action(&ctx, &ctx.cache, "zlib"), &server, None).switch("--remote-write"));
    produced.expect(&["MISS", "SAVED"]);
    // A remote HIT says where the entry came from; a local HIT does not.
    let consumer = ctx.path("consumer");
    let _ = std::fs::remove_dir_all(ctx.path("out"));
    let run = ctx.run(&with_store(action(&ctx, &consumer, "zlib"), &server, None));
    run.expect(&["HIT"]);
    let hit = run.stderr.lines().find(|l| l.starts_with("strata: HIT ")).unwrap();
    assert!(hit.ends_with(" source=remote"), "{}", run.stderr);
    let _ = std::fs::remove_dir_all(ctx.path("out"));
    let run = ctx.run(&with_store(action(&ctx, &consumer, "zlib"), &server, None));
    run.expect(&["HIT"]);
    assert!(!run.stderr.contains("source=remote"), "{}", run.stderr);

    // An install that fails for a local reason (here `.local`, where entries are staged,
    // is a file) does not advise deleting anything from the store.
    let broken = ctx.path("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join(".local"), b"not a directory").unwrap();
    let _ = std::fs::remove_dir_all(ctx.path("out"));
    let run = ctx.run(&with_store(action(&ctx, &broken, "zlib"), &server, None));
    let warning = run.stderr.lines().find(|l| l.contains("WARNING remote")).unwrap_or_default();
    assert!(!warning.contains("from the store"), "{}", run.stderr);
    assert!(warning.contains("The store's copy is not at fault"), "{}", run.stderr);

    // Half a credential pair: the variables are named, no empty value is printed.
    let half = action(&ctx, &ctx.path("half"), "zlib")
        .flag("--remote-store", server.url(crate::remote::PREFIX))
        .env("AWS_ACCESS_KEY_ID", &server.access_key);
    let _ = std::fs::remove_dir_all(ctx.path("out"));
    let run = ctx.run(&half);
    assert!(
        run.stderr.contains("invalid AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: only one of"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("=\"\""), "{}", run.stderr);
}
