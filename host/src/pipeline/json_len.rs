//! The length of a value's JSON (serde_json's compact form) without writing
//! it: the audit trail counts the bytes of every call's arguments and result.
//!
//! Serialising to a counting writer ran serde_json's escape loop over every
//! byte of every string, about 10 instructions a byte: a fifth of a call that
//! carries 64 KiB each way through `wf serve --http` (two of its six passes
//! over the text; docs/performance/http-front.md, "Large messages"). Here a
//! string is its byte count plus what its escapes add, and a string with none
//! (the usual case) is told by a pass the compiler vectorises. What this
//! counter does not model (a non-string map key other than an integer or a
//! bool, bytes, 128-bit integers, a serialiser's own error) makes it give up,
//! and the value is counted the old way: the answer is always exactly
//! serde_json's.

use std::fmt::Display;

use serde::Serialize;
use serde::ser::{self, Impossible};

/// The byte length of `v` as compact JSON (`serde_json::to_vec(v)?.len()`),
/// without keeping the text. A value serde_json cannot write counts what it
/// wrote before it failed.
pub fn json_len<T: Serialize + ?Sized>(v: &T) -> usize {
    let mut len = Len(0);
    match v.serialize(&mut len) {
        Ok(()) => len.0,
        Err(GaveUp) => written_len(v),
    }
}

/// The length serde_json writes, by writing it to a counter.
fn written_len<T: Serialize + ?Sized>(v: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A string's JSON length, quotes included, as serde_json escapes it:
/// `"` and `\` take two bytes, as do the controls with a short escape
/// (`\b \t \n \f \r`); the other controls below 0x20 take six (`\u00XX`).
fn str_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    if !needs_escape(bytes) {
        return bytes.len() + 2;
    }
    let extra: usize = bytes
        .iter()
        .map(|&b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 1,
            0..0x20 => 5,
            _ => 0,
        })
        .sum();
    bytes.len() + 2 + extra
}

/// Whether any byte needs an escape, looked at 64 at a time: each block's
/// loop compiles to a few vector compares, 0.7 instructions a byte, where a
/// filtered count (`||` between the tests) took 8 (callgrind, a 67 KB
/// string; docs/performance/http-front.md, "Large messages").
fn needs_escape(bytes: &[u8]) -> bool {
    let special = |b: u8| u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\');
    let mut blocks = bytes.chunks_exact(64);
    for block in &mut blocks {
        if block.iter().fold(0, |any, &b| any | special(b)) != 0 {
            return true;
        }
    }
    blocks.remainder().iter().any(|&b| special(b) != 0)
}

fn u64_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

fn i64_len(v: i64) -> usize {
    usize::from(v < 0) + u64_len(v.unsigned_abs())
}

/// The running count.
struct Len(usize);

/// This counter does not model the value: count it the old way.
#[derive(Debug)]
struct GaveUp;

impl Display for GaveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not counted here")
    }
}

impl std::error::Error for GaveUp {}

impl ser::Error for GaveUp {
    fn custom<T: Display>(_: T) -> Self {
        GaveUp
    }
}

type Done = Result<(), GaveUp>;

