#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| eqdv_fuzz::run("properties", data));
