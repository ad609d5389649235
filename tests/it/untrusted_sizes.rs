//! No reservation from untrusted sizes (issue 7 item 3): a size that an archive header, a
//! manifest, a sidecar or an HTTP `Content-Length` declares never decides how much disk
//! strata reserves; files grow only by bytes that arrived.
//!
//! The example: a 236-byte gzip tar whose single header claims a 64 MiB file made
//! `strata snapshot unpack` `fallocate` 64 MiB (a 1 TiB claim filled the disk) before it
//! found the archive truncated. Each CLI test here runs strata under a file-size limit
//! (`ulimit -f`, RLIMIT_FSIZE, which `fallocate` and `ftruncate` honour): reserving the
//! claimed size kills strata with SIGXFSZ (or fails with EFBIG), while writing as data
//! arrives fails only with the truncation the archive really has.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use strata::artifact::{FileRecord, ManifestPayload, Stage};
use strata::digest::Sha256Digest;
use strata::fs::RelPath;
use strata::transport::{TransportOptions, open_store_with_env};

use crate::artifact::{REQUIRED, Workspace, hex, id_flags, key, spec};
use crate::snapshot::craft::publish;
use crate::snapshot::{Scratch, names};

const MIB: u64 = 1024 * 1024;
const TIB: u64 = 1024 * 1024 * MIB;

/// `ulimit -f` in blocks: 2 MiB where the shell counts 512-byte blocks (dash), 4 MiB where
/// it counts KiB (bash). Far below every claim below, far above every real file.
const FILE_LIMIT_BLOCKS: &str = "4096";

/// Runs the strata binary with `args` (and `env`) under the file-size limit, from `cwd`.
fn strata_limited(cwd: &Path, args: &[&OsStr], env: &[(&str, String)]) -> Output {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -f {FILE_LIMIT_BLOCKS} && exec \"$0\" \"$@\""))
        .arg(crate::strata_exe())
        .args(args)
        .env_remove("STRATA_STORE")
        .env_remove("STRATA_CACHE_ROOT")
        .env("HOME", cwd)
        .current_dir(cwd);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

