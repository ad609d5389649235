//! Starts a throwaway nginx with its WebDAV module (Debian's `nginx-light`) on 127.0.0.1
//! for one test, with a configuration in a temp directory, and stops it on drop.
//!
//! Locations (each an HTTP cache store URL `<endpoint>/<location>`):
//! * `store/`: WebDAV as ccache's wiki sets it up (`dav_methods PUT DELETE MKCOL`,
//!   `create_full_put_path on`, no body limit);
//! * `norange/`: the same files, served by a server that ignores `Range` (`max_ranges 0`:
//!   every GET is answered `200` with the whole object);
//! * `nodirs/`: PUT and MKCOL but no `create_full_put_path`: a PUT below a missing
//!   collection is answered `409 Conflict`;
//! * `small/`: bodies above 1 KiB are answered `413`;
//! * `broken/`: every request is answered `500`;
//! * `readonly/`: GET and HEAD only (a PUT is `405`);
//! * `basic/`: reads open, writes need basic authentication (`strata` / [`PASSWORD`]);
//! * `bearer/`: every request needs `Authorization: Bearer` [`TOKEN`].
//!
//! If nginx is missing the test fails and says how to install it; it never skips.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata::transport::{ObjectStore, TransportOptions, open_store_with_env};

/// The basic-authentication password of `basic/` (a throwaway for a loopback server).
pub const PASSWORD: &str = "loopback-only-password";
/// The bearer token of `bearer/`.
pub const TOKEN: &str = "loopback-only-token";

pub struct Nginx {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    dir: tempfile::TempDir,
}

fn find_binary() -> PathBuf {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from));
    dirs.into_iter().map(|d| d.join("nginx")).find(|c| c.is_file()).unwrap_or_else(|| {
        panic!(
            "the HTTP store tests need nginx with its WebDAV module, which is not on PATH or in \
             /usr/sbin; install it with: apt-get install nginx-light"
        )
    })
}

fn config(dir: &Path, port: u16) -> String {
    let data = dir.join("data");
    let d = data.display();
    let root = dir.display();
    format!(
        r#"user root root;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/tmp; fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp; scgi_temp_path {root}/tmp;
  server {{
    listen 127.0.0.1:{port};
    log_not_found off;
    location /store/ {{
      alias {d}/store/;
      dav_methods PUT DELETE MKCOL;
      create_full_put_path on;
      client_max_body_size 0;
    }}
    location /norange/ {{
      alias {d}/store/;
      max_ranges 0;
      dav_methods PUT MKCOL;
      create_full_put_path on;
      client_max_body_size 0;
    }}
    location /nodirs/ {{
      alias {d}/nodirs/;
      dav_methods PUT MKCOL;
      client_max_body_size 0;
    }}
    location /small/ {{
      alias {d}/small/;
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 1k;
    }}
    location /broken/ {{ return 500; }}
    location /readonly/ {{ alias {d}/store/; }}
    location /basic/ {{
      alias {d}/basic/;
      dav_methods PUT MKCOL;
      create_full_put_path on;
      client_max_body_size 0;
      limit_except GET HEAD {{
        auth_basic "strata test";
        auth_basic_user_file {root}/htpasswd;
      }}
    }}
    location /bearer/ {{
      if ($http_authorization != "Bearer {TOKEN}") {{ return 401; }}
      alias {d}/bearer/;
      dav_methods PUT MKCOL;
      create_full_put_path on;
      client_max_body_size 0;
    }}
  }}
}}
"#
    )
}

/// An htpasswd line for user `strata` and [`PASSWORD`] (the apr1 scheme, which nginx reads).
fn htpasswd() -> String {
    let output = Command::new("openssl")
        .args(["passwd", "-apr1", PASSWORD])
        .output()
        .expect("openssl passwd (for the test's htpasswd)");
    assert!(output.status.success(), "openssl passwd failed");
    format!("strata:{}\n", String::from_utf8_lossy(&output.stdout).trim())
}

impl Nginx {
    pub fn start() -> Self {
        let binary = find_binary();
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in
            ["data/store", "data/nodirs", "data/small", "data/basic", "data/bearer", "body", "tmp"]
        {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("htpasswd"), htpasswd()).unwrap();
        for _ in 0..5 {
            let port = super::server::free_port();
            let conf = dir.path().join("nginx.conf");
            std::fs::write(&conf, config(dir.path(), port)).unwrap();
            let mut child = Command::new(&binary)
                .arg("-c")
                .arg(&conf)
                .arg("-p")
                .arg(dir.path())
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self { child, endpoint: format!("http://127.0.0.1:{port}"), dir };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // port taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
        panic!("nginx did not start listening on 127.0.0.1 within 10 s (5 attempts): {log}");
    }

    /// The store URL of `location` (one of the module docs' list, without slashes).
    pub fn url(&self, location: &str) -> String {
        format!("{}/{location}", self.endpoint)
    }

    /// Where the server keeps the files of `location` (`store` and `norange` share one
    /// directory; `readonly` serves it too).
    pub fn data_dir(&self, location: &str) -> PathBuf {
        let shared = matches!(location, "norange" | "readonly");
        self.dir.path().join("data").join(if shared { "store" } else { location })
    }

    /// A store on `location`, with the variables `env` returns.
    pub fn store_with(
        &self,
        location: &str,
        options: &TransportOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Box<dyn ObjectStore> {
        open_store_with_env(&self.url(location), options, env).expect("open store")
    }

    /// An anonymous store on `location`.
    pub fn store(&self, location: &str, options: &TransportOptions) -> Box<dyn ObjectStore> {
        self.store_with(location, options, |_| None)
    }
}

impl Drop for Nginx {
    /// Stops the master with SIGTERM (it stops its worker too), SIGKILL after 5 s.
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
