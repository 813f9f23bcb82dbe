//! Shared by the broker tests: a `mirrorlog-broker` process on loopback (ports the kernel picks),
//! a raw Kafka-protocol connection to it (the `kafka-protocol` crate encodes and decodes), and
//! the runner of the Python scripts in `testdata/interop/broker/` (real clients, real processes).
#![allow(dead_code)]

pub mod certs;
pub mod clients;
pub mod members;
pub mod requests;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The repository root (where `Cargo.lock` is).
pub fn repo() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .unwrap_or(here)
        .to_path_buf()
}

/// Runs the broker binary with `args` (a command line's subcommands): its exit code, stdout
/// and stderr.
pub fn run_cli<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"))
        .args(args)
        .output()
        .expect("running mirrorlog-broker");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `mirrorlog` tool (the `mirrorlog-cli` crate's binary), beside this test's own binary in
/// the target directory: the workspace's test command builds it (`cargo test` builds every
/// member's binaries); `cargo build -p mirrorlog-cli` does for a run of these tests alone.
pub fn tool_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/mirrorlog
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("a target directory")
        .join("mirrorlog");
    assert!(
        bin.exists(),
        "{} missing: build it with `cargo build -p mirrorlog-cli` (the workspace's `cargo test` does)",
        bin.display()
    );
    bin
}

/// A broker process.
pub struct BrokerProc {
    pub child: Child,
    pub kafka: String,
    pub admin: String,
    pub data_dir: PathBuf,
    /// Every listener, `NAME://HOST:PORT,..`, from the ready line.
    pub listeners: String,
}

impl BrokerProc {
    /// Starts a broker on `data_dir` with `extra` flags; waits for its ready line.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Self {
        Self::start_on(data_dir, "127.0.0.1:0", "127.0.0.1:0", extra)
    }

    /// As `start`, on given listeners (a restart keeps its ports).
    pub fn start_on(data_dir: &Path, kafka: &str, admin: &str, extra: &[&str]) -> Self {
        Self::start_with_env(data_dir, kafka, admin, extra, &[])
    }

    /// As `start_on`, with environment variables for the broker process.
    pub fn start_with_env(
        data_dir: &Path,
        kafka: &str,
        admin: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        Self::spawn(data_dir, kafka, admin, extra, envs, Stdio::inherit())
    }

    /// As `start`, its log (stderr) written to the file `log`.
    pub fn start_logging_to(data_dir: &Path, extra: &[&str], log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("the log file");
        let listen = "127.0.0.1:0";
        Self::spawn(data_dir, listen, listen, extra, &[], Stdio::from(file))
    }

    fn spawn(
        data_dir: &Path,
        kafka: &str,
        admin: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
        stderr: Stdio,
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"));
        command
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen", kafka, "--admin-listen", admin])
            .args(extra)
            .envs(envs.iter().copied())
            .stderr(stderr);
        Self::run(command, data_dir)
    }

    /// Runs `command` (the broker binary with its arguments, its stderr set) and waits for
    /// its ready line; `data_dir` is the directory it was given.
    pub fn run(mut command: Command, data_dir: &Path) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning mirrorlog-broker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout piped"))
            .read_line(&mut line)
            .expect("reading the ready line");
        assert!(
            line.starts_with("mirrorlog-broker ready"),
            "unexpected first line {line:?}"
        );
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(k))
                .expect("ready line fields")
                .to_string()
        };
        BrokerProc {
            child,
            kafka: field("kafka="),
            admin: field("admin="),
            data_dir: data_dir.to_path_buf(),
            listeners: field("listeners="),
        }
    }

    /// SIGTERM and the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = i32::try_from(self.child.id()).expect("pid");
        let rc = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(rc.success());
        self.child.wait().expect("waiting for the broker")
    }

    /// SIGKILL.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("waiting for the broker");
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// The address of the listener named `name`.
    pub fn listener(&self, name: &str) -> String {
        self.listeners
            .split(',')
            .find_map(|l| l.strip_prefix(&format!("{name}://")))
            .unwrap_or_else(|| panic!("no listener {name} in {}", self.listeners))
            .to_string()
    }

    /// A new raw connection.
    pub fn connect(&self) -> Conn {
        Conn::new(&self.kafka)
    }
}

impl Drop for BrokerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw Kafka connection.
pub struct Conn {
    pub stream: TcpStream,
    correlation: i32,
}

impl Conn {
    pub fn new(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connecting to the broker");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Conn {
            stream,
            correlation: 0,
        }
    }

    /// Encodes a request frame (size prefix included).
    pub fn frame(&mut self, key: ApiKey, version: i16, body: &RequestKind) -> Vec<u8> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        let n = i32::try_from(buf.len() - 4).unwrap();
        buf[..4].copy_from_slice(&n.to_be_bytes());
        buf.to_vec()
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one response frame's bytes (after the size), or an error if the broker closed.
    pub fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let mut buf = vec![0u8; usize::try_from(i32::from_be_bytes(size)).unwrap()];
        self.stream.read_exact(&mut buf)?;
        Ok(Bytes::from(buf))
    }

    /// Sends a request and reads its response.
    pub fn call(&mut self, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
        let f = self.frame(key, version, &body);
        self.send_raw(&f).expect("sending");
        let mut frame = self.read_frame().expect("reading the response");
        let header =
            ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation);
        let r = ResponseKind::decode(key, &mut frame, version).expect("decoding the response");
        assert!(!frame.has_remaining(), "bytes after the response");
        r
    }

    /// Whether the broker closed this connection: EOF or a reset within the read timeout. A
    /// timeout (the broker neither answered nor closed) is not a close.
    pub fn closed(&mut self) -> bool {
        use std::io::ErrorKind;
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
            ),
        }
    }
}

/// Runs `testdata/interop/broker/SCRIPT` with the venv's Python, the binaries and a scratch
/// directory; panics with its output unless it exits 0. Returns its stdout.
pub fn run_script(script: &str, args: &[&str], envs: &[(&str, &str)]) -> String {
    let python = std::env::var_os("MIRRORLOG_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} missing: run scripts/test.sh, which creates the venv with the pinned clients",
        python.display()
    );
    let scratch = tempfile::tempdir().expect("scratch directory");
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .current_dir(repo().join("testdata/interop/broker"))
        .env(
            "MIRRORLOG_BROKER_BIN",
            env!("CARGO_BIN_EXE_mirrorlog-broker"),
        )
        .env("MIRRORLOG_TOOL_BIN", tool_bin())
        .env("MIRRORLOG_TEST_DIR", scratch.path())
        .envs(envs.iter().copied())
        .output()
        .expect("running python");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // librdkafka logs to stderr; keep the tail, where a Python traceback ends.
    let tail: String = stderr
        .lines()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{stdout}\n--- stderr (tail) ---\n{tail}",
        out.status
    );
    eprintln!("{stdout}");
    stdout
}
