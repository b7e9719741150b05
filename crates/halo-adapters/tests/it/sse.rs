//! The shared SSE layer (`halo_adapters::sse`) on byte-chunk cases: each case is a list of
//! network reads fed through a stream, and the exact events and ending it must give
//! (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>,
//! <https://github.com/openai/openai-python/blob/main/src/openai/_streaming.py>). Bodies without a fixed split are also fed at every
//! split point and one byte at a time, and must give the same result.

use futures::StreamExt as _;
use halo_adapters::sse::{self, SseDecoder, SseEvent};
use halo_core::ModelError;

/// How a case ends.
#[derive(Debug, PartialEq)]
enum End {
    /// The input ended cleanly.
    Clean,
    /// The stream failed with an error of this variant (`Truncated`, `InvalidResponse`, ..).
    Failed(&'static str),
}

struct Case {
    name: &'static str,
    reads: &'static [&'static [u8]],
    events: &'static [(&'static str, &'static str)],
    end: End,
}

fn variant(e: &ModelError) -> &'static str {
    match e {
        ModelError::Truncated(_) => "Truncated",
        ModelError::InvalidResponse(_) => "InvalidResponse",
        ModelError::Transport(_) => "Transport",
        _ => "other",
    }
}

/// Feeds `reads` through [`sse::decode`]: the events, and how the stream ended.
fn run(reads: Vec<Vec<u8>>) -> (Vec<SseEvent>, End, Option<ModelError>) {
    let body = futures::stream::iter(reads.into_iter().map(Ok::<_, ModelError>));
    let items: Vec<_> = futures::executor::block_on(sse::decode(body).collect());
    let mut events = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(e) => events.push(e.clone()),
            Err(e) => {
                assert_eq!(i, items.len() - 1, "an error ends the stream");
                return (events, End::Failed(variant(e)), Some(e.clone()));
            }
        }
    }
    (events, End::Clean, None)
}

fn pairs(events: &[SseEvent]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|e| (e.event.as_str(), e.data.as_str()))
        .collect()
}