impl<'a> ser::Serializer for &'a mut Len {
    type Ok = ();
    type Error = GaveUp;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Done {
        self.0 += if v { 4 } else { 5 };
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Done {
        self.0 += i64_len(v);
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Done {
        Err(GaveUp)
    }
    fn serialize_u8(self, v: u8) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Done {
        self.0 += u64_len(v);
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Done {
        Err(GaveUp)
    }
    fn serialize_f32(self, v: f32) -> Done {
        // serde_json's float text (ryu's, or `null`), for one number.
        self.0 += written_len(&v);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Done {
        self.0 += written_len(&v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Done {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Done {
        self.0 += str_len(v);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Done {
        Err(GaveUp)
    }
    fn serialize_none(self) -> Done {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Done {
        self.0 += 4; // null
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Done {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Done {
        // {"variant":v}
        self.0 += str_len(variant) + 3;
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, GaveUp> {
        Ok(Compound::open(self, 1))
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, GaveUp> {
        Ok(Compound::open(self, 1))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, GaveUp> {
        Ok(Compound::open(self, 1))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, GaveUp> {
        // {"variant":[ … ]}
        let open = str_len(variant) + 3;
        Ok(Compound::open(self, open))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, GaveUp> {
        Ok(Compound::open(self, 1))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, GaveUp> {
        Ok(Compound::open(self, 1))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, GaveUp> {
        // {"variant":{ … }}
        let open = str_len(variant) + 3;
        Ok(Compound::open(self, open))
    }
}

/// An array or object being counted: its commas, colons and closing bracket
/// (the variant forms close two).
struct Compound<'a> {
    len: &'a mut Len,
    first: bool,
}

impl<'a> Compound<'a> {
    fn open(len: &'a mut Len, opening: usize) -> Self {
        len.0 += opening;
        Self { len, first: true }
    }
    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.len.0 += 1;
        }
    }
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        self.comma();
        v.serialize(&mut *self.len)
    }
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> Done {
        self.comma();
        self.len.0 += str_len(key) + 1;
        v.serialize(&mut *self.len)
    }
    fn close(self, closing: usize) -> Done {
        self.len.0 += closing;
        Ok(())
    }
}

/// The array forms: each element after a comma, `]` (or `]}` for a tuple
/// variant) at the end.
macro_rules! array_form {
    ($form:ident, $add:ident, $closing:expr) => {
        impl ser::$form for Compound<'_> {
            type Ok = ();
            type Error = GaveUp;
            fn $add<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
                self.element(v)
            }
            fn end(self) -> Done {
                self.close($closing)
            }
        }
    };
}

array_form!(SerializeSeq, serialize_element, 1);
array_form!(SerializeTuple, serialize_element, 1);
array_form!(SerializeTupleStruct, serialize_field, 1);
array_form!(SerializeTupleVariant, serialize_field, 2);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = GaveUp;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Done {
        self.comma();
        key.serialize(MapKey(&mut *self.len))?;
        self.len.0 += 1; // :
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(&mut *self.len)
    }
    fn end(self) -> Done {
        self.close(1)
    }
}

/// The object forms with named fields: `}` (or `}}` for a struct variant)
/// at the end.
macro_rules! object_form {
    ($form:ident, $closing:expr) => {
        impl ser::$form for Compound<'_> {
            type Ok = ();
            type Error = GaveUp;
            fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Done {
                self.field(key, v)
            }
            fn end(self) -> Done {
                self.close($closing)
            }
        }
    };
}

object_form!(SerializeStruct, 1);
object_form!(SerializeStructVariant, 2);

/// A map key, as serde_json writes one: a string as itself, an integer or a
/// bool quoted. Anything else gives up (serde_json writes a float key its
/// own way and refuses the rest).
struct MapKey<'a>(&'a mut Len);

impl ser::Serializer for MapKey<'_> {
    type Ok = ();
    type Error = GaveUp;
    type SerializeSeq = Impossible<(), GaveUp>;
    type SerializeTuple = Impossible<(), GaveUp>;
    type SerializeTupleStruct = Impossible<(), GaveUp>;
    type SerializeTupleVariant = Impossible<(), GaveUp>;
    type SerializeMap = Impossible<(), GaveUp>;
    type SerializeStruct = Impossible<(), GaveUp>;
    type SerializeStructVariant = Impossible<(), GaveUp>;

    fn serialize_str(self, v: &str) -> Done {
        self.0.serialize_str(v)
    }
    fn serialize_char(self, v: char) -> Done {
        self.0.serialize_char(v)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.0.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Done {
        self.0.0 += 2;
        self.0.serialize_bool(v)
    }
    fn serialize_i8(self, v: i8) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Done {
        self.0.0 += 2;
        self.0.serialize_i64(v)
    }
    fn serialize_u8(self, v: u8) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Done {
        self.0.0 += 2;
        self.0.serialize_u64(v)
    }
    fn serialize_f32(self, _: f32) -> Done {
        Err(GaveUp)
    }
    fn serialize_f64(self, _: f64) -> Done {
        Err(GaveUp)
    }
    fn serialize_bytes(self, _: &[u8]) -> Done {
        Err(GaveUp)
    }
    fn serialize_none(self) -> Done {
        Err(GaveUp)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Done {
        Err(GaveUp)
    }
    fn serialize_unit(self) -> Done {
        Err(GaveUp)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Done {
        Err(GaveUp)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Done {
        Err(GaveUp)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, GaveUp> {
        Err(GaveUp)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, GaveUp> {
        Err(GaveUp)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::{Value, json};

    use super::*;

    /// `json_len` is serde_json's length; and unless `v` holds what the
    /// counter gives up on (128-bit integers here), the counter found it
    /// itself, not the fallback.
    fn assert_exact<T: Serialize + ?Sized + std::fmt::Debug>(v: &T) {
        let shown: String = format!("{v:?}").chars().take(300).collect();
        let expected = serde_json::to_vec(v).map_or_else(|_| written_len(v), |t| t.len());
        assert_eq!(json_len(v), expected, "{shown}");
        let mut len = Len(0);
        if v.serialize(&mut len).is_ok() {
            assert_eq!(len.0, expected, "{shown}");
        } else {
            assert!(shown.contains("128"), "gave up on {shown}");
        }
    }

    /// Every byte below 0x80 alone and among others, so every escape.
    #[test]
    fn every_ascii_byte_counts_as_serde_json_writes_it() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            assert_exact(&c.to_string());
            assert_exact(&format!("a{c}b{c}{c}"));
            assert_exact(&json!({ c.to_string(): [c.to_string()] }));
        }
        assert_exact("déjà vu – 日本語 🦀, \u{7f}\u{80}\u{2028}");
    }

    /// Long strings are looked at 64 bytes at a time: one byte to escape (or
    /// one just outside the set) anywhere in a block or in the rest after.
    #[test]
    fn one_byte_to_escape_anywhere_in_a_long_string() {
        for b in [0x00u8, 0x08, 0x0a, 0x1f, b'"', b'\\', 0x20, 0x7f, b'!'] {
            for at in [0, 1, 31, 32, 63, 64, 65, 127, 128, 150, 199] {
                let mut bytes = vec![b'x'; 200];
                bytes[at] = b;
                let text = String::from_utf8(bytes).expect("ASCII");
                assert_exact(&text);
                assert_exact(&text[..at + 1]);
            }
        }
    }

    #[test]
    fn numbers_and_scalars() {
        for n in [
            0i64,
            7,
            -7,
            9,
            10,
            -10,
            99,
            100,
            i64::MIN,
            i64::MAX,
            -1_000_000,
        ] {
            assert_exact(&n);
        }
        for n in [0u64, 1, 9, 10, 18_446_744_073_709_551_615] {
            assert_exact(&n);
        }
        for f in [
            0.0f64,
            -0.0,
            1.5,
            1e21,
            1e-7,
            f64::NAN,
            f64::INFINITY,
            0.1 + 0.2,
        ] {
            assert_exact(&f);
        }
        assert_exact(&1.25f32);
        assert_exact(&(u128::MAX, "u128"));
        assert_exact(&(-5i128, "i128"));
        assert_exact(&());
        assert_exact(&Option::<u8>::None);
        assert_exact(&'x');
        assert_exact(&'"');
        assert_exact(&(true, false, "t"));
    }

    #[derive(Serialize, Debug)]
    enum Shape {
        Unit,
        New(u8),
        Tuple(u8, String),
        Struct { a: u8, b: Vec<String> },
    }

    #[derive(Serialize, Debug)]
    struct Record {
        #[serde(rename = "na\"me")]
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        shapes: Vec<Shape>,
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
        empty: Vec<u8>,
        unit: (),
    }

    #[test]
    fn structs_enums_flattened_maps_and_skipped_fields() {
        let mut rest = BTreeMap::new();
        rest.insert("x\ny".into(), json!({"deep": [1, -2.5, null, {"": ""}]}));
        rest.insert(String::new(), json!([]));
        assert_exact(&Record {
            name: "a\tb".into(),
            skipped: None,
            shapes: vec![
                Shape::Unit,
                Shape::New(3),
                Shape::Tuple(4, "\u{1}".into()),
                Shape::Struct {
                    a: 5,
                    b: vec!["\\".into(), String::new()],
                },
            ],
            rest,
            empty: vec![],
            unit: (),
        });
    }

    #[test]
    fn map_keys_that_are_not_strings() {
        let ints: BTreeMap<i32, &str> = [(-3, "a"), (40, "b")].into();
        assert_exact(&ints);
        let bools: BTreeMap<bool, u8> = [(true, 1), (false, 0)].into();
        assert_exact(&bools);
        let chars: BTreeMap<char, u8> = [('"', 1)].into();
        assert_exact(&chars);
        // A float key: serde_json's own way, through the fallback.
        let mut floats = serde_json::Serializer::new(Vec::new());
        let _ = ser::Serializer::collect_map(&mut floats, [(1.5f64, 2)]);
        assert_eq!(
            json_len(&FloatKeys),
            floats.into_inner().len(),
            "a float key is counted as serde_json writes it"
        );
        // Keys serde_json refuses: the count of what it wrote before failing.
        let refused: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert_eq!(json_len(&refused), written_len(&refused));
    }

    #[derive(Debug)]
    struct FloatKeys;

    impl Serialize for FloatKeys {
        fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map([(1.5f64, 2)])
        }
    }

    /// What the audit trail counts: a tool result of rmcp's, large.
    #[test]
    fn tool_results() {
        let text = "lorem \"ipsum\"\n\tdolor\u{0}".repeat(3000);
        let mut r = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        r.structured_content = Some(json!({"text": text, "n": [1, 2.5, -3]}));
        assert_exact(&r);
        assert_exact(&CallToolResult::error(vec![]));
        assert_exact(&json!({"message": "x".repeat(65536)}));
    }
}
