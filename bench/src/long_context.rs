//! The long-context check (`long_context`): a prompt of L tokens through batched prefill,
//! compared with replay (the decode step per token) over its last chunk boundaries, byte for
//! byte, and a few greedy tokens after it (the needle's answer, when the prompt holds one).
//!
//! Replaying all of a 100k-token prompt would take L decode steps (at 100k context, a few
//! hundred ms each), so only the tail is replayed. The compared window [s, L) starts at
//! `s = replay_start(L, chunk, boundaries, margin)`: `margin` positions before the
//! `boundaries`-th chunk boundary from the end, so it holds that many boundaries with
//! positions on both sides of each. The prefix [0, a), a = s rounded down to a multiple of the
//! chunk, is prefilled once in chunks and copied (`Engine::snapshot`). From there the batched
//! arm feeds [a, L) in chunks (the chunks a single prefill of the whole prompt runs, since a
//! is a multiple of the chunk) and keeps the logits of every position; the replay arm feeds
//! [a, s) as one batched chunk of its own (so its state at s comes from another chunking)
//! and [s, L) one decode step at a time. Computing [0, a) twice would run the same launches
//! on the same bytes, so it would test only that the device repeats itself; `fresh` does it
//! anyway (the replay arm prefills [0, s) on the reset state, no copy: one sequence state on
//! the device instead of two).
//!
//! Compared: the SHA-256 of every position's logits in [s, L), the state after L (each
//! attention layer's KV rows 0..L, each GDN layer's conv ring and delta-rule state, by
//! `Model::read_state`), then `greedy` tokens decoded in each arm and their logits. Never
//! compares with a tolerance.

use std::time::Instant;

use baro_dsl::runtime::MemoryInfo;
use baro_engine::engine::{Engine, EngineError, Logits, PrefillMode, StatePart};
use baro_engine::tokenizer::{Specials, TokenId, Tokenizer};
use sha2::{Digest, Sha256};

use crate::identity::{digest, greedy};

/// How the check runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// Batched prefill's chunk (`PrefillMode::Batched { chunk }`).
    pub chunk: usize,
    /// Chunk boundaries inside the replayed window; 0 skips the replay arm (the batched
    /// prefill and the greedy tokens only).
    pub boundaries: usize,
    /// Positions replayed before the first of those boundaries.
    pub margin: usize,
    /// Greedy tokens decoded after the prompt in each arm.
    pub greedy: usize,
    /// Prefill the replay arm's prefix again on the reset state instead of copying it.
    pub fresh: bool,
}

/// Where the replayed window of an `len`-token prompt starts: `margin` positions before the
/// `boundaries`-th chunk boundary counted back from the start of the last chunk (0 when the
/// prompt is shorter), so the window [start, len) crosses `boundaries` boundaries with
/// positions on both sides of each (at least `margin` before the first).
pub fn replay_start(len: usize, chunk: usize, boundaries: usize, margin: usize) -> usize {
    let chunk = chunk.max(1);
    let last_chunk = len.saturating_sub(1) / chunk * chunk;
    (last_chunk + chunk).saturating_sub(boundaries.max(1) * chunk + margin)
}

/// One arm's results after the prompt.
#[derive(Clone, Debug, Default)]
pub struct Arm {
    /// SHA-256 of the logits after each position in [start, len).
    pub digests: Vec<[u8; 32]>,
    /// SHA-256 of each state buffer after the prompt.
    pub state: Vec<(StatePart, [u8; 32])>,
    pub greedy: Vec<TokenId>,
    pub greedy_digests: Vec<[u8; 32]>,
    /// Seconds of the arm's own part: the batched tail, or the replay steps.
    pub seconds: f64,
}

