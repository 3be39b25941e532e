//! The identity gate: batched prefill against replay (the decode step per token) in one
//! binary, on one engine. Every prompt is a prefix of one seeded token sequence, so the replay
//! arm feeds that sequence once (a prefix's replay is the replay of the sequence up to there:
//! each step sees only what came before) and snapshots its state at every prompt length; the
//! batched arm feeds each prompt on its own, with its own chunk size.
//!
//! Compared byte for byte: the logits after every prompt position (by SHA-256 of each
//! position's `4 · vocab` bytes, so a full-size vocabulary needs no gigabytes of host memory),
//! then `greedy` tokens decoded after the prompt in each arm (token ids and the SHA-256 of
//! every step's logits). A prompt whose chunks all hold one row never runs a rows kernel with
//! more than one row: it is reported NOT EXERCISED, never PASS.
//!
//! With the negative control on (the engine's reordered attention), divergence is the expected
//! outcome; the gate also reports teacher-forced agreement: at every prompt position, whether
//! the batched arm's argmax is the replay arm's, and (when the logits fit in memory) the
//! largest |Δ| over the largest |logit|.

use baro_engine::engine::{Engine, EngineError, Logits, PrefillMode};
use baro_engine::sampling;
use sha2::{Digest, Sha256};

/// One prompt of the gate: a prefix of `len` tokens, prefilled in chunks of `chunk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub len: usize,
    pub chunk: usize,
}

/// The default set: 26 prompts from 1 to 4096 tokens, including 128, 512, 1024 and 4096,
/// most with chunk sizes that do not divide them (and two that cannot exercise batching).
pub fn default_cases() -> Vec<Case> {
    [
        (1, 512),
        (5, 1),
        (2, 512),
        (3, 2),
        (7, 4),
        (16, 16),
        (31, 8),
        (33, 32),
        (64, 7),
        (100, 33),
        (128, 128),
        (128, 100),
        (200, 64),
        (255, 128),
        (256, 96),
        (333, 512),
        (500, 77),
        (512, 512),
        (512, 200),
        (513, 512),
        (777, 256),
        (1000, 300),
        (1024, 512),
        (1500, 333),
        (2048, 1000),
        (4096, 512),
    ]
    .into_iter()
    .map(|(len, chunk)| Case { len, chunk })
    .collect()
}

/// How one prompt came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Equal, but no chunk held more than one row.
    NotExercised,
    /// The first prompt position whose logits differ, or `None` when only the greedy tokens do.
    Fail {
        position: Option<usize>,
    },
}

#[derive(Clone, Debug)]
pub struct CaseResult {
    pub case: Case,
    pub chunks: usize,
    pub verdict: Verdict,
    /// Prompt positions whose logits differ.
    pub differing_positions: usize,
    /// Greedy tokens decoded after this prompt: the gate's `greedy`, or fewer where the
    /// model's context ends first.
    pub greedy: usize,
    /// Greedy tokens equal in both arms, and steps whose logits are equal.
    pub greedy_equal: usize,
    pub greedy_logits_equal: usize,
    /// Teacher-forced top-1 agreement over the prompt positions.
    pub top1_agree: usize,
}

#[derive(Clone, Debug)]
pub struct GateReport {
    pub cases: Vec<CaseResult>,
    pub greedy: usize,
    /// Largest |batched − replay| over the largest |replay logit|, over every prompt position
    /// of every case, when the logits were kept (`None`: too large to keep).
    pub max_rel_delta: Option<f64>,
    /// SHA-256 over every position digest and greedy-step digest of both arms, in order.
    pub digest: [u8; 32],
}

impl GateReport {
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.verdict == Verdict::Pass).count()
    }
    pub fn not_exercised(&self) -> usize {
        self.cases.iter().filter(|c| c.verdict == Verdict::NotExercised).count()
    }
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| matches!(c.verdict, Verdict::Fail { .. })).count()
    }
    pub fn positions(&self) -> usize {
        self.cases.iter().map(|c| c.case.len).sum()
    }
    pub fn digest_hex(&self) -> String {
        self.digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn top1_agree(&self) -> usize {
        self.cases.iter().map(|c| c.top1_agree).sum()
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        let exercised = self.cases.len() - self.not_exercised();
        format!(
            "identity gate: {} {}/{} exercised prompts byte-identical ({} NOT EXERCISED, {} FAIL); {} prompt positions, up to {} greedy tokens per prompt (fewer only where the context ends)",
            if self.failed() == 0 { "PASS" } else { "FAIL" },
            self.passed(),
            exercised,
            self.not_exercised(),
            self.failed(),
            self.positions(),
            self.greedy
        )
    }
}

