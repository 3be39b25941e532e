//! Stopping: EOS ids, stop strings inside one token's text and split across tokens (held back
//! until decided, cut from the output), and the same through the real tokenizer's streaming
//! decode.

use baro_engine::sampling::{Step, StopChecker, StopReason};
use baro_engine::tokenizer::{Specials, Tokenizer};

fn stops(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// Feeds `pieces` as tokens 1, 2, …; returns everything shown and why it stopped.
fn feed(checker: &mut StopChecker, pieces: &[&str]) -> (Vec<String>, Option<StopReason>) {
    let mut shown = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        match checker.push(i as u32 + 1, piece) {
            Step::Text(t) => shown.push(t),
            Step::Stop { text, reason } => {
                shown.push(text);
                return (shown, Some(reason));
            }
        }
    }
    shown.push(checker.finish());
    (shown, None)
}

#[test]
fn eos_stops_and_flushes_held_text() {
    let mut c = StopChecker::new(&[0, 99], &stops(&["<|stop|>"]));
    assert!(c.is_eos(99) && !c.is_eos(1));
    assert_eq!(c.push(1, "Hi <|"), Step::Text("Hi ".into()));
    assert_eq!(c.push(99, "<|im_end|>"), Step::Stop { text: "<|".into(), reason: StopReason::Eos(99) });
}

#[test]
fn stop_string_inside_one_token() {
    let mut c = StopChecker::new(&[], &stops(&["STOP"]));
    let (shown, reason) = feed(&mut c, &["one ", "two STOP three", "four"]);
    assert_eq!(shown, ["one ", "two "]);
    assert_eq!(reason, Some(StopReason::StopString("STOP".into())));
}

#[test]
fn stop_string_across_token_boundaries() {
    let mut c = StopChecker::new(&[], &stops(&["<|stop|>"]));
    let (shown, reason) = feed(&mut c, &["Hello <", "|st", "op|> more"]);
    assert_eq!(shown, ["Hello ", "", ""]);
    assert_eq!(reason, Some(StopReason::StopString("<|stop|>".into())));
    // A false start is released once it cannot be a stop string any more.
    let mut c = StopChecker::new(&[], &stops(&["<|stop|>"]));
    let (shown, reason) = feed(&mut c, &["a <", "|s", "x", " b"]);
    assert_eq!(shown, ["a ", "", "<|sx", " b", ""]);
    assert_eq!(reason, None);
    // Held text comes out at the end when no stop string completes.
    let mut c = StopChecker::new(&[], &stops(&["\n\nUser:"]));
    let (shown, _) = feed(&mut c, &["done.", "\n", "\nUs"]);
    assert_eq!(shown.concat(), "done.\n\nUs");
    assert_eq!(shown.last().map(String::as_str), Some("\n\nUs"));
}

#[test]
fn earliest_stop_wins_and_multibyte_text_is_safe() {
    let mut c = StopChecker::new(&[], &stops(&["bb", "ab"]));
    let (shown, reason) = feed(&mut c, &["xa", "bb"]);
    assert_eq!(shown.concat(), "x");
    assert_eq!(reason, Some(StopReason::StopString("ab".into())));
    // A stop string starting with a multi-byte character, split by characters not bytes.
    let mut c = StopChecker::new(&[], &stops(&["。\n", "🦀🦀"]));
    let (shown, reason) = feed(&mut c, &["你好", "世界。", "\n再见"]);
    assert_eq!(shown, ["你好", "世界", ""]);
    assert_eq!(reason, Some(StopReason::StopString("。\n".into())));
    let mut c = StopChecker::new(&[], &stops(&["🦀🦀"]));
    let (shown, reason) = feed(&mut c, &["ok🦀", "!🦀", "🦀"]);
    assert_eq!(shown, ["ok", "🦀!", ""]);
    assert_eq!(reason, Some(StopReason::StopString("🦀🦀".into())));
    // Empty stop strings are ignored.
    let mut c = StopChecker::new(&[], &stops(&[""]));
    assert_eq!(c.push(1, "abc"), Step::Text("abc".into()));
}

#[test]
fn stop_string_through_the_streaming_decoder() {
    let tok = Tokenizer::qwen35().unwrap();
    let generated = "The answer is 4.\nUser: and 3+3?";
    let ids = tok.encode(generated, Specials::With).unwrap();
    let mut stream = tok.stream(Specials::Without);
    let mut checker = StopChecker::new(&tok.special_ids().eos, &stops(&["\nUser:"]));
    let mut shown = String::new();
    let mut pushes = 0;
    let mut reason = None;
    for &id in &ids {
        pushes += 1;
        match checker.push(id, &stream.push(id).unwrap()) {
            Step::Text(t) => shown.push_str(&t),
            Step::Stop { text, reason: r } => {
                shown.push_str(&text);
                reason = Some(r);
                break;
            }
        }
    }
    assert_eq!(shown, "The answer is 4.");
    assert_eq!(reason, Some(StopReason::StopString("\nUser:".into())));
    // The stop string spans several tokens, and generation stopped on the last of them.
    let prefix = tok.encode("The answer is 4.", Specials::With).unwrap();
    assert!(pushes >= prefix.len() + 2, "{ids:?}");
    assert!(pushes < ids.len());

    // EOS through the same path.
    let mut stream = tok.stream(Specials::Without);
    let mut checker = StopChecker::new(&tok.special_ids().eos, &[]);
    let hi = tok.encode("Hi", Specials::With).unwrap();
    assert_eq!(checker.push(hi[0], &stream.push(hi[0]).unwrap()), Step::Text("Hi".into()));
    let end = 248046;
    assert_eq!(
        checker.push(end, &stream.push(end).unwrap()),
        Step::Stop { text: String::new(), reason: StopReason::Eos(end) }
    );
}
