use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Mutex;

use super::*;

/// A body of the given frames.
struct Frames(VecDeque<Bytes>);

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// What each counted answer said.
type Told = Arc<Mutex<Vec<Spent>>>;

fn counted(frames: &[&str], shape: Shape, added: Added) -> (Usage<Frames>, Told) {
    let told = Told::default();
    let sink = Arc::clone(&told);
    let counting = Counting {
        class: "cpu-1c-2g".into(),
        added,
        tally: None,
        on_spent: Some(Arc::new(move |spent| sink.lock().unwrap().push(spent))),
    };
    let frames = frames.iter().map(|f| Bytes::from(f.to_string())).collect();
    (Usage::new(Frames(frames), shape, counting), told)
}

/// Up to `frames` frames of the body (all, with `None`), as text.
async fn read(body: &mut Usage<Frames>, frames: Option<usize>) -> String {
    let mut text = Vec::new();
    let mut n = 0;
    while frames.is_none_or(|most| n < most) {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
        let Some(frame) = frame else { break };
        text.extend_from_slice(frame.unwrap().data_ref().unwrap());
        n += 1;
    }
    String::from_utf8(text).unwrap()
}

const BOTH: Added = Added {
    usage: true,
    timings: true,
};

/// llama.cpp's stream, as it answers with usage and per-token timings asked.
fn engine_stream() -> Vec<String> {
    let timings = |n: u32| {
        format!(r#""timings":{{"cache_n":38,"prompt_n":1,"prompt_ms":0.2,"predicted_n":{n}}}"#)
    };
    vec![
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"object\":\"chat.completion.chunk\"}\n\n".into(),
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"m\"}}}}],\"object\":\"chat.completion.chunk\",{}}}\n\n", timings(1)),
        // A frame may end anywhere: in the middle of a line, here.
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"e\"}}}}],{}}}\n\nda", timings(2)),
        format!("ta: {{\"choices\":[{{\"finish_reason\":\"length\",\"index\":0,\"delta\":{{}}}}],{}}}\n\n", timings(3)),
        format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":3,\"prompt_tokens\":39,\"total_tokens\":42}},{}}}\n\n", timings(3)),
        "data: [DONE]\n\n".into(),
    ]
}

fn frames(stream: &[String]) -> Vec<&str> {
    stream.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn what_the_proxy_asked_for_is_taken_out_and_the_engines_usage_counted() {
    let stream = engine_stream();
    let (mut body, told) = counted(&frames(&stream), Shape::Events, BOTH);
    let seen = read(&mut body, None).await;
    assert!(!seen.contains("timings"), "{seen}");
    assert!(!seen.contains("usage"), "{seen}");
    assert!(!seen.contains("\n\n\n"), "no empty event is left: {seen:?}");
    assert!(
        // The engine's own bytes, less what was taken out.
        seen.ends_with(
            "\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}]}\n\ndata: [DONE]\n\n"
        ),
        "{seen:?}"
    );
    let contents: Vec<_> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["choices"][0]["delta"].clone())
        .collect();
    assert_eq!(contents.len(), 4, "every chunk but the usage one: {seen}");
    assert_eq!(contents[2]["content"], "e");
    drop(body);
    let spent = Spent {
        prompt: 39,
        completion: 3,
    };
    assert_eq!(*told.lock().unwrap(), [spent], "counted once, at the end");
}

#[tokio::test]
async fn what_the_client_asked_for_passes_untouched() {
    let stream = engine_stream();
    let (mut body, told) = counted(&frames(&stream), Shape::Events, Added::default());
    assert_eq!(read(&mut body, None).await, stream.concat());
    assert_eq!(told.lock().unwrap()[0].prompt, 39);

    // Usage asked by the client, timings by the proxy: only the timings go.
    let timings = Added {
        usage: false,
        timings: true,
    };
    let (mut body, told) = counted(&frames(&stream), Shape::Events, timings);
    let seen = read(&mut body, None).await;
    assert!(!seen.contains("timings"), "{seen}");
    assert!(
        seen.contains("\"usage\":{\"completion_tokens\":3"),
        "{seen}"
    );
    assert_eq!(told.lock().unwrap()[0].completion, 3);
}

#[tokio::test]
async fn a_stream_left_early_counts_the_prompt_and_what_was_generated() {
    let stream = engine_stream();
    let (mut body, told) = counted(&frames(&stream), Shape::Events, BOTH);
    read(&mut body, Some(3)).await;
    assert!(told.lock().unwrap().is_empty(), "not counted until it ends");
    drop(body);
    // The third frame's line (predicted_n 2) is whole; the fourth's was not read.
    let spent = Spent {
        prompt: 39,
        completion: 2,
    };
    assert_eq!(*told.lock().unwrap(), [spent]);
}

#[tokio::test]
async fn json_answers_are_counted_whole_and_embeddings_without_completions() {
    let answer = r#"{"object":"chat.completion","usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}"#;
    let (half, rest) = answer.split_at(30);
    let (mut body, told) = counted(&[half, rest], Shape::Json, Added::default());
    assert_eq!(read(&mut body, None).await, answer);
    let spent = Spent {
        prompt: 12,
        completion: 8,
    };
    assert_eq!(*told.lock().unwrap(), [spent]);
    let embeddings = r#"{"object":"list","usage":{"prompt_tokens":5,"total_tokens":5}}"#;
    let (mut body, told) = counted(&[embeddings], Shape::Json, Added::default());
    read(&mut body, None).await;
    let prompt_only = Spent {
        prompt: 5,
        completion: 0,
    };
    assert_eq!(*told.lock().unwrap(), [prompt_only]);
}

