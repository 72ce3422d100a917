#![no_main]
libfuzzer_sys::fuzz_target!(
    // libfuzzer-sys aborts on any panic, even one eqdv catches (it turns the Parquet and
    // Arrow readers' panics into errors naming the file): back to the default hook. A
    // panic that leaves the target still aborts, through libfuzzer-sys's catch_unwind.
    init: drop(std::panic::take_hook()),
    |data: &[u8]| eqdv_fuzz::run("manifest_encode", data)
);
