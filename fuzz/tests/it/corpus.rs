//! Replays every committed input through its target's function, without libFuzzer: the seed
//! corpus (`corpus/TARGET/`) and the inputs that once crashed, hung or over-read a target
//! (`regressions/TARGET/`, each named after what it found). A target that panics fails here,
//! so a fixed crash stays fixed in `cargo test`.

use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
    ("gguf", baro_fuzz::gguf),
    ("safetensors", baro_fuzz::safetensors),
    ("tokenizer_json", baro_fuzz::tokenizer_json),
    ("tokenizer_gguf", baro_fuzz::tokenizer_gguf),
    ("chat_template", baro_fuzz::chat_template),
    ("ir_text", baro_fuzz::ir_text),
    ("server_request", baro_fuzz::server_request),
];

/// Runs every file under `dir/TARGET/` through TARGET; returns how many ran.
fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    // Every folder is some target's: a misnamed one would otherwise be skipped in silence.
    for entry in std::fs::read_dir(&root).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name),
            "{dir}/{name}: expected a target's name, one of {:?}",
            TARGETS.map(|(t, _)| t)
        );
    }
    let mut n = 0;
    for (name, target) in TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else { continue };
        let mut paths: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).unwrap();
            let started = std::time::Instant::now();
            target(&data);
            let took = started.elapsed();
            assert!(took.as_secs() < 10, "{}: expected well under 10 s, took {took:?}", path.display());
            n += 1;
        }
    }
    n
}

#[test]
fn seed_corpus_runs_clean() {
    let n = replay("corpus");
    assert!(n >= TARGETS.len(), "expected seeds for every target, found {n} files");
}

#[test]
fn regression_inputs_run_clean() {
    println!("{} regression inputs", replay("regressions"));
}