/// SHA-256 of `logits`' little-endian bytes.
pub fn digest(logits: &[f32]) -> [u8; 32] {
    let mut h = Sha256::new();
    for x in logits {
        h.update(x.to_le_bytes());
    }
    h.finalize().into()
}

/// Greedy decode of `n` tokens from the engine's current state, given the logits after the
/// prompt: (tokens, digest of the logits each pick was made from).
pub fn greedy(engine: &mut Engine, mut logits: Vec<f32>, n: usize) -> Result<(Vec<u32>, Vec<[u8; 32]>), EngineError> {
    let (mut tokens, mut digests) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        digests.push(digest(&logits));
        let t = sampling::greedy(&logits)?;
        tokens.push(t);
        if i + 1 < n {
            logits = engine.step(t)?;
        }
    }
    Ok((tokens, digests))
}

/// A seeded token sequence of `len` ids below `vocab` (xorshift64*).
pub fn sequence(seed: u64, len: usize, vocab: usize) -> Vec<u32> {
    let mut s = seed.max(1);
    (0..len)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as u32 % vocab as u32
        })
        .collect()
}

/// Per-position facts of one arm: digest, argmax and (when kept) the logits.
struct Positions {
    digests: Vec<[u8; 32]>,
    argmax: Vec<u32>,
    logits: Option<Vec<f32>>,
}

impl Positions {
    fn new(keep: bool) -> Positions {
        Positions { digests: Vec::new(), argmax: Vec::new(), logits: keep.then(Vec::new) }
    }
    fn push(&mut self, row: &[f32]) -> Result<(), EngineError> {
        self.digests.push(digest(row));
        self.argmax.push(sampling::greedy(row)?);
        if let Some(l) = self.logits.as_mut() {
            l.extend_from_slice(row);
        }
        Ok(())
    }
}

