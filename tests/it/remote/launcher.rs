//! The compiler launcher with a remote store: a producer's compilation is a consumer's HIT
//! (byte-identical object, the candidate checked as for a local entry).

use super::{PREFIX, store_files};
use crate::engine::TestContext;
use crate::launcher::{Launcher, counters, require_tool, write_file};
use crate::transport::server::S3sServer;

#[test]
fn remote_launcher_producer_to_consumer_hit_is_byte_identical() {
    require_tool("gcc", "install gcc");
    let server = S3sServer::start();
    let ctx = TestContext::new();
    let src = ctx.path("src");
    write_file(&src.join("a.h"), "#define A 41\n");
    write_file(&src.join("a.c"), "#include \"a.h\"\nint a(void) { return A + 1; }\n");
    let argv = ["gcc", "-O1", "-c", "a.c", "-o", "a.o"];
    let remote = |l: Launcher| {
        l.env("STRATA_REMOTE_STORE", server.url(PREFIX))
            .env("AWS_ACCESS_KEY_ID", &server.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &server.secret_key)
    };

    let producer = remote(Launcher::new(&ctx.cache)).env("STRATA_REMOTE_WRITE", "1");
    let run = producer.run(&src, &argv);
    run.expect_code(0);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let built = std::fs::read(src.join("a.o")).unwrap();
    let c = counters(&ctx.cache);
    assert_eq!(
        (c.get("miss"), c.get("remote_miss"), c.get("remote_uploaded")),
        (Some(&1), Some(&1), Some(&1)),
        "{c:?}"
    );
    let files = store_files(&server);
    assert_eq!(files.keys().filter(|k| k.contains("~refs/")).count(), 1, "{:?}", files.keys());

    // A consumer with an empty cache and read credentials: a HIT, the object byte for byte.
    std::fs::remove_file(src.join("a.o")).unwrap();
    let consumer_cache = ctx.path("consumer-cache");
    let consumer = remote(Launcher::new(&consumer_cache));
    let run = consumer.run(&src, &argv);
    run.expect_code(0);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    assert_eq!(std::fs::read(src.join("a.o")).unwrap(), built);
    let c = counters(&consumer_cache);
    assert_eq!((c.get("hit"), c.get("remote_hit"), c.get("miss")), (Some(&1), Some(&1), None));
    assert_eq!(store_files(&server), files, "the consumer wrote to the store");

    // A changed header: the installed entry's candidate does not apply, so it compiles
    // (a MISS), as for a local entry.
    write_file(&src.join("a.h"), "#define A 1\n");
    let run = consumer.run(&src, &argv);
    run.expect_code(0);
    let c = counters(&consumer_cache);
    assert_eq!((c.get("hit"), c.get("miss")), (Some(&1), Some(&1)), "{c:?}");
    assert_ne!(std::fs::read(src.join("a.o")).unwrap(), built);
}
