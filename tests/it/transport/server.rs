//! Starts a throwaway s3s-fs server on 127.0.0.1 for one test and kills it on drop.
//!
//! The access key and secret are random hex generated per server: fake values for a
//! loopback-only server. If the `s3s-fs` binary is missing the test fails and says how to
//! install it; it never skips silently.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata::transport::{ObjectStore, TransportOptions, open_store_with_env};

/// The bucket every server starts with.
pub const BUCKET: &str = "strata-test";

pub struct S3sServer {
    child: Child,
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    data: tempfile::TempDir,
}

fn find_binary() -> PathBuf {
    let name = "s3s-fs";
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(candidate) = cargo_home.map(|c| c.join("bin").join(name))
        && candidate.is_file()
    {
        return candidate;
    }
    panic!(
        "the S3 integration tests need the s3s-fs server, which is not on PATH or in ~/.cargo/bin; \
         install it with: cargo install s3s-fs --version 0.14.1 --features binary --locked"
    );
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn random_hex(bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", fastrand::u8(..))).collect()
}

impl S3sServer {
    pub fn start() -> Self {
        let binary = find_binary();
        let data = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(data.path().join(BUCKET)).expect("bucket dir");
        let access_key = format!("test-{}", random_hex(8));
        let secret_key = random_hex(20);
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(&binary)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", &access_key, "--secret-key", &secret_key])
                .arg(data.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self {
                        child,
                        endpoint: format!("http://127.0.0.1:{port}"),
                        access_key,
                        secret_key,
                        data,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("s3s-fs did not start listening on 127.0.0.1 within 10 s (5 attempts)");
    }

    /// The server's data directory (buckets are directories in it).
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// An environment lookup holding this server's credentials.
    pub fn env(&self) -> impl Fn(&str) -> Option<String> + use<> {
        let (access, secret) = (self.access_key.clone(), self.secret_key.clone());
        move |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some(access.clone()),
            "AWS_SECRET_ACCESS_KEY" => Some(secret.clone()),
            _ => None,
        }
    }

    /// `s3://strata-test/<prefix>?endpoint=<endpoint>&region=us-east-1`.
    pub fn url(&self, prefix: &str) -> String {
        url_for(&self.endpoint, prefix)
    }

    /// A store on this server with its credentials.
    pub fn store(&self, prefix: &str, options: &TransportOptions) -> Box<dyn ObjectStore> {
        open_store_with_env(&self.url(prefix), options, self.env()).expect("open store")
    }
}

/// The store URL for `endpoint` and `prefix` in [`BUCKET`].
pub fn url_for(endpoint: &str, prefix: &str) -> String {
    format!("s3://{BUCKET}/{prefix}?endpoint={endpoint}&region=us-east-1")
}

/// Options with short backoffs so retry tests stay fast.
pub fn fast_options() -> TransportOptions {
    TransportOptions {
        request_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(50),
        ..TransportOptions::default()
    }
}

impl Drop for S3sServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