/// How the check came out.
#[derive(Clone, Debug)]
pub struct Report {
    pub len: usize,
    pub chunk: usize,
    /// The replayed window's start (`replay_start`).
    pub start: usize,
    /// Where the copied prefix ends: `start` rounded down to a multiple of the chunk.
    pub aligned: usize,
    /// Seconds of the prefix prefill, [0, aligned).
    pub prefix_seconds: f64,
    pub batched: Arm,
    /// `None`: `boundaries` 0, no replay arm.
    pub replay: Option<Arm>,
    /// The driver's memory figures right after the batched arm, when the device holds the
    /// most (the sequence, the snapshot, the chunk scratch); `None` on the host.
    pub memory_after_batched: Option<MemoryInfo>,
}

/// What differs between the arms, first of each kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// No replay arm ran.
    NotRun,
    Fail {
        /// The first prompt position whose logits differ.
        position: Option<usize>,
        /// The first state buffer that differs.
        state: Option<StatePart>,
        /// The first greedy step whose token or logits differ.
        greedy: Option<usize>,
    },
}

impl Report {
    /// Batched prefill of the whole prompt: the prefix [0, aligned) and the batched arm's
    /// [aligned, len).
    pub fn prefill_seconds(&self) -> f64 {
        self.prefix_seconds + self.batched.seconds
    }

    pub fn verdict(&self) -> Verdict {
        let Some(r) = &self.replay else { return Verdict::NotRun };
        let b = &self.batched;
        let position = b.digests.iter().zip(&r.digests).position(|(x, y)| x != y).map(|i| self.start + i);
        let state = b.state.iter().zip(&r.state).find(|(x, y)| x != y).map(|(x, _)| x.0);
        let greedy = (0..b.greedy.len().max(r.greedy.len()))
            .find(|&i| b.greedy.get(i) != r.greedy.get(i) || b.greedy_digests.get(i) != r.greedy_digests.get(i));
        let lengths_differ = b.digests.len() != r.digests.len() || b.state.len() != r.state.len();
        if position.is_none() && state.is_none() && greedy.is_none() && !lengths_differ {
            Verdict::Pass
        } else {
            Verdict::Fail { position, state, greedy }
        }
    }

    /// The verdict as one line.
    pub fn line(&self) -> String {
        let window = format!(
            "positions {}..{} ({} tokens, chunk {}, chunk boundaries inside: {})",
            self.start,
            self.len,
            self.len - self.start,
            self.chunk,
            (self.start + 1..self.len).filter(|p| p % self.chunk.max(1) == 0).count()
        );
        match self.verdict() {
            Verdict::NotRun => "identity over the last chunk boundaries: NOT RUN (--boundaries 0)".to_string(),
            Verdict::Pass => format!(
                "identity over the last chunk boundaries: PASS: batched prefill = replay at {window}: {} logits, {} state buffers (KV rows 0..{}, GDN conv rings and delta-rule states), {} greedy tokens and their logits, byte for byte",
                self.batched.digests.len(),
                self.batched.state.len(),
                self.len,
                self.batched.greedy.len()
            ),
            Verdict::Fail { position, state, greedy } => {
                let mut what = Vec::new();
                if let Some(p) = position {
                    what.push(format!("first differing position {p}"));
                }
                if let Some(s) = state {
                    what.push(format!("first differing state buffer: layer {} {}", s.layer, s.what));
                }
                if let Some(g) = greedy {
                    what.push(format!("first differing greedy step {g}"));
                }
                if what.is_empty() {
                    what.push("the arms compared different numbers of positions (a bug in the check)".into());
                }
                format!("identity over the last chunk boundaries: FAIL at {window}: {}", what.join("; "))
            }
        }
    }
}

fn state_digests(engine: &Engine) -> Result<Vec<(StatePart, [u8; 32])>, EngineError> {
    let mut out = Vec::new();
    engine.model.read_state(&engine.state, &mut |part, bytes| out.push((part, Sha256::digest(bytes).into())))?;
    Ok(out)
}