/// Runs the gate on `engine` (its context must hold the longest prompt plus `greedy`).
/// `progress` is told each finished prompt.
pub fn run(
    engine: &mut Engine,
    cases: &[Case],
    greedy_n: usize,
    seed: u64,
    progress: &mut dyn FnMut(&CaseResult),
) -> Result<GateReport, EngineError> {
    let vocab = engine.model.config().vocab_size;
    let max_len = cases.iter().map(|c| c.len).max().unwrap_or(0);
    let seq = sequence(seed, max_len, vocab);
    // Keep whole logits only when they fit in 256 MiB per arm.
    let keep = max_len * vocab <= 64 << 20;

    // Replay arm: the whole sequence once, with a snapshot at every prompt length.
    engine.reset()?;
    let mut replay = Positions::new(keep);
    let mut lengths: Vec<usize> = cases.iter().map(|c| c.len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut snapshots = Vec::with_capacity(lengths.len());
    let mut last_logits = Vec::new();
    for (i, &t) in seq.iter().enumerate() {
        last_logits = engine.step(t)?;
        replay.push(&last_logits)?;
        if lengths.binary_search(&(i + 1)).is_ok() {
            snapshots.push((i + 1, engine.snapshot()?, last_logits.clone()));
        }
    }
    drop(last_logits);
    let mut replay_greedy = Vec::with_capacity(snapshots.len());
    // n greedy tokens take n − 1 more positions.
    let ctx = engine.max_context();
    let greedy_for = |len: usize| greedy_n.min(ctx + 1 - len);
    for (len, snap, logits) in &snapshots {
        let n = greedy_for(*len);
        engine.restore(snap)?;
        replay_greedy.push((*len, greedy(engine, logits.clone(), n)?));
    }
    drop(snapshots);

    // Batched arm: each prompt on its own, chunk by chunk so its logits stream.
    let mut results = Vec::with_capacity(cases.len());
    let mut max_rel: f64 = 0.0;
    let mut all = Sha256::new();
    replay.digests.iter().for_each(|d| all.update(d));
    replay_greedy.iter().for_each(|(_, (_, ds))| ds.iter().for_each(|d| all.update(d)));
    for &case in cases {
        engine.reset()?;
        let mut batched = Positions::new(false);
        let mut chunks = 0;
        let mut last = Vec::new();
        let mut fed = 0;
        for part in seq[..case.len].chunks(case.chunk.max(1)) {
            let out = engine.prefill(part, PrefillMode::Batched { chunk: case.chunk.max(1) }, Logits::All)?;
            chunks += out.chunks;
            for (j, row) in out.logits.chunks_exact(vocab).enumerate() {
                batched.push(row)?;
                if let Some(r) = replay.logits.as_ref() {
                    let want = &r[(fed + j) * vocab..(fed + j + 1) * vocab];
                    let scale = want.iter().fold(0f64, |m, x| m.max(x.abs() as f64)).max(f64::MIN_POSITIVE);
                    let d = row.iter().zip(want).fold(0f64, |m, (a, b)| m.max((*a as f64 - *b as f64).abs()));
                    max_rel = max_rel.max(d / scale);
                }
            }
            fed += part.len();
            last = out.logits[out.logits.len() - vocab..].to_vec();
        }
        let n = greedy_for(case.len);
        let (tokens, digests) = greedy(engine, last, n)?;
        batched.digests.iter().chain(&digests).for_each(|d| all.update(d));
        let differing: Vec<usize> = (0..case.len).filter(|&i| batched.digests[i] != replay.digests[i]).collect();
        let top1_agree = (0..case.len).filter(|&i| batched.argmax[i] == replay.argmax[i]).count();
        let (want_tokens, want_digests) =
            &replay_greedy.iter().find(|(l, _)| *l == case.len).map(|(_, g)| g).ok_or(EngineError::Unsupported {
                what: "gate",
                expected: "a replay snapshot for every prompt length".into(),
                found: format!("none for {} (a bug in the gate)", case.len),
            })?;
        let greedy_equal = tokens.iter().zip(want_tokens).take_while(|(a, b)| a == b).count();
        let greedy_logits_equal = digests.iter().zip(want_digests).take_while(|(a, b)| a == b).count();
        let exercised = case.len >= 2 && case.chunk >= 2;
        let verdict = if !differing.is_empty() || greedy_equal < n || greedy_logits_equal < n {
            Verdict::Fail { position: differing.first().copied() }
        } else if exercised {
            Verdict::Pass
        } else {
            Verdict::NotExercised
        };
        let r = CaseResult {
            case,
            chunks,
            verdict,
            differing_positions: differing.len(),
            greedy: n,
            greedy_equal,
            greedy_logits_equal,
            top1_agree,
        };
        progress(&r);
        results.push(r);
    }
    Ok(GateReport {
        cases: results,
        greedy: greedy_n,
        max_rel_delta: keep.then_some(max_rel),
        digest: all.finalize().into(),
    })
}

/// One line per prompt.
pub fn case_line(r: &CaseResult) -> String {
    let verdict = match r.verdict {
        Verdict::Pass => "PASS".to_string(),
        Verdict::NotExercised => "NOT EXERCISED (no chunk of 2 or more rows)".to_string(),
        Verdict::Fail { position: Some(p) } => format!("FAIL (first differing position {p})"),
        Verdict::Fail { position: None } => "FAIL (greedy continuation differs)".to_string(),
    };
    format!(
        "prompt {:>5} tokens, chunk {:>4} ({:>2} chunks): logits {}/{} positions equal, greedy {}/{} tokens and {}/{} logits equal, top-1 {}/{}: {verdict}",
        r.case.len,
        r.case.chunk,
        r.chunks,
        r.case.len - r.differing_positions,
        r.case.len,
        r.greedy_equal,
        r.greedy,
        r.greedy_logits_equal,
        r.greedy,
        r.top1_agree,
        r.case.len
    )
}
