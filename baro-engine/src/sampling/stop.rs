//! When generation stops: on an end-of-sequence id, or when the decoded text contains a stop
//! string (which may be split across tokens). Text that could be the start of a stop string is
//! held back until it is known not to be, so the caller never prints text it must take back;
//! the stop string itself and anything after it are dropped. Never panics on text.

use crate::tokenizer::TokenId;

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    Eos(TokenId),
    StopString(String),
}

/// What one token produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Text that is safe to show (possibly empty); generation goes on.
    Text(String),
    /// Generation is over; `text` is the last text to show (held-back text, cut before the
    /// stop string).
    Stop { text: String, reason: StopReason },
}

#[derive(Clone, Debug)]
pub struct StopChecker {
    eos: Vec<TokenId>,
    stops: Vec<String>,
    held: String,
}

impl StopChecker {
    /// Empty stop strings are ignored.
    pub fn new(eos: &[TokenId], stops: &[String]) -> StopChecker {
        StopChecker {
            eos: eos.to_vec(),
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.contains(&id)
    }

    /// Takes the token just sampled and the text its decoding added (from `StreamDecoder`).
    /// An EOS token's own text is not shown.
    pub fn push(&mut self, id: TokenId, text: &str) -> Step {
        if self.is_eos(id) {
            return Step::Stop { text: std::mem::take(&mut self.held), reason: StopReason::Eos(id) };
        }
        self.held.push_str(text);
        // The earliest stop string wins; at equal positions, the first listed.
        let found =
            self.stops.iter().filter_map(|s| self.held.find(s.as_str()).map(|at| (at, s))).min_by_key(|&(at, _)| at);
        if let Some((at, stop)) = found {
            let reason = StopReason::StopString(stop.clone());
            let mut text = std::mem::take(&mut self.held);
            text.truncate(at);
            return Step::Stop { text, reason };
        }
        let keep = self.partial_suffix_len();
        let rest = self.held.split_off(self.held.len() - keep);
        Step::Text(std::mem::replace(&mut self.held, rest))
    }

    /// Returns the held-back text once the generation ends for another reason (token limit).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// The length of the longest suffix of `held` that is a proper prefix of a stop string.
    fn partial_suffix_len(&self) -> usize {
        let held = self.held.as_str();
        // Suffixes start at char boundaries, longest first.
        for (at, _) in held.char_indices() {
            let suffix = &held[at..];
            if self.stops.iter().any(|s| s.len() > suffix.len() && s.starts_with(suffix)) {
                return suffix.len();
            }
        }
        0
    }
}