/// Whatever the engine says, nothing panics, nothing unbelievable is counted, and what isn't
/// understood passes as it came.
#[tokio::test]
async fn hostile_numbers_and_lines_are_not_believed() {
    let absurd = MAX_TOKENS + 1;
    for usage in [
        r#"{"prompt_tokens":-1,"completion_tokens":1}"#.to_owned(),
        r#"{"prompt_tokens":1.5,"completion_tokens":1}"#.to_owned(),
        r#"{"prompt_tokens":"7","completion_tokens":1}"#.to_owned(),
        format!(r#"{{"prompt_tokens":1,"completion_tokens":{absurd}}}"#),
        r#"{"prompt_tokens":1,"completion_tokens":1e400}"#.to_owned(),
        r#"{"completion_tokens":1}"#.to_owned(),
        "[1,2]".to_owned(),
        "7".to_owned(),
    ] {
        let answer = format!(r#"{{"usage":{usage}}}"#);
        let (mut body, told) = counted(&[&answer], Shape::Json, Added::default());
        read(&mut body, None).await;
        assert!(told.lock().unwrap().is_empty(), "{usage}");
        let event = format!("data: {{\"choices\":[],\"usage\":{usage}}}\n\n");
        let (mut body, told) = counted(&[&event], Shape::Events, BOTH);
        read(&mut body, None).await;
        drop(body);
        assert!(told.lock().unwrap().is_empty(), "{usage}");
    }
    for timings in [
        format!(r#"{{"prompt_n":1,"predicted_n":{absurd}}}"#),
        r#"{"prompt_n":-1,"predicted_n":3}"#.to_owned(),
        r#"{"prompt_n":1,"cache_n":"x","predicted_n":3}"#.to_owned(),
        r#"{"prompt_n":1}"#.to_owned(),
        "null".to_owned(),
    ] {
        let event = format!("data: {{\"choices\":[{{}}],\"timings\":{timings}}}\n\n");
        let (mut body, told) = counted(&[&event], Shape::Events, BOTH);
        read(&mut body, None).await;
        drop(body);
        assert!(told.lock().unwrap().is_empty(), "{timings}");
    }
    // Both counts at the cap: the prompt's sum is held to it.
    let most = format!(
        "data: {{\"choices\":[{{}}],\"timings\":{{\"prompt_n\":{MAX_TOKENS},\"cache_n\":{MAX_TOKENS},\"predicted_n\":{MAX_TOKENS}}}}}\n\n"
    );
    let (mut body, told) = counted(&[&most], Shape::Events, BOTH);
    read(&mut body, None).await;
    drop(body);
    let capped = Spent {
        prompt: MAX_TOKENS,
        completion: MAX_TOKENS,
    };
    assert_eq!(*told.lock().unwrap(), [capped]);

    // Not JSON, a JSON that is no object, a line too long to look at: passed as they came.
    let long = format!(
        "data: {{\"timings\":{{\"prompt_n\":1,\"predicted_n\":1}},\"x\":\"{}\"}}\n\n",
        "y".repeat(MAX_EVENT)
    );
    let odd = [
        "data: {\"timings\": nope\n\n",
        "data: [\"timings\"]\n\n",
        "event: x\r\ndata: \"usage\"\r\n\r\n",
        &long[..100],
        &long[100..],
        "data: [DONE]",
    ];
    let (mut body, told) = counted(&odd, Shape::Events, BOTH);
    assert_eq!(read(&mut body, None).await, odd.concat());
    drop(body);
    assert!(told.lock().unwrap().is_empty());
}

#[test]
fn the_engine_is_asked_for_usage_only_where_a_stream_lacks_it() {
    let asked = |text: &str| {
        let mut request: Map<String, Value> = serde_json::from_str(text).unwrap();
        let added = ask_engine(&mut request);
        (Value::Object(request), added)
    };
    let (request, added) = asked(r#"{"stream":true,"stream_options":{"x":1}}"#);
    assert_eq!(added, BOTH);
    assert_eq!(
        request["stream_options"],
        serde_json::json!({"x": 1, "include_usage": true})
    );
    assert_eq!(request["timings_per_token"], true);
    let (request, added) = asked(r#"{"stream":true}"#);
    assert_eq!(
        (added, &request["stream_options"]["include_usage"]),
        (BOTH, &Value::Bool(true))
    );
    let (_, added) = asked(
        r#"{"stream":true,"stream_options":{"include_usage":true},"timings_per_token":true}"#,
    );
    assert_eq!(added, Added::default(), "the client asked for both");
    let (request, added) = asked(r#"{"stream":true,"stream_options":{"include_usage":false}}"#);
    assert!(added.usage);
    assert_eq!(request["stream_options"]["include_usage"], true);
    let (request, added) = asked(r#"{"stream":true,"stream_options":7}"#);
    assert!(!added.usage && added.timings);
    assert_eq!(
        request["stream_options"], 7,
        "left for the engine to refuse"
    );
    for whole in [r#"{}"#, r#"{"stream":false}"#, r#"{"stream":"true"}"#] {
        let (request, added) = asked(whole);
        assert_eq!(added, Added::default(), "{whole}");
        assert!(request.get("stream_options").is_none(), "{whole}");
    }
}

#[test]
fn usage_is_named_unless_null_and_shapes_come_from_the_content_type() {
    assert!(!names_usage(br#"{"choices":[],"usage": null}"#));
    assert!(names_usage(br#"{"usage" : {"prompt_tokens":1}}"#));
    assert_eq!(
        Shape::of(Some("text/event-stream; charset=utf-8")),
        Some(Shape::Events)
    );
    assert_eq!(Shape::of(Some("application/json")), Some(Shape::Json));
    assert_eq!(Shape::of(Some("text/html")), None);
    assert_eq!(Shape::of(None), None);
}
