//! The event stream's last message: a stream the server ends itself (`event: cut`) is a
//! temporary error carrying the server's reason, after the events before it were given;
//! messages of other types are skipped.

use lockgate_client::{Client, ClientError};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

/// Answers one request with `body` as a Server-Sent Events stream, then closes.
fn serve_once(body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let mut conn = conn;
        write!(
            conn,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        )
        .unwrap();
    });
    url
}

#[test]
fn a_stream_the_server_cut_gives_its_events_then_a_temporary_error_with_the_reason() {
    let url = serve_once(concat!(
        "id: 7\ndata: {\"seq\":7,\"at\":\"2026-03-27T22:17:41.5Z\",\"type\":\"node_lost\",\"node\":\"pve3\"}\n\n",
        // A message of a type this client does not know is skipped, not read as an event.
        "event: note\ndata: {\"not\":\"an event\"}\n\n",
        ": a comment\n\n",
        "event: cut\ndata: {\"reason\":\"write_stall\",\"message\":\"the server ended this stream after it could not be written for 60 s (the client stopped reading); resume with Last-Event-ID: 7\",\"resume_after\":7}\n\n",
    ));
    let client = Client::new(&url, None).unwrap();
    let mut seen = Vec::new();
    let err = client
        .follow_events(0, |ev| {
            seen.push(ev.seq);
            true
        })
        .unwrap_err();
    assert_eq!(seen, vec![7]);
    assert!(err.is_temporary(), "{err}");
    match err {
        ClientError::Unreachable { message, .. } => assert!(
            message.contains("could not be written for 60 s")
                && message.contains("Last-Event-ID: 7"),
            "{message}"
        ),
        other => panic!("{other}"),
    }
}