/// Runs the check on `engine` (its context must hold the prompt and `greedy − 1` more
/// positions). The batched arm feeds `batched`, the replay arm `replay`'s tail from the
/// window's start: the same tokens for the check itself; a different tail is the negative
/// control of its test. `progress` is told each stage as it ends.
pub fn run(
    engine: &mut Engine,
    batched: &[TokenId],
    replay: &[TokenId],
    check: Check,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, EngineError> {
    let len = batched.len();
    let bad =
        |expected: String, found: String| EngineError::Unsupported { what: "long-context check", expected, found };
    if len == 0 || replay.len() != len {
        return Err(bad(
            "a prompt of at least one token, the same length in both arms".into(),
            format!("{len} and {} tokens", replay.len()),
        ));
    }
    if check.chunk == 0 {
        return Err(bad("a chunk of at least 1 token".into(), "0".into()));
    }
    let chunk = check.chunk;
    let start = if check.boundaries == 0 {
        len.saturating_sub(1) / chunk * chunk
    } else {
        replay_start(len, chunk, check.boundaries, check.margin)
    };
    // The copied prefix ends on a chunk boundary of the whole prompt.
    let aligned = start / chunk * chunk;
    let mode = PrefillMode::Batched { chunk };
    let vocab = engine.model.config().vocab_size;

    engine.reset()?;
    let t = Instant::now();
    if aligned > 0 {
        engine.prefill(&batched[..aligned], mode, Logits::Last)?;
    }
    let prefix_seconds = t.elapsed().as_secs_f64();
    progress(&format!("prefix 0..{aligned} prefilled in chunks of {chunk}: {prefix_seconds:.3} s"));
    let mut snapshot = if check.fresh || check.boundaries == 0 { None } else { Some(engine.snapshot()?) };

    // The batched arm: the rest of the prompt in the same chunks, every position's logits.
    let mut arm = Arm::default();
    let mut last = Vec::new();
    let t = Instant::now();
    // The logits are hashed after the clock stops (up to 1.5 GB of them for a full vocabulary).
    let mut parts = Vec::new();
    for part in batched[aligned..].chunks(chunk) {
        parts.push(engine.prefill(part, mode, Logits::All)?.logits);
    }
    arm.seconds = t.elapsed().as_secs_f64();
    for logits in parts {
        arm.digests.extend(logits.chunks_exact(vocab).map(digest));
        last = logits[logits.len() - vocab..].to_vec();
    }
    // Positions aligned..start are not in the replay arm's window.
    arm.digests.drain(..start - aligned);
    progress(&format!("batched {aligned}..{len} (the window {start}..{len} kept): {:.3} s", arm.seconds));
    let memory_after_batched = engine.model.device().memory_info()?;
    if check.boundaries == 0 {
        (arm.greedy, arm.greedy_digests) = greedy(engine, last, check.greedy)?;
        return Ok(Report {
            len,
            chunk,
            start,
            aligned,
            prefix_seconds,
            batched: arm,
            replay: None,
            memory_after_batched,
        });
    }
    arm.state = state_digests(engine)?;
    (arm.greedy, arm.greedy_digests) = greedy(engine, last, check.greedy)?;

    // The replay arm: from the prefix's state, one decode step per token.
    let from = match snapshot.take() {
        Some(s) => {
            engine.state = s;
            aligned
        }
        None => {
            engine.reset()?;
            0
        }
    };
    if start > from {
        engine.prefill(&replay[from..start], mode, Logits::Last)?;
        progress(&format!(
            "replay arm: {from}..{start} prefilled in chunks of {chunk} from the {}",
            if from == 0 { "reset state (fresh)" } else { "copied prefix" }
        ));
    }
    let mut rep = Arm::default();
    let mut last = Vec::new();
    for &token in &replay[start..] {
        // The steps are timed, their hashing is not.
        let t = Instant::now();
        last = engine.step(token)?;
        rep.seconds += t.elapsed().as_secs_f64();
        rep.digests.push(digest(&last));
    }
    progress(&format!("replay {start}..{len}: {:.3} s", rep.seconds));
    rep.state = state_digests(engine)?;
    (rep.greedy, rep.greedy_digests) = greedy(engine, last, check.greedy)?;
    Ok(Report { len, chunk, start, aligned, prefix_seconds, batched: arm, replay: Some(rep), memory_after_batched })
}

/// A prompt with a fact in it: filler sentences, the needle sentence at a depth, a question.
#[derive(Clone, Debug)]
pub struct NeedlePrompt {
    pub tokens: Vec<TokenId>,
    /// The token index where the needle sentence starts.
    pub needle_at: usize,
    /// What a model that found the needle says (in the decoded greedy text).
    pub answer: String,
}

const FILLER: [&str; 8] = [
    " The river ran slowly past the old mill, and the miller counted sacks of grain by lamplight.",
    " In the valley the farmers spoke of rain, of prices at the market, and of the long winter ahead.",
    " A train crossed the iron bridge at noon, its whistle echoing between the quiet hills.",
    " The library kept its oldest maps in a cool room where nobody was allowed to eat or drink.",
    " Children played by the fountain while their parents argued gently about where to have lunch.",
    " The baker opened before dawn, and the smell of bread reached the harbour before the boats did.",
    " Clouds gathered over the lighthouse, but the keeper only wound the clock and lit his pipe.",
    " Somewhere a radio played an old song about roads, and a dog barked twice at nothing at all.",
];

/// A `len`-token prompt: filler sentences (each tokenized on its own, repeated in order), the
/// needle "The secret number is N." starting at the sentence boundary nearest below `depth`
/// (a fraction of the filler), and the question at the end. Where the tokenizer has Qwen's
/// chat tokens the text is a user turn and the answer's start an assistant turn with an empty
/// thinking block (what the Qwen3.5 template writes with thinking off); otherwise plain text.
/// Exactly `len` tokens; the last filler sentence is cut short to make it so.
pub fn needle_prompt(tokenizer: &Tokenizer, len: usize, depth: f64, secret: u32) -> Result<NeedlePrompt, String> {
    let encode =
        |text: &str, specials| tokenizer.encode(text, specials).map_err(|e| format!("tokenizing the prompt: {e}"));
    let enc = |text: &str| encode(text, Specials::Without);
    let chat = ["<|im_start|>", "<|im_end|>", "<think>", "</think>"].iter().all(|t| tokenizer.token_to_id(t).is_some());
    let question_text = "\n\nQuestion: what is the secret number mentioned in the text above?";
    let (head, question) = if chat {
        (
            encode("<|im_start|>user\n", Specials::With)?,
            encode(
                &format!(
                    "{question_text}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe secret number is"
                ),
                Specials::With,
            )?,
        )
    } else {
        (Vec::new(), enc(&format!("{question_text}\nAnswer: The secret number is"))?)
    };
    let needle = enc(&format!(" The secret number is {secret}. Remember it."))?;
    let sentences: Vec<Vec<TokenId>> = FILLER.iter().map(|s| enc(s)).collect::<Result<_, _>>()?;
    let fixed = head.len() + needle.len() + question.len();
    if len < fixed + 1 {
        return Err(format!(
            "a needle prompt of {len} tokens: expected at least {} (the needle {}, the question and the turns' markers {} tokens, one of filler)",
            fixed + 1,
            needle.len(),
            head.len() + question.len()
        ));
    }
    if !(0.0..=1.0).contains(&depth) {
        return Err(format!("needle depth: expected a fraction in 0..=1, found {depth}"));
    }
    let body = len - fixed;
    let (mut filler, mut starts) = (Vec::with_capacity(body), Vec::new());
    for s in sentences.iter().cycle() {
        if filler.len() >= body {
            break;
        }
        starts.push(filler.len());
        filler.extend_from_slice(s);
    }
    filler.truncate(body);
    let target = (depth * body as f64) as usize;
    let at = starts.iter().copied().filter(|&p| p <= target).max().unwrap_or(0);
    let mut tokens = Vec::with_capacity(len);
    tokens.extend_from_slice(&head);
    tokens.extend_from_slice(&filler[..at]);
    tokens.extend_from_slice(&needle);
    tokens.extend_from_slice(&filler[at..]);
    tokens.extend_from_slice(&question);
    debug_assert_eq!(tokens.len(), len);
    Ok(NeedlePrompt { tokens, needle_at: head.len() + at, answer: secret.to_string() })
}
