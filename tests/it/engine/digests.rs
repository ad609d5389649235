//! Issue 8 item 2 for L1 entries: new entries record BLAKE3 digests, `--digest sha256` (or
//! `STRATA_DIGEST=sha256`) SHA-256; both HIT; anything else is a usage error that names the
//! option and the variable.

use super::TestContext;

#[test]
fn engine_digest_option_picks_the_algorithm_of_new_entries() {
    let ctx = TestContext::new();
    for (unit, flag, env, want) in [
        ("dflt", None, None, "blake3:"),
        ("flag", Some("sha256"), None, "sha256:"),
        ("env", None, Some("sha256"), "sha256:"),
    ] {
        let out = ctx.path(&format!("out-{unit}"));
        let mut action = ctx.third_party(unit, &out).cmd(&[
            "sh".as_ref(),
            "-c".as_ref(),
            "mkdir -p \"$0\" && echo built > \"$0/a.txt\"".as_ref(),
            out.as_os_str(),
        ]);
        if let Some(f) = flag {
            action = action.flag("--digest", f);
        }
        if let Some(e) = env {
            action = action.env("STRATA_DIGEST", e);
        }
        let key = ctx.run(&action).expect(&["MISS", "SAVED"]).key();
        let manifest =
            std::fs::read_to_string(ctx.third_party_entry(unit, &key).dir.join("manifest.json"))
                .unwrap();
        assert!(manifest.contains(&format!("\"digest\":\"{want}")), "{unit}: {manifest}");
        std::fs::remove_dir_all(&out).unwrap();
        ctx.run(&action).expect(&["HIT"]);
        assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "built\n");
    }
    let out = ctx.path("out-bad");
    let bad = ctx.third_party("bad", &out).env("STRATA_DIGEST", "md5").cmd(&["true"]);
    let r = ctx.run(&bad);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("STRATA_DIGEST") && r.stderr.contains("blake3"), "{}", r.stderr);
}
