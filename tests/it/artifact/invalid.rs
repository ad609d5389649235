//! Every cause of INVALID, one test each: the slot is published, damaged in one way, and
//! looked up. Permission-bit changes other than owner-exec must stay a HIT.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::Value;
use strata::artifact::{LookupStatus, MANIFEST_SCHEMA, Mode, Stage};
use strata::record::{Envelope, load};

use super::*;

struct Published {
    ws: Workspace,
    dir: PathBuf,
}

fn published() -> Published {
    let ws = Workspace::new();
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::Generated, REQUIRED);
    let dir = store.get_or_build(&key(), &s, write_outputs).unwrap().handle.unwrap().dir();
    Published { ws, dir }
}

impl Published {
    fn lookup(&self) -> strata::artifact::Lookup {
        self.ws.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::Generated, REQUIRED))
    }

    #[track_caller]
    fn assert_invalid(&self, needle: &str) {
        let lookup = self.lookup();
        assert_eq!(lookup.status(), LookupStatus::Invalid, "{lookup:?}");
        let reason = lookup.reason().unwrap();
        assert!(reason.contains(needle), "reason {reason:?} lacks {needle:?}");
    }

    fn manifest(&self) -> PathBuf {
        self.dir.join("artifact_manifest.json")
    }

    /// Re-seals the manifest after `edit` changes its payload (a *valid* record with bad
    /// content, so the record layer cannot be what catches it).
    fn reseal(&self, edit: impl FnOnce(&mut Value)) {
        let envelope = load(&std::fs::read(self.manifest()).unwrap(), &MANIFEST_SCHEMA).unwrap();
        let mut payload = envelope.payload;
        edit(&mut payload);
        let sealed = Envelope::seal(&MANIFEST_SCHEMA, vec![], &payload).unwrap();
        std::fs::write(self.manifest(), sealed.to_bytes()).unwrap();
    }
}

#[test]
fn invalid_extra_file() {
    let p = published();
    std::fs::write(p.dir.join("lib/extra.o"), b"x").unwrap();
    p.assert_invalid("extra file");
}

#[test]
fn invalid_missing_file() {
    let p = published();
    std::fs::remove_file(p.dir.join("lib/libx.a")).unwrap();
    p.assert_invalid("missing");
}

#[test]
fn invalid_same_size_content_change() {
    let p = published();
    std::fs::write(p.dir.join("lib/libx.a"), vec![8u8; 4096]).unwrap();
    p.assert_invalid("has digest blake3:");
}