const CASES: &[Case] = &[
    Case {
        name: "lf endings",
        reads: &[b"data: a\n\ndata: b\n\n"],
        events: &[("message", "a"), ("message", "b")],
        end: End::Clean,
    },
    Case {
        name: "crlf endings (Gemini alt=sse)",
        reads: &[b"data: a\r\n\r\ndata: b\r\n\r\n"],
        events: &[("message", "a"), ("message", "b")],
        end: End::Clean,
    },
    Case {
        name: "cr endings, the last event completed by the end of input",
        reads: &[b"data: a\r\rdata: b\r\r"],
        events: &[("message", "a"), ("message", "b")],
        end: End::Clean,
    },
    Case {
        name: "a cr and lf split across reads are one terminator",
        // Two terminators would end the event after `a` and give `a` and `b` apart.
        reads: &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"],
        events: &[("message", "a\nb")],
        end: End::Clean,
    },
    Case {
        name: "a cr at the end of a read then a new line is a cr terminator",
        reads: &[b"data: a\r", b"data: b\r", b"\r"],
        events: &[("message", "a\nb")],
        end: End::Clean,
    },
    Case {
        name: "mixed endings in one stream",
        reads: &[b"data: a\n\r\ndata: b\r\rdata: c\r\n\n"],
        events: &[("message", "a"), ("message", "b"), ("message", "c")],
        end: End::Clean,
    },
    Case {
        name: "comment lines are skipped, also inside an event",
        reads: &[b": keep-alive\n\n: OPENROUTER PROCESSING\n\ndata: a\n: mid\ndata: b\n\n:\n\n"],
        events: &[("message", "a\nb")],
        end: End::Clean,
    },
    Case {
        name: "data with and without a space; only one space is dropped",
        reads: &[b"data:a\n\ndata: b\n\ndata:  c\n\n"],
        events: &[("message", "a"), ("message", "b"), ("message", " c")],
        end: End::Clean,
    },
    Case {
        name: "multi-line data is joined with newlines",
        reads: &[b"data: {\"a\":\ndata: 1,\ndata:\ndata: \"b\":2}\n\n"],
        events: &[("message", "{\"a\":\n1,\n\n\"b\":2}")],
        end: End::Clean,
    },
    Case {
        name: "event names; an event without data is not dispatched",
        reads: &[b"event: ping\n\nevent: message_start\ndata: {}\n\nevent:\ndata: x\n\ndata: y\n\n"],
        events: &[("message_start", "{}"), ("message", "x"), ("message", "y")],
        end: End::Clean,
    },
    Case {
        name: "a data field without a colon is an empty data line",
        reads: &[b"data\n\ndata\ndata\n\n"],
        events: &[("message", ""), ("message", "\n")],
        end: End::Clean,
    },
    Case {
        name: "id, retry and unknown fields are ignored",
        reads: &[b"id: 7\nretry: 100\nfoo: bar\ndata: a\n\n"],
        events: &[("message", "a")],
        end: End::Clean,
    },
    Case {
        name: "a utf-8 character split across reads",
        // `℃` is E2 84 83; `温` is E6 B8 A9.
        reads: &[b"data: \xe6\xb8", b"\xa9\xe5\xba\xa6 2", b"5\xe2", b"\x84", b"\x83\n\n"],
        events: &[("message", "温度 25℃")],
        end: End::Clean,
    },
    Case {
        name: "[DONE] is an ordinary event here",
        reads: &[b"data: {}\n\ndata: [DONE]\n\n"],
        events: &[("message", "{}"), ("message", "[DONE]")],
        end: End::Clean,
    },
    Case {
        name: "no [DONE]: the stream simply ends",
        reads: &[b"data: {}\r\n\r\n"],
        events: &[("message", "{}")],
        end: End::Clean,
    },
    Case {
        name: "an error payload mid-stream is passed on as data",
        reads: &[b"data: {\"x\":1}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"],
        events: &[("message", "{\"x\":1}"), ("message", "{\"error\":{\"message\":\"boom\"}}")],
        end: End::Clean,
    },
    Case {
        name: "old llama.cpp error field line becomes an error event",
        reads: &[b"data: {\"x\":1}\n\nerror: {\"code\":500,\"message\":\"kv cache full\"}\n\ndata: [DONE]\n\n"],
        events: &[
            ("message", "{\"x\":1}"),
            ("error", "{\"code\":500,\"message\":\"kv cache full\"}"),
            ("message", "[DONE]"),
        ],
        end: End::Clean,
    },
    Case {
        name: "a stream cut in the middle of a line is truncated",
        reads: &[b"data: {\"a\":1}\n\ndata: {\"par"],
        events: &[("message", "{\"a\":1}")],
        end: End::Failed("Truncated"),
    },
    Case {
        name: "a stream cut after a field line, before its blank line, is truncated",
        reads: &[b"data: {\"a\":1}\n\ndata: {\"b\":2}\n"],
        events: &[("message", "{\"a\":1}")],
        end: End::Failed("Truncated"),
    },
    Case {
        name: "a stream cut after an event name is truncated",
        reads: &[b"data: a\n\nevent: error\r\n"],
        events: &[("message", "a")],
        end: End::Failed("Truncated"),
    },
    Case {
        name: "a trailing comment without a newline is not an event",
        reads: &[b"data: a\n\n: keep-al"],
        events: &[("message", "a")],
        end: End::Clean,
    },
    Case {
        name: "a byte-order mark at the start, split across reads, is skipped",
        reads: &[b"\xef", b"\xbb", b"\xbfdata: a\n\n"],
        events: &[("message", "a")],
        end: End::Clean,
    },
    Case {
        name: "invalid utf-8 is an invalid response, not a hang",
        reads: &[b"data: ok\n\ndata: \xff\xfe\n\ndata: never\n\n"],
        events: &[("message", "ok")],
        end: End::Failed("InvalidResponse"),
    },
    Case {
        name: "empty input and empty reads",
        reads: &[b"", b"", b""],
        events: &[],
        end: End::Clean,
    },
];

