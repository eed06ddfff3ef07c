//! Compile-fail tests of typed look-ups: a misspelled handle, a key field too few or too
//! many, a value of another type, a range before the partition, another type's handle
//! and an id list's key are compile errors. Cases live in `tests/ui/lookup/` with the
//! expected compiler output beside them (regenerate with `TRYBUILD=overwrite`).

#[test]
fn look_ups_with_mistakes_fail_to_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/lookup/*.rs");
}
