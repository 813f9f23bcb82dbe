//! The admin surface is not open to whoever reaches it: every change needs the
//! bearer token (made in the data directory at first start, or read from `admin.token.file`),
//! and a request naming a host that is not an address, `localhost` or allowed by name, or
//! coming from a foreign web origin, is refused before anything runs.

mod broker_support;

use broker_support::requests::admin_token;
use broker_support::BrokerProc;
use std::io::{Read, Write};

/// The status of one request with exactly these headers.
fn status(admin: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\ncontent-length: 0\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split(' ').nth(1).unwrap().parse().unwrap()
}

const CHANGES: [(&str, &str); 5] = [
    ("POST", "/mirrors"),
    ("POST", "/mirrors/east/stop"),
    ("POST", "/mirrors/east/pause"),
    ("POST", "/mirrors/east/resume"),
    ("DELETE", "/mirrors/east"),
];

#[test]
fn every_change_needs_the_token_and_foreign_hosts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(
        dir.path(),
        &["--set", "admin.allowed.hosts=broker.internal"],
    );
    let token = admin_token(&b);
    let bearer = format!("Bearer {token}");
    let host = b.admin.clone();
    for (method, path) in CHANGES {
        assert_eq!(
            status(&b.admin, method, path, &[("host", &host)]),
            401,
            "{method} {path}"
        );
        assert_eq!(
            status(
                &b.admin,
                method,
                path,
                &[("host", &host), ("authorization", "Bearer guess")]
            ),
            401,
            "{method} {path}"
        );
        // With the token the call runs (and fails for its own reasons: no body, no mirror).
        let with = status(
            &b.admin,
            method,
            path,
            &[("host", &host), ("authorization", &bearer)],
        );
        assert!(matches!(with, 400 | 404 | 405), "{method} {path}: {with}");
    }
    // Reading needs no token.
    assert_eq!(status(&b.admin, "GET", "/topics", &[("host", &host)]), 200);
    assert_eq!(
        status(&b.admin, "GET", "/health", &[("host", "localhost:1")]),
        200
    );
    assert_eq!(
        status(
            &b.admin,
            "GET",
            "/health",
            &[("host", "broker.internal:9644")]
        ),
        200
    );
    // A page's own name resolving to loopback (DNS rebinding), a foreign origin, no Host.
    for headers in [
        vec![("host", "attacker.example:9644")],
        vec![
            ("host", host.as_str()),
            ("origin", "https://attacker.example"),
        ],
    ] {
        assert_eq!(
            status(&b.admin, "GET", "/topics", &headers),
            403,
            "{headers:?}"
        );
        let mut with_token = headers.clone();
        with_token.push(("authorization", &bearer));
        assert_eq!(
            status(&b.admin, "POST", "/mirrors/east/stop", &with_token),
            403
        );
    }
    assert_eq!(status(&b.admin, "GET", "/topics", &[]), 400);
    // The token is kept across restarts, readable by its owner alone.
    use std::os::unix::fs::PermissionsExt;
    let file = dir.path().join("broker/admin.token");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let admin = b.admin.clone();
    drop(b);
    let b = BrokerProc::start_on(dir.path(), "127.0.0.1:0", &admin, &[]);
    assert_eq!(admin_token(&b), token);
}

#[test]
fn a_token_file_given_is_the_one_used_and_a_missing_one_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-admin-token\n").unwrap();
    let set = format!("admin.token.file={}", file.display());
    let b = BrokerProc::start(&dir.path().join("data"), &["--set", &set]);
    let host = b.admin.clone();
    let with = |t: &str| {
        status(
            &b.admin,
            "POST",
            "/mirrors/east/stop",
            &[("host", &host), ("authorization", t)],
        )
    };
    assert_eq!(with("Bearer s3cret-admin-token"), 404);
    assert_eq!(with("Bearer something-else"), 401);
    assert!(!dir.path().join("data/broker/admin.token").exists());
    drop(b);

    let missing = format!("admin.token.file={}", dir.path().join("none").display());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"))
        .args(["--data-dir", dir.path().join("data2").to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--set", &missing])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("admin token"),
        "{err}"
    );
}
