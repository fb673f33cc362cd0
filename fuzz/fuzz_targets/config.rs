#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| wf_fuzz::config(data));