#[test]
fn invalid_owner_exec_added_or_removed() {
    let p = published();
    std::fs::set_permissions(p.dir.join("meta.json"), std::fs::Permissions::from_mode(0o700))
        .unwrap();
    p.assert_invalid("owner-exec");
    std::fs::set_permissions(p.dir.join("meta.json"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    assert_eq!(p.lookup().status(), LookupStatus::Hit);
    std::fs::set_permissions(p.dir.join("bin/tool"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    p.assert_invalid("owner-exec");
}

#[test]
fn access_bits_are_policy_not_identity() {
    let p = published();
    std::fs::set_permissions(p.dir.join("bin/tool"), std::fs::Permissions::from_mode(0o755))
        .unwrap();
    std::fs::set_permissions(p.dir.join("meta.json"), std::fs::Permissions::from_mode(0o444))
        .unwrap();
    std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::create_dir(p.dir.parent().unwrap().join(".generated.tmp-00000000000000ff")).unwrap();
    assert_eq!(p.lookup().status(), LookupStatus::Hit);
    std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn invalid_file_replaced_by_symlink() {
    let p = published();
    std::fs::remove_file(p.dir.join("meta.json")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", p.dir.join("meta.json")).unwrap();
    p.assert_invalid("symlink");
}

#[test]
fn invalid_special_file() {
    let p = published();
    let status = Command::new("mkfifo").arg(p.dir.join("lib/pipe")).status().unwrap();
    assert!(status.success());
    p.assert_invalid("fifo");
}

#[test]
fn invalid_symlinked_component_under_the_root() {
    let p = published();
    let bucket = p.ws.root().join("artifacts-v1");
    let moved = p.ws.path().join("elsewhere");
    std::fs::rename(&bucket, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &bucket).unwrap();
    p.assert_invalid("symlink");
}

#[test]
fn invalid_empty_slot_without_manifest() {
    let p = published();
    std::fs::remove_dir_all(&p.dir).unwrap();
    std::fs::create_dir(&p.dir).unwrap();
    p.assert_invalid("no artifact_manifest.json");
}

#[test]
fn invalid_malformed_manifest() {
    let p = published();
    for (bytes, needle) in [
        (&b"{"[..], "not valid JSON"),
        (b"\xff", "UTF-8"),
        (b"null", "object"),
        (b"[]", "object"),
        (b"{\"schema\":1.0}", "integer"),
    ] {
        std::fs::write(p.manifest(), bytes).unwrap();
        p.assert_invalid(needle);
    }
}

#[test]
fn invalid_duplicate_json_keys() {
    let p = published();
    let text = std::fs::read_to_string(p.manifest()).unwrap();
    let dup = text.replacen("\"executable\":true", "\"executable\":true,\"executable\":true", 1);
    assert_ne!(dup, text);
    std::fs::write(p.manifest(), dup).unwrap();
    p.assert_invalid("duplicate key");
}

#[test]
fn invalid_reformatted_manifest() {
    let p = published();
    let value: Value = serde_json::from_slice(&std::fs::read(p.manifest()).unwrap()).unwrap();
    std::fs::write(p.manifest(), serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    p.assert_invalid("canonical");
}

#[test]
fn invalid_manifest_over_16_mib() {
    let p = published();
    let mut big = std::fs::read(p.manifest()).unwrap();
    big.resize(16 * 1024 * 1024 + 1, b' ');
    std::fs::write(p.manifest(), big).unwrap();
    p.assert_invalid("larger than");
}

/// A bad path or digest in the manifest is named with its field and value.
#[test]
fn invalid_paths_in_manifest() {
    for bad in [
        "../../outside",
        "/etc/passwd",
        "lib\\libx.a",
        "lib/lib\\x78.a",
        "lib//libx.a",
        "./meta.json",
        "lib/",
        "a\0b",
    ] {
        let p = published();
        p.reseal(|payload| payload["files"][1]["path"] = Value::String(bad.into()));
        p.assert_invalid(&format!("field files[1].path {}", Value::String(bad.into())));
    }
    let p = published();
    p.reseal(|payload| payload["files"][1]["sha256"] = Value::String("A".repeat(64)));
    p.assert_invalid("field files[1].sha256");
}

/// Editing only `env_digest` names `env_digest`, not the key digest.
#[test]
fn invalid_env_digest_names_its_field() {
    let p = published();
    p.reseal(|payload| payload["env_digest"] = Value::String("f".repeat(64)));
    p.assert_invalid("env_digest");
    assert!(!p.lookup().reason().unwrap().contains("key_digest"));
}

#[test]
fn invalid_field_tampering() {
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        ("size coerced", Box::new(|v: &mut Value| v["files"][0]["size_bytes"] = Value::Bool(true))),
        (
            "wrong hash",
            Box::new(|v: &mut Value| v["files"][0]["sha256"] = Value::String("0".repeat(64))),
        ),
        ("files emptied", Box::new(|v: &mut Value| v["files"] = Value::Array(vec![]))),
        (
            "required emptied",
            Box::new(|v: &mut Value| v["spec"]["required_files"] = Value::Array(vec![])),
        ),
        ("schema", Box::new(|v: &mut Value| v["key"]["schema"] = Value::from(99))),
        ("extra field", Box::new(|v: &mut Value| v["extra"] = Value::from(1))),
        ("stage", Box::new(|v: &mut Value| v["spec"]["stage"] = Value::String("ready".into()))),
        ("key digest", Box::new(|v: &mut Value| v["key_digest"] = Value::String("f".repeat(64)))),
        (
            "components",
            Box::new(|v: &mut Value| v["key"]["environment"]["components"] = serde_json::json!({})),
        ),
    ];
    for (what, edit) in edits {
        let p = published();
        p.reseal(edit);
        let lookup = p.lookup();
        assert_eq!(lookup.status(), LookupStatus::Invalid, "{what}: {lookup:?}");
    }
}

#[test]
fn invalid_manifest_of_another_key() {
    let p = published();
    let store = p.ws.store(Mode::ReadWrite);
    let other = store
        .get_or_build(&key_with(&hex('d')), &spec(Stage::Generated, REQUIRED), write_outputs)
        .unwrap()
        .handle
        .unwrap();
    std::fs::copy(other.dir().join("artifact_manifest.json"), p.manifest()).unwrap();
    p.assert_invalid("another slot");
}

/// Names are bytes: a backslash or a byte that is not UTF-8 in a name is no damage (an
/// extra empty directory is allowed whatever its name), and an extra file with such a name
/// is named, in the name encoding, as the extra file it is.
#[test]
fn directory_and_file_names_are_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let p = published();
    std::fs::create_dir(p.dir.join("bad\\name")).unwrap();
    std::fs::create_dir(p.dir.join(std::ffi::OsStr::from_bytes(b"lib/d\xe9"))).unwrap();
    assert_eq!(p.lookup().status(), LookupStatus::Hit);
    std::fs::write(p.dir.join(std::ffi::OsStr::from_bytes(b"lib/d\xe9/x\xff.o")), b"x").unwrap();
    p.assert_invalid("/lib/d\\xe9/x\\xff.o is not listed in the manifest (extra file)");
}

#[test]
fn cli_lookup_reports_invalid_with_exit_4_and_never_repairs() {
    let p = published();
    std::fs::write(p.dir.join("extra"), b"x").unwrap();
    let flags = id_flags(&p.ws.root(), &hex('b'), "generated", REQUIRED);
    let out = strata().args(["artifact", "lookup", "--json"]).args(&flags).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(json(&out.stdout)["status"], "invalid");
    let out = strata()
        .args(["artifact", "get-or-build", "--json"])
        .args(&flags)
        .args(["--private-root", p.ws.private().to_str().unwrap()])
        .args(["--", "sh", "-c", "mkdir -p \"$STRATA_ARTIFACT_OUT/lib\" \"$STRATA_ARTIFACT_OUT/bin\"; touch \"$STRATA_ARTIFACT_OUT/lib/libx.a\" \"$STRATA_ARTIFACT_OUT/bin/tool\" \"$STRATA_ARTIFACT_OUT/meta.json\""])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    assert_eq!(v["disposition"], "private");
    assert_eq!(v["failure"], "invalid");
    assert!(p.dir.join("extra").exists(), "invalid slots are never repaired online");
    let out = strata()
        .args(["artifact", "verify", "--all", "--root", p.ws.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
}

/// `verify --repeat N`: corruption found by a later pass is reported like corruption found
/// by the first one (exit 4, one JSON object naming it), not as an error without output.
#[test]
fn verify_repeat_reports_corruption_found_on_a_later_pass() {
    use std::time::{Duration, Instant};
    // The corruption must land after the first pass: on a slow machine the first pass may
    // still be running after the pause, so retry with longer pauses (bounded).
    for pause_ms in [1500u64, 4000, 10000] {
        let p = published();
        let stdout_path = p.ws.path().join("stdout.json");
        let mut child = strata()
            .args(["artifact", "verify", "--json", "--repeat", "4000000000"])
            .args(id_flags(&p.ws.root(), &hex('b'), "generated", REQUIRED))
            .stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Let the first pass (a full lookup) finish, then change bytes under the handle.
        std::thread::sleep(Duration::from_millis(pause_ms));
        {
            use std::os::unix::fs::FileExt;
            let file =
                std::fs::OpenOptions::new().write(true).open(p.dir.join("lib/libx.a")).unwrap();
            file.write_all_at(&[8u8], 100).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("verify --repeat did not notice the corruption");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let v = json(&std::fs::read(&stdout_path).unwrap());
        assert_eq!(status.code(), Some(4), "{}", v["reason"]);
        assert_eq!(v["status"], "invalid");
        assert!(v["reason"].as_str().unwrap().contains("libx.a"), "{}", v["reason"]);
        let passes = v["passes"].as_array().unwrap();
        if passes.len() == 1 {
            continue; // found by the first pass: the machine was too slow, try again
        }
        assert_eq!(v["failed_pass"].as_u64(), Some(passes.len() as u64));
        assert!(v["dir"].is_null());
        return;
    }
    panic!("the corruption was always found by the first pass; a later pass never ran");
}

/// A needed slot that is INVALID exits 4 like `lookup` does (3 is reserved for a MISS):
/// `push` of an invalid slot, `promote` with an invalid generated slot.
#[test]
fn push_and_promote_of_an_invalid_slot_exit_4() {
    let p = published();
    std::fs::write(p.dir.join("lib/extra.o"), b"x").unwrap();
    let flags = id_flags(&p.ws.root(), &hex('b'), "generated", REQUIRED);
    let remote = format!("file://{}", p.ws.path().join("remote").display());
    let push = strata()
        .args(["artifact", "push", "--json", "--store", &remote])
        .args(&flags)
        .output()
        .unwrap();
    assert_eq!(push.status.code(), Some(4), "{}", String::from_utf8_lossy(&push.stderr));
    assert!(String::from_utf8_lossy(&push.stderr).contains("invalid"));
    let promote = strata()
        .args(["artifact", "promote", "--ready-require", "bin/more"])
        .args(&flags)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(promote.status.code(), Some(4), "{}", String::from_utf8_lossy(&promote.stderr));
    assert!(!p.ws.path().join("remote").join("l0-v1").exists(), "nothing uploaded");
}
