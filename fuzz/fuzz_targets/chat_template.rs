//! libFuzzer entry for `baro_fuzz::chat_template` (what it feeds and checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baro_fuzz::chat_template(data));
