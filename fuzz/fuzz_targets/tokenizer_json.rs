//! libFuzzer entry for `baro_fuzz::tokenizer_json` (what it feeds and checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baro_fuzz::tokenizer_json(data));
