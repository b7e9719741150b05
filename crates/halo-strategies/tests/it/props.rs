//! Property tests of argument repair: it never panics, valid objects keep their bytes, and a
//! repaired string is valid as it stands.

use halo_strategies::arguments::{ArgumentRepair, repair_arguments};
use proptest::prelude::*;
use serde_json::Value;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z \"'\\\\{}\\[\\],:é]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-zA-Z_]{1,8}", json_value(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn check_never_panics_and_is_idempotent(raw: &str) -> Result<(), TestCaseError> {
    if let ArgumentRepair::Repaired(out) = repair_arguments(raw) {
        prop_assert!(
            matches!(serde_json::from_str::<Value>(&out), Ok(Value::Object(_))),
            "{out}"
        );
        prop_assert_eq!(repair_arguments(&out), ArgumentRepair::Valid);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_string_is_repaired_without_panicking(raw in any::<String>()) {
        check_never_panics_and_is_idempotent(&raw)?;
    }

    #[test]
    fn almost_json_is_repaired_without_panicking(raw in "[{}\\[\\]\"':,a-z0-9 \\\\\\n`TrueFalsNn.-]{0,160}") {
        check_never_panics_and_is_idempotent(&raw)?;
    }

    #[test]
    fn a_valid_object_passes_through_byte_identical(object in json_object(), pretty in any::<bool>()) {
        let raw = if pretty { serde_json::to_string_pretty(&object) } else { serde_json::to_string(&object) }.unwrap();
        prop_assert_eq!(repair_arguments(&raw), ArgumentRepair::Valid);
    }

    #[test]
    fn a_cut_or_fenced_object_repairs_to_an_object(object in json_object(), cut in 0usize..40) {
        let raw = serde_json::to_string(&object).unwrap();
        let fenced = format!("```json\n{raw}\n```");
        prop_assert_eq!(
            repair_arguments(&fenced),
            ArgumentRepair::Repaired(serde_json::to_string(&halo_core::prefix::canonicalize(object)).unwrap())
        );
        let end = raw.char_indices().map(|(i, _)| i).filter(|&i| i > 0).nth(cut).unwrap_or(raw.len());
        check_never_panics_and_is_idempotent(&raw[..end])?;
    }
}