/// Asserts the process exited normally (not killed by SIGXFSZ) with `code`.
#[track_caller]
fn assert_exit(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        (out.status.code(), std::os::unix::process::ExitStatusExt::signal(&out.status)),
        (Some(code), None),
        "a signal here is SIGXFSZ: strata grew a file past the limit\nstderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// A tar stream holding, for a snapshot path (`actions-v1/…`), a directory entry for its
/// parent (snapshots list every directory; L0 archives hold none), and one regular-file
/// header for `path` that claims `claim` bytes, followed by only `data` (the archive ends
/// inside the file).
fn truncated_tar(path: &str, claim: u64, data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some((parent, _)) = path.rsplit_once('/').filter(|_| path.starts_with("actions-v1/")) {
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_path(format!("{parent}/")).unwrap();
        dir.set_size(0);
        dir.set_mode(0o755);
        dir.set_mtime(0);
        dir.set_cksum();
        bytes.extend_from_slice(dir.as_bytes());
    }
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_path(path).unwrap();
    header.set_size(claim);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// The example and its 1 TiB sibling, gzip and zstd: `snapshot unpack` fails with the
/// truncation, exit 1, leaves nothing behind, and never grows a file past the limit.
#[test]
fn r7_snapshot_unpack_never_reserves_a_claimed_size() {
    for (claim, compression) in [(64 * MIB, "gzip"), (TIB, "gzip"), (64 * MIB, "zstd")] {
        let dir = tempfile::tempdir().unwrap();
        let tar = truncated_tar("actions-v1/big", claim, b"a few bytes");
        let object = match compression {
            "gzip" => gzip(&tar),
            _ => zstd::encode_all(tar.as_slice(), 3).unwrap(),
        };
        if compression == "gzip" && claim == 64 * MIB {
            // The object: one header, a few bytes, gzip.
            assert!(object.len() < 300, "{} bytes", object.len());
        }
        let input = dir.path().join("evil.tar");
        std::fs::write(&input, &object).unwrap();
        let dest = dir.path().join("out");
        let out = strata_limited(
            dir.path(),
            &[
                "snapshot".as_ref(),
                "unpack".as_ref(),
                "--input".as_ref(),
                input.as_os_str(),
                "--dest".as_ref(),
                dest.as_os_str(),
            ],
            &[],
        );
        let stderr = assert_exit(&out, 1);
        assert!(
            stderr.contains("actions-v1/big: the archive ends inside the file"),
            "{claim} {compression}: {stderr}"
        );
        assert!(!dest.exists(), "a partial destination was left");
        assert_eq!(names(dir.path()), ["evil.tar"], "a staging directory or file was left");
    }
}

/// Restore: the sidecar's bound (up to 64 MiB for a tiny object) is no licence to reserve
/// what a header claims either. The snapshot is rejected (exit 0, fail-open) with the
/// truncation, the cache directory keeps its content, nothing is left beside it.
#[test]
fn r7_snapshot_restore_never_reserves_a_claimed_size() {
    let scratch = Scratch::new();
    let cache = scratch.path("work/cache");
    std::fs::create_dir_all(cache.join("actions-v1/keep")).unwrap();
    std::fs::write(cache.join("actions-v1/keep/f"), b"previous").unwrap();
    let key = crate::snapshot::key(&scratch, "sizes");
    let claim = 60 * MIB;
    let object =
        zstd::encode_all(truncated_tar("actions-v1/big", claim, b"x").as_slice(), 3).unwrap();
    // The sidecar declares exactly the claimed size: within the expansion allowance.
    let digest = format!("sha256:{}", "0".repeat(64));
    publish(&scratch.path("store"), &key, &object, &digest, 2, claim);
    let out = strata_limited(
        scratch.dir.path(),
        &[
            "snapshot".as_ref(),
            "restore".as_ref(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
            "--key".as_ref(),
            key.as_ref(),
        ],
        &[("STRATA_STORE", scratch.file_store())],
    );
    let stderr = assert_exit(&out, 0);
    assert!(stderr.contains("the archive ends inside the file"), "{stderr}");
    assert!(stderr.contains("is unchanged"), "{stderr}");
    assert_eq!(std::fs::read(cache.join("actions-v1/keep/f")).unwrap(), b"previous");
    assert_eq!(names(cache.parent().unwrap()), ["cache"], "left beside the cache");
}

/// L0 pull: an object whose manifest and header both claim a 64 MiB `bin/tool` but that
/// ends after a few bytes is rejected, nothing is published, no file grows past the limit.
#[test]
fn r7_l0_pull_never_reserves_a_claimed_size() {
    let consumer = Workspace::new();
    let remote = tempfile::tempdir().unwrap();
    let spec = spec(Stage::BinaryReady, REQUIRED);
    let claim = 64 * MIB;
    let record = |path: &str, size_bytes: u64| FileRecord {
        executable: false,
        path: RelPath::new(path).unwrap(),
        digest: strata::digest::ContentDigest::from(Sha256Digest::of_bytes(path.as_bytes())),
        size_bytes,
    };
    let payload = ManifestPayload::new(
        &key(),
        &spec,
        vec![record("bin/tool", claim), record("lib/libx.a", 4096), record("meta.json", 11)],
        vec![],
    );
    let (manifest, _) = payload.seal().unwrap();
    // The manifest entry, padded to a whole block, then the lying header.
    let mut stream = truncated_tar("artifact_manifest.json", manifest.len() as u64, &manifest);
    stream.resize(stream.len().next_multiple_of(512), 0);
    stream.extend(truncated_tar("bin/tool", claim, b"#!/bin/sh\n"));
    let object = remote.path().join(strata::artifact::l0::object_key(&key(), &spec).as_str());
    std::fs::create_dir_all(object.parent().unwrap()).unwrap();
    std::fs::write(&object, zstd::encode_all(stream.as_slice(), 3).unwrap()).unwrap();

    let url = format!("file://{}", remote.path().display());
    let mut args: Vec<String> =
        ["artifact", "pull", "--json", "--store", &url].into_iter().map(str::to_owned).collect();
    args.extend(id_flags(&consumer.root(), &hex('b'), "ready", REQUIRED));
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let out = strata_limited(consumer.path(), &args, &[]);
    // Exit 3: nothing usable was pulled (artifact-store.md "Exit codes").
    let stderr = assert_exit(&out, 3);
    assert!(stderr.contains("bin/tool"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["outcome"], "rejected", "{v}\n{stderr}");
    let lookup = consumer.store(strata::artifact::Mode::ReadOnly).lookup(&key(), &spec);
    assert_eq!(lookup.status(), strata::artifact::LookupStatus::Miss);
}

/// A stub S3 endpoint on 127.0.0.1 whose HEAD claims `claimed` bytes for every object and
/// whose GETs answer 200 with a 5-byte body (so every ranged GET is refused). Returns the
/// endpoint; the thread serves until the test process ends.
fn lying_endpoint(claimed: u64) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut content_length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; content_length];
            let _ = reader.read_exact(&mut body);
            let answer = if request_line.starts_with("HEAD") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {claimed}\r\netag: \"e\"\r\n\
                     last-modified: Wed, 01 Jan 2025 00:00:00 GMT\r\nconnection: close\r\n\r\n"
                )
            } else {
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello".to_owned()
            };
            let _ = stream.write_all(answer.as_bytes());
            let _ = stream.flush();
        }
    });
    endpoint
}

