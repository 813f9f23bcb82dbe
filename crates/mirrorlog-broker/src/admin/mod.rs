//! The operator's surface: HTTP with JSON on the admin listener (`http.rs`: the server, its
//! bounded request reader and its routes), and who may use it (`access.rs`: the bearer token,
//! allowed hosts).

pub mod access;
pub mod http;
