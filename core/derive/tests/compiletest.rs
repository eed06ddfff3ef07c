//! Compile-fail tests: every mistake in a declaration is a compile error on the attribute
//! or field at fault, worded with what was expected. Cases live in `tests/ui/<category>/`
//! with the expected compiler output beside them (regenerate with `TRYBUILD=overwrite`).

#[test]
fn declarations_with_mistakes_fail_to_compile_with_clear_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*/*.rs");
}