/// HTTP: a HEAD claiming 1 TiB never pre-sizes the download. The download fails (the
/// server ignores `Range` and its whole object, taken as such, ends after 5 bytes) and the
/// destination holds no more than what arrived.
#[test]
fn r7_s3_download_never_presizes_from_content_length() {
    let endpoint = lying_endpoint(TIB);
    let options = TransportOptions {
        request_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(50),
        ..TransportOptions::default()
    };
    let env = |name: &str| match name {
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("not-a-secret".to_owned()),
        _ => None,
    };
    let url = crate::transport::server::url_for(&endpoint, "p");
    let store = open_store_with_env(&url, &options, env).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("download");
    let object = strata::transport::ObjectKey::new("p/object").unwrap();
    let err = store.get_to_file(&object, &dest).unwrap_err();
    assert!(err.to_string().contains("body ended after 5 of 1099511627776 bytes"), "{err}");
    let len = std::fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
    assert!(len <= 5, "the destination was pre-sized to {len} bytes");
}

/// The same kind for memory: a GNU long-name header claiming 1 GiB (a few hundred KiB of
/// zstd) made `snapshot unpack` read the whole claimed name into memory before it saw the
/// entry (the `tar` crate does). It is rejected from the header alone now, and so is a pax
/// header (strata never writes one; it could change the next entry's size). Run under a
/// 512 MiB address-space limit, where reading the claim would fail for want of memory.
#[test]
fn r7_snapshot_unpack_long_name_claims_do_not_decide_memory() {
    let claim: u64 = 1 << 30;
    let mut bomb = zstd::Encoder::new(Vec::new(), 3).unwrap();
    bomb.write_all(&crate::artifact::extension_header(tar::EntryType::GNULongName, claim)).unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..(claim >> 20) {
        bomb.write_all(&chunk).unwrap();
    }
    bomb.write_all(&truncated_tar("actions-v1/f", 1, b"x")).unwrap();
    let bomb = bomb.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let record = b"12 comment=x\n";
    let mut pax = crate::artifact::extension_header(tar::EntryType::XHeader, record.len() as u64);
    pax.extend_from_slice(record);
    pax.resize(1024, 0);
    pax.extend_from_slice(&truncated_tar("actions-v1/f", 1, b"x"));
    let pax = zstd::encode_all(pax.as_slice(), 3).unwrap();
    for (object, expected) in [
        (bomb, "a GNU long-name entry of 1073741824 bytes (at most 65536)"),
        (pax, "a pax header (snapshots hold none)"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("evil.tar.zst");
        std::fs::write(&input, &object).unwrap();
        let dest = dir.path().join("out");
        let out = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 524288 && exec \"$0\" \"$@\"")
            .arg(crate::strata_exe())
            .args(["snapshot", "unpack", "--input"])
            .arg(&input)
            .arg("--dest")
            .arg(&dest)
            .output()
            .unwrap();
        let stderr = assert_exit(&out, 1);
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!dest.exists(), "a partial destination was left");
        assert_eq!(names(dir.path()), ["evil.tar.zst"], "a staging directory was left");
    }
}
