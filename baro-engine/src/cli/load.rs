//! What the generation CLI runs: the model (`--model PATH`, a GGUF file or a Hugging Face
//! folder, or the embedded default) and the tokenizer and chat template that go with it. The
//! tokenizer comes from the GGUF metadata or the folder's `tokenizer.json`; failing that, the
//! built-in Qwen3.5 one with a warning, provided it fits the model's vocabulary; otherwise
//! there is none and the prompt must be given as ids. Loads only; never runs the model.

use std::path::Path;

use baro_engine::engine::ModelSource;
use baro_engine::model::ModelConfig;
use baro_engine::pack::tokenizer_meta::QWEN35_N_IDS;
use baro_engine::tokenizer::{ChatTemplate, Tokenizer};

use crate::cli::default_model;

/// A model ready for `Engine::new`, with its text side.
pub struct Loaded {
    pub source: ModelSource,
    pub config: ModelConfig,
    /// One line for the user: what model this is.
    pub description: String,
    /// `None`: no tokenizer fits the model; prompts are ids and output is ids.
    pub tokenizer: Option<Tokenizer>,
    pub template: ChatTemplate,
    /// Whether this is the embedded default (random weights).
    pub is_default: bool,
    /// Things the user should know (printed to stderr).
    pub warnings: Vec<String>,
}

/// The embedded default model with the built-in tokenizer and template.
pub fn default() -> Result<Loaded, String> {
    // The pack's tokenizer section and the tokenizer are both built from the same JSON: in
    // parallel, they take the time of one.
    let (file, tokenizer) = std::thread::scope(|s| {
        let tokenizer = s.spawn(Tokenizer::qwen35);
        let file = default_model::gguf();
        (file, tokenizer.join())
    });
    let file = file?;
    let tokenizer = match tokenizer {
        Ok(t) => t.map_err(|e| format!("the built-in tokenizer (a bug in baro): {e}"))?,
        Err(_) => return Err("building the built-in tokenizer panicked (a bug in baro)".into()),
    };
    let config = default_model::config();
    Ok(Loaded {
        source: ModelSource::Gguf(file),
        description: default_model::describe(&config),
        config,
        tokenizer: Some(tokenizer),
        template: ChatTemplate::qwen35(),
        is_default: true,
        warnings: Vec::new(),
    })
}

/// `--model PATH` names something that exists: checked before any slow step.
pub fn check_path(path: &Path) -> Result<(), String> {
    if path.exists() {
        Ok(())
    } else {
        Err(format!(
            "--model {}: expected a GGUF file or a Hugging Face folder, found nothing at that path",
            path.display()
        ))
    }
}

/// The model at `path` and its tokenizer.
pub fn open(path: &Path) -> Result<Loaded, String> {
    let shown = path.display();
    if !path.exists() {
        return Err(format!(
            "--model {shown}: expected a GGUF file or a Hugging Face folder, found nothing at that path"
        ));
    }
    let source = ModelSource::open(path).map_err(|e| format!("--model {shown}: {e}"))?;
    let config = source.config().map_err(|e| format!("--model {shown}: {e}"))?;
    let mut warnings = Vec::new();
    let (own, template) = match &source {
        ModelSource::Gguf(file) if file.meta("tokenizer.ggml.model").is_some() => {
            let tokenizer = Tokenizer::from_gguf(file).map_err(|e| format!("--model {shown}: its tokenizer: {e}"))?;
            let template = match tokenizer.chat_template() {
                Some(source) => ChatTemplate::from_source(source).unwrap_or_else(|e| {
                    warnings.push(format!(
                        "the model's chat template does not parse ({e}); using the built-in qwen3.5 one"
                    ));
                    ChatTemplate::qwen35()
                }),
                None => ChatTemplate::qwen35(),
            };
            (Some(tokenizer), template)
        }
        ModelSource::Hf(_) if path.join("tokenizer.json").is_file() => {
            let file = path.join("tokenizer.json");
            let tokenizer = Tokenizer::from_file(&file).map_err(|e| format!("--model {shown}: {e}"))?;
            (Some(tokenizer), ChatTemplate::qwen35())
        }
        _ => (None, ChatTemplate::qwen35()),
    };
    let what = match &source {
        ModelSource::Gguf(_) => "gguf",
        ModelSource::Hf(_) => "hugging face checkpoint",
    };
    let description = format!(
        "{shown} ({what}): hidden {}, {} layers, {} experts top-{}, vocab {}",
        config.hidden_dim, config.n_layers, config.n_experts, config.n_experts_used, config.vocab_size
    );
    let tokenizer = match own {
        Some(t) => Some(t),
        None => fallback_tokenizer(&config, &mut warnings)?,
    };
    Ok(Loaded { source, config, description, tokenizer, template, is_default: false, warnings })
}

/// The built-in tokenizer for a model that brings none, if its ids fit the model.
fn fallback_tokenizer(config: &ModelConfig, warnings: &mut Vec<String>) -> Result<Option<Tokenizer>, String> {
    if QWEN35_N_IDS <= config.vocab_size {
        let builtin = Tokenizer::qwen35().map_err(|e| format!("the built-in tokenizer (a bug in baro): {e}"))?;
        warnings.push("the model has no tokenizer (no GGUF tokenizer metadata, no tokenizer.json): using the built-in qwen3.5 tokenizer".into());
        Ok(Some(builtin))
    } else {
        warnings.push(format!(
            "the model has no tokenizer (no GGUF tokenizer metadata, no tokenizer.json) and its vocabulary ({} ids) is smaller than the built-in qwen3.5 tokenizer's ({} ids): prompts are token ids (--prompt-ids) and output is printed as ids",
            config.vocab_size,
            QWEN35_N_IDS
        ));
        Ok(None)
    }
}