#[test]
fn byte_chunk_cases() {
    for case in CASES {
        let reads = case.reads.iter().map(|r| r.to_vec()).collect();
        let (events, end, _) = run(reads);
        assert_eq!(pairs(&events), case.events, "events of `{}`", case.name);
        assert_eq!(end, case.end, "end of `{}`", case.name);
    }
}

/// Every case again, as one body split at every byte position and as one-byte reads: the
/// split must never change the result.
#[test]
fn every_split_of_every_case_gives_the_same_result() {
    for case in CASES {
        let body: Vec<u8> = case.reads.concat();
        let mut splits: Vec<Vec<Vec<u8>>> = (0..=body.len())
            .map(|at| vec![body[..at].to_vec(), body[at..].to_vec()])
            .collect();
        splits.push(body.iter().map(|b| vec![*b]).collect());
        for reads in splits {
            let shown: Vec<String> = reads
                .iter()
                .map(|r| String::from_utf8_lossy(r).into_owned())
                .collect();
            let (events, end, _) = run(reads);
            assert_eq!(
                pairs(&events),
                case.events,
                "events of `{}` read as {shown:?}",
                case.name
            );
            assert_eq!(end, case.end, "end of `{}` read as {shown:?}", case.name);
        }
    }
}

#[test]
fn errors_name_the_problem() {
    let (_, _, e) = run(vec![b"data: {\"par".to_vec()]);
    let e = e.unwrap();
    assert!(e.is_retryable(), "a cut stream is retryable");
    assert_eq!(
        e.to_string(),
        "the response stream was cut off: the event stream ended in the middle of an event (11 bytes unterminated); try again"
    );
    let (_, _, e) = run(vec![b"data: \xff\n\n".to_vec()]);
    assert!(
        e.unwrap()
            .to_string()
            .contains("the event stream is not UTF-8"),
        "utf-8 error message"
    );
}

#[test]
fn a_transport_error_mid_body_passes_through_and_ends_the_stream() {
    let reads = vec![
        Ok(b"data: a\n\ndata: b".to_vec()),
        Err(ModelError::Truncated("connection reset".into())),
        Ok(b"\n\n".to_vec()),
    ];
    let items: Vec<_> =
        futures::executor::block_on(sse::decode(futures::stream::iter(reads)).collect());
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].as_ref().unwrap().data, "a");
    assert_eq!(
        items[1],
        Err(ModelError::Truncated("connection reset".into()))
    );
}

#[test]
fn the_sans_io_decoder_holds_a_trailing_cr_until_it_knows() {
    let mut d = SseDecoder::new();
    d.feed(b"data: a\r");
    assert_eq!(d.next_event().unwrap(), None);
    assert!(!d.is_idle());
    d.feed(b"\n");
    assert_eq!(d.next_event().unwrap(), None, "no blank line yet");
    d.feed(b"\r");
    assert_eq!(
        d.next_event().unwrap(),
        None,
        "a CR alone may still be a CRLF"
    );
    // The end of input completes the CR: it was the blank line.
    let event = d.finish().unwrap().unwrap();
    assert_eq!(event.data, "a");
    assert_eq!(d.finish().unwrap(), None);
    assert!(d.is_idle());
}

#[test]
fn after_an_error_the_decoder_yields_nothing_more() {
    let mut d = SseDecoder::new();
    d.feed(b"data: \xff\n\ndata: b\n\n");
    assert!(d.next_event().is_err());
    assert_eq!(d.next_event().unwrap(), None);
    assert_eq!(d.finish().unwrap(), None);
}
