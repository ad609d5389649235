//! L0 push/pull: round trips through a directory store and a real s3s-fs server, put-if-absent,
//! rejection of corrupt objects, fail-open transport errors.

use std::path::{Path, PathBuf};

use strata::artifact::{LookupStatus, Mode, Stage};

use super::*;
use crate::transport::server::S3sServer;

fn publish(ws: &Workspace) -> PathBuf {
    let store = ws.store(Mode::ReadWrite);
    let s = spec(Stage::BinaryReady, REQUIRED);
    store.get_or_build(&key(), &s, write_outputs).unwrap().handle.unwrap().dir()
}

fn l0(cmd: &str, root: &Path, store_url: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let out = strata()
        .args(["artifact", cmd, "--json", "--store", store_url])
        .args(id_flags(root, &hex('b'), "ready", REQUIRED))
        .args(extra)
        .env("STRATA_S3_MAX_RETRIES", "0")
        .env("STRATA_S3_TIMEOUT_SECONDS", "5")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = if out.stdout.is_empty() { serde_json::Value::Null } else { json(&out.stdout) };
    (out.status.code().unwrap(), v, stderr)
}

fn round_trip(url: &str, envs: &[(String, String)]) {
    let producer = Workspace::new();
    let slot = publish(&producer);
    let with_env = |cmd: &str, root: &Path, extra: &[&str]| {
        let mut c = strata();
        c.args(["artifact", cmd, "--json", "--store", url])
            .args(id_flags(root, &hex('b'), "ready", REQUIRED))
            .args(extra);
        for (k, v) in envs {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code().unwrap(),
            json(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, v, err) = with_env("push", &producer.root(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["outcome"], "uploaded", "{v}");
    let (code, v, _) = with_env("push", &producer.root(), &[]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("already_present")));
    let consumer = Workspace::new();
    let dest = consumer.path().join("out");
    let (code, v, err) = with_env("pull", &consumer.root(), &["--dest", dest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["outcome"], "pulled");
    assert_eq!(v["disposition"], "published");
    assert_eq!(
        std::fs::read(dest.join("lib/libx.a")).unwrap(),
        std::fs::read(slot.join("lib/libx.a")).unwrap()
    );
    // The pulled slot is a normal verified slot with the same manifest payload.
    let pulled = consumer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
    assert_eq!(pulled.status(), LookupStatus::Hit);
    let original =
        producer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
    assert_eq!(pulled.handle().unwrap().manifest(), original.handle().unwrap().manifest());
    // A second pull is a local HIT.
    let (code, v, _) = with_env("pull", &consumer.root(), &[]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("local_hit")));
}

#[test]
fn l0_round_trip_through_a_directory_store() {
    let remote = tempfile::tempdir().unwrap();
    round_trip(&format!("file://{}", remote.path().display()), &[]);
}

#[test]
fn l0_round_trip_through_s3s_fs() {
    let server = S3sServer::start();
    let envs = vec![
        ("AWS_ACCESS_KEY_ID".to_owned(), server.access_key.clone()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), server.secret_key.clone()),
    ];
    round_trip(&server.url("ci/l0"), &envs);
}

#[test]
fn l0_round_trip_through_an_http_cache_server() {
    let nginx = crate::transport::nginx::Nginx::start();
    round_trip(&nginx.url("store"), &[]);
    // The object lies under the server's directory, where any HTTP client finds it.
    let stored: Vec<_> = walkdir::WalkDir::new(nginx.data_dir("store").join("l0-v1"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
}

#[test]
fn l0_default_store_is_under_xdg_cache_home() {
    let producer = Workspace::new();
    publish(&producer);
    let xdg = producer.path().join("xdg");
    let out = strata()
        .args(["artifact", "push", "--json"])
        .args(id_flags(&producer.root(), &hex('b'), "ready", REQUIRED))
        .env_remove("STRATA_STORE")
        .env("XDG_CACHE_HOME", &xdg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let object = json(&out.stdout)["object"].as_str().unwrap().to_owned();
    assert!(xdg.join("strata/store").join(object).is_file());
}

/// Issue 11: the default store follows the XDG rule. A relative `XDG_CACHE_HOME` is ignored
/// (the store is under `$HOME/.cache`, not under the working directory, where the old code
/// put it); without `HOME` and `XDG_CACHE_HOME` there is no default (the old code wrote into
/// a literal `./~/.cache`), a usage error naming both variables.
#[test]
fn r11_l0_default_store_ignores_a_relative_xdg_cache_home_and_needs_a_home() {
    let producer = Workspace::new();
    publish(&producer);
    let cwd = producer.path().join("cwd");
    let home = producer.path().join("home");
    std::fs::create_dir_all(&cwd).unwrap();
    let push = |envs: &[(&str, &Path)]| {
        let mut c = strata();
        c.args(["artifact", "push", "--json"])
            .args(id_flags(&producer.root(), &hex('b'), "ready", REQUIRED))
            .env_remove("STRATA_STORE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("HOME")
            .current_dir(&cwd);
        for (name, value) in envs {
            c.env(name, value);
        }
        c.output().unwrap()
    };
    let out = push(&[("XDG_CACHE_HOME", Path::new("relative")), ("HOME", &home)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let object = json(&out.stdout)["object"].as_str().unwrap().to_owned();
    assert!(home.join(".cache/strata/store").join(&object).is_file());
    assert!(!cwd.join("relative").exists());

    let out = push(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("neither XDG_CACHE_HOME nor HOME"), "{stderr}");
    assert!(stderr.contains("--store or STRATA_STORE"), "{stderr}");
    assert!(!cwd.join("~").exists(), "a literal ~ directory was made");
}

#[test]
fn l0_corrupt_object_is_rejected_and_nothing_is_published() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, v, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let object = remote.path().join(v["object"].as_str().unwrap());
    let original = std::fs::read(&object).unwrap();
    for flip in [original.len() / 2, original.len() - 5, 40] {
        let mut bytes = original.clone();
        bytes[flip] ^= 0x55;
        std::fs::write(&object, &bytes).unwrap();
        let consumer = Workspace::new();
        let (code, v, err) = l0("pull", &consumer.root(), &url, &[]);
        assert_eq!(code, 3, "flip at {flip}: {v} {err}");
        assert_eq!(v["outcome"], "rejected", "{v}");
        assert!(err.contains("rejected"), "{err}");
        // Issue 7 item 11: the bytes were just downloaded, so the damage may be transient.
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains(
                "the object was just downloaded, so this may be a transient transfer error"
            ) && reason.contains("retry the pull"),
            "{reason}"
        );
        assert!(!reason.contains("artifact gc") && !reason.contains("delete"), "{reason}");
        let lookup =
            consumer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
        assert_eq!(lookup.status(), LookupStatus::Miss);
        let (code, _, _) = l0("pull", &consumer.root(), &url, &["--strict"]);
        assert_eq!(code, 1);
    }
    // A manifest damaged inside an intact zstd frame: the record's problem, and no advice
    // meant for a stored slot (`strata artifact gc`).
    let mut tar = zstd::decode_all(original.as_slice()).unwrap();
    let at = tar.windows(20).position(|w| w == b"\"producer_version\":\"").unwrap() + 20;
    tar[at] ^= 0x01;
    std::fs::write(&object, zstd::encode_all(tar.as_slice(), 3).unwrap()).unwrap();
    let (code, v, _) = l0("pull", &Workspace::new().root(), &url, &[]);
    assert_eq!((code, v["outcome"].as_str()), (3, Some("rejected")), "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("manifest does not load: record digest mismatch"), "{reason}");
    assert!(reason.contains("retry the pull") && !reason.contains("artifact gc"), "{reason}");
    // An intact archive of another key under this key's name is rejected too.
    std::fs::write(&object, &original).unwrap();
    let other_key_flags = id_flags(&Workspace::new().root(), &hex('d'), "ready", REQUIRED);
    let other_object = remote.path().join(
        strata::artifact::l0::object_key(&key_with(&hex('d')), &spec(Stage::BinaryReady, REQUIRED))
            .as_str(),
    );
    std::fs::create_dir_all(other_object.parent().unwrap()).unwrap();
    std::fs::copy(&object, &other_object).unwrap();
    let out = strata()
        .args(["artifact", "pull", "--json", "--store", &url])
        .args(&other_key_flags)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(json(&out.stdout)["reason"].as_str().unwrap().contains("another key"));
}

#[test]
fn l0_missing_object_and_transport_failures_fail_open() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let consumer = Workspace::new();
    let (code, v, _) =
        l0("pull", &consumer.root(), &format!("file://{}", remote.path().display()), &[]);
    assert_eq!((code, v["outcome"].as_str()), (3, Some("not_in_store")));
    let port = crate::transport::server::free_port();
    let dead = format!("s3://b/p?endpoint=http://127.0.0.1:{port}&region=us-east-1");
    let creds = [("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")];
    for (cmd, root, expected) in [("push", producer.root(), 0), ("pull", consumer.root(), 3)] {
        let run = |strict: bool| {
            let mut c = strata();
            c.args(["artifact", cmd, "--json", "--store", &dead])
                .args(id_flags(&root, &hex('b'), "ready", REQUIRED))
                .env("STRATA_S3_MAX_RETRIES", "0");
            if strict {
                c.arg("--strict");
            }
            c.envs(creds);
            c.output().unwrap()
        };
        let out = run(false);
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
        assert_eq!(run(true).status.code(), Some(1), "{cmd} --strict");
    }
    // Pushing an artifact that is not published locally is "not available" (exit 3).
    let empty = Workspace::new();
    let (code, _, err) =
        l0("push", &empty.root(), &format!("file://{}", remote.path().display()), &[]);
    assert_eq!(code, 3, "{err}");
}

/// `pull --dest` is checked before anything is downloaded or published: a non-empty
/// destination or one inside the root is a usage error (exit 2) that leaves the local
/// store untouched.
#[test]
fn l0_pull_checks_its_destination_before_downloading() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, _, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let consumer = Workspace::new();
    std::fs::create_dir_all(consumer.root()).unwrap();
    let full = consumer.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    for dest in [full.clone(), consumer.root().join("inside")] {
        let dest = dest.to_str().unwrap();
        let (code, v, err) = l0("pull", &consumer.root(), &url, &["--dest", dest]);
        assert_eq!(code, 2, "{v} {err}");
        assert!(err.contains(dest), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(consumer.root()).unwrap().count(),
        0,
        "the artifact was pulled and published before the destination was refused"
    );
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
}

/// A locally INVALID slot is not hidden by `pull`: the pulled artifact stays private (an
/// invalid slot is never replaced online) and a warning says why and how to clean up.
#[test]
fn l0_pull_warns_about_a_locally_invalid_slot() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, _, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let consumer = Workspace::new();
    let local = publish(&consumer);
    std::fs::write(local.join("lib/extra.o"), b"x").unwrap();
    let dest = consumer.path().join("dest");
    let (code, v, err) = l0("pull", &consumer.root(), &url, &["--dest", dest.to_str().unwrap()]);
    assert_eq!(code, 0, "{v} {err}");
    assert_eq!(v["disposition"], "private", "{v}");
    assert!(err.contains("warning") && err.contains("invalid"), "{err}");
    assert!(err.contains("strata artifact gc"), "{err}");
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(dest.join("lib/libx.a").is_file());
    assert!(v["dir"].is_null(), "the private copy is removed, so it is not reported: {v}");
}

/// Bytes after the end of the tar stream — a further zstd frame with data, or garbage after
/// the frame — reject the object; zero padding does not.
#[test]
fn l0_trailing_data_after_the_archive_is_rejected() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, v, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let object = remote.path().join(v["object"].as_str().unwrap());
    let original = std::fs::read(&object).unwrap();
    let frame = |data: &[u8]| zstd::encode_all(data, 3).unwrap();
    for (what, tail, accepted) in [
        ("a frame with data", frame(b"smuggled payload"), false),
        ("garbage", b"not zstd at all".to_vec(), false),
        ("a frame of zero padding", frame(&[0u8; 4096]), true),
    ] {
        let mut bytes = original.clone();
        bytes.extend_from_slice(&tail);
        std::fs::write(&object, &bytes).unwrap();
        let consumer = Workspace::new();
        let (code, v, err) = l0("pull", &consumer.root(), &url, &[]);
        if accepted {
            assert_eq!((code, v["outcome"].as_str()), (0, Some("pulled")), "{what}: {v} {err}");
        } else {
            assert_eq!((code, v["outcome"].as_str()), (3, Some("rejected")), "{what}: {v} {err}");
            let lookup =
                consumer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
            assert_eq!(lookup.status(), LookupStatus::Miss, "{what}");
        }
    }
}

/// Issue 7 item 6 for L0: the answer to the object's PUT is lost, the retry gets 412
/// because the first attempt stored it. The push reports `uploaded` (it did upload), not
/// `already_present`, and the object pulls.
#[test]
fn l0_a_push_whose_answer_was_lost_is_uploaded() {
    use crate::transport::proxy::{Fault, FaultProxy, Rule};
    let server = S3sServer::start();
    let rule =
        Rule { method: "PUT", contains: "/ci/l0/", fault: Fault::LoseAnswer, times: Some(1) };
    let proxy = FaultProxy::start(&server.endpoint, vec![rule]);
    let url = crate::transport::server::url_for(&proxy.endpoint, "ci/l0");
    let producer = Workspace::new();
    publish(&producer);
    let out = strata()
        .args(["artifact", "push", "--json", "--store", &url])
        .args(id_flags(&producer.root(), &hex('b'), "ready", REQUIRED))
        .env("AWS_ACCESS_KEY_ID", &server.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &server.secret_key)
        .env("STRATA_S3_MAX_RETRIES", "2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v = json(&out.stdout);
    assert_eq!(v["outcome"], "uploaded", "{v}\n{stderr}");
    assert_eq!(proxy.injected(), 1, "{:?}", proxy.seen());
    let consumer = Workspace::new();
    let pulled = strata()
        .args(["artifact", "pull", "--json", "--store", &server.url("ci/l0")])
        .args(id_flags(&consumer.root(), &hex('b'), "ready", REQUIRED))
        .env("AWS_ACCESS_KEY_ID", &server.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &server.secret_key)
        .output()
        .unwrap();
    assert_eq!(
        json(&pulled.stdout)["outcome"],
        "pulled",
        "{}",
        String::from_utf8_lossy(&pulled.stderr)
    );
}

/// A pull leaves nothing of its own in an explicit `--private-root`: after publishing the
/// pulled artifact (the slot is the result) and after rejecting an object. Before, every
/// pull left a `strata-build-<hex>` copy of the whole artifact there (or a partial one).
#[test]
fn l0_pull_leaves_no_private_build_behind() {
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, v, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let object = remote.path().join(v["object"].as_str().unwrap());
    let original = std::fs::read(&object).unwrap();
    let leftovers = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
    };

    let consumer = Workspace::new();
    let private = consumer.private();
    let private_flag = ["--private-root", private.to_str().unwrap()];
    let (code, v, err) = l0("pull", &consumer.root(), &url, &private_flag);
    assert_eq!((code, v["disposition"].as_str()), (0, Some("published")), "{v} {err}");
    assert_eq!(leftovers(&private), Vec::<PathBuf>::new());
    let lookup = consumer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
    assert_eq!(lookup.status(), LookupStatus::Hit);

    // A rejected object (a byte flipped in the last file's data) leaves nothing either.
    let mut tar = zstd::decode_all(original.as_slice()).unwrap();
    let at = (0..tar.len()).rev().find(|i| tar[*i] != 0).unwrap();
    tar[at] ^= 0x01;
    std::fs::write(&object, zstd::encode_all(tar.as_slice(), 3).unwrap()).unwrap();
    let consumer = Workspace::new();
    let private = consumer.private();
    let private_flag = ["--private-root", private.to_str().unwrap()];
    let (code, v, err) = l0("pull", &consumer.root(), &url, &private_flag);
    assert_eq!((code, v["outcome"].as_str()), (3, Some("rejected")), "{v} {err}");
    assert_eq!(leftovers(&private), Vec::<PathBuf>::new());
}

/// An L0 object never decides how much memory a pull holds: a GNU long-name entry that
/// claims 1 GiB (a zstd object of some 30 KiB) is rejected from its header, under a
/// 512 MiB address-space limit. Before, the `tar` crate read the whole name into memory
/// (the pull died for want of memory, or used gigabytes for a larger claim). Pax and sparse
/// headers, which strata never writes and which can change the next entry's size, are
/// rejected too.
#[test]
fn l0_long_name_claims_do_not_decide_memory() {
    use std::io::Write as _;
    let producer = Workspace::new();
    publish(&producer);
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (code, v, err) = l0("push", &producer.root(), &url, &[]);
    assert_eq!(code, 0, "{err}");
    let object = remote.path().join(v["object"].as_str().unwrap());
    let tar_bytes = zstd::decode_all(std::fs::read(&object).unwrap().as_slice()).unwrap();
    let pull_limited = |consumer: &Workspace| {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "ulimit -v 524288; exec \"$@\"", "sh", crate::strata_exe()])
            .args(["artifact", "pull", "--json", "--store", &url])
            .args(id_flags(&consumer.root(), &hex('b'), "ready", REQUIRED));
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    };

    // 1 GiB of long name, then the real archive.
    let claim: u64 = 1 << 30;
    let file = std::fs::File::create(&object).unwrap();
    let mut enc = zstd::Encoder::new(file, 3).unwrap();
    enc.write_all(&super::extension_header(tar::EntryType::GNULongName, claim)).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..(claim >> 20) {
        enc.write_all(&chunk).unwrap();
    }
    enc.write_all(&tar_bytes).unwrap();
    enc.finish().unwrap();
    assert!(std::fs::metadata(&object).unwrap().len() < 1 << 20);
    let consumer = Workspace::new();
    let (code, stdout, stderr) = pull_limited(&consumer);
    assert_eq!(code, Some(3), "{stdout} {stderr}");
    let v = json(stdout.as_bytes());
    assert_eq!(v["outcome"], "rejected", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("long-name entry of 1073741824 bytes"), "{reason}");
    let lookup = consumer.store(Mode::ReadOnly).lookup(&key(), &spec(Stage::BinaryReady, REQUIRED));
    assert_eq!(lookup.status(), LookupStatus::Miss);

    // A pax header in front of the archive.
    let record = b"12 comment=x\n";
    let mut with_pax = super::extension_header(tar::EntryType::XHeader, record.len() as u64);
    with_pax.extend_from_slice(record);
    with_pax.resize(1024, 0);
    with_pax.extend_from_slice(&tar_bytes);
    std::fs::write(&object, zstd::encode_all(with_pax.as_slice(), 3).unwrap()).unwrap();
    let (code, stdout, stderr) = pull_limited(&Workspace::new());
    assert_eq!(code, Some(3), "{stdout} {stderr}");
    let reason = json(stdout.as_bytes())["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("a pax header"), "{reason}");
}

/// Every phase a [`strata::progress::Progress`] was told of: label, total, bytes advanced.
#[derive(Default)]
struct Phases(std::sync::Mutex<Vec<(String, u64, u64)>>);

impl strata::progress::Progress for Phases {
    fn begin(&self, label: &str, total_bytes: u64) {
        self.0.lock().unwrap().push((label.to_owned(), total_bytes, 0));
    }
    fn advance(&self, bytes: u64) {
        self.0.lock().unwrap().last_mut().expect("advance before begin").2 += bytes;
    }
    fn finish(&self) {}
}

impl Phases {
    fn take(&self) -> Vec<(String, u64, u64)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Push, pull and gc report their phases with totals that the bytes advanced reach, over
/// S3 and a directory store (issue 11 item 3).
#[test]
fn r11_push_pull_and_gc_report_their_progress() {
    use strata::artifact::l0::{self, Trust};
    use strata::transport::{FsStore, ObjectStore, TransportOptions};
    const MIB: u64 = 1024 * 1024;
    let producer = Workspace::new();
    let store = producer.store(Mode::ReadWrite);
    let s = spec(Stage::BinaryReady, REQUIRED);
    let build = |dir: &Path| {
        write_outputs(dir)?;
        std::fs::write(dir.join("lib/libx.a"), crate::transport::random_bytes(12 << 20, 11))
    };
    store.get_or_build(&key(), &s, build).unwrap();
    let payload = store.lookup(&key(), &s).handle().unwrap().manifest().total_bytes();
    assert!(payload > 12 * MIB);

    let server = S3sServer::start();
    // One PUT and one GET: s3s-fs cannot start a multipart upload of a key this long (its
    // metadata file name, the key in base64, exceeds 255 bytes). Multipart progress is
    // covered by the snapshot tests (`snapshot::progress`).
    let options = TransportOptions { part_size_bytes: 32 * MIB, ..TransportOptions::default() };
    let s3 = server.store("l0", &options);
    let dir = tempfile::tempdir().unwrap();
    let fs_store = FsStore::new(dir.path().join("remote"));
    for remote in [s3.as_ref(), &fs_store as &dyn ObjectStore] {
        let phases = Phases::default();
        let pushed = l0::push(&store, remote, &key(), &s, &Trust::default(), &phases).unwrap();
        let archive = pushed.archive_bytes;
        assert!(archive > 12 * MIB, "{pushed:?}");
        let want = [("pack".to_owned(), payload, payload), ("upload".to_owned(), archive, archive)];
        assert_eq!(phases.take(), want, "{}", remote.describe());

        let consumer = Workspace::new();
        let target = consumer.store(Mode::ReadWrite);
        let pulled = l0::pull(&target, remote, &key(), &s, &Trust::default(), &phases).unwrap();
        assert_eq!(pulled.downloaded_bytes, archive);
        assert_eq!(phases.take(), [("download".to_owned(), archive, archive)]);
        // Nothing to download: no phase.
        l0::pull(&target, remote, &key(), &s, &Trust::default(), &phases).unwrap();
        assert_eq!(phases.take(), []);
    }

    let options = strata::artifact::GcOptions { dry_run: false };
    let phases = Phases::default();
    let report = strata::artifact::gc(store.root(), options, &phases).unwrap();
    assert_eq!(report.kept_slots, 1);
    let got = phases.take();
    assert_eq!(got.len(), 1, "{got:?}");
    let (label, total, advanced) = &got[0];
    assert_eq!(label, "verify");
    // The payload and the slot's manifest.
    assert!(*total > payload && *total < payload + 64 * 1024, "{got:?}");
    assert_eq!(advanced, total);
}
