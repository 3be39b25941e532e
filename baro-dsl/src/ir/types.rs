//! Scalar types of the kernel IR and typed constants.
//!
//! A type here names a bit layout and its arithmetic; it never says where a value lives.

use std::fmt;

/// The scalar types a kernel can compute with or load and store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    Bool,
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    BF16,
    F32,
}

impl ScalarType {
    pub const ALL: [ScalarType; 10] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::U8,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
    ];

    /// The type of indices, lengths, loop counters and group ids (Rust's `usize`).
    pub const INDEX: ScalarType = ScalarType::U64;

    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::BF16 | ScalarType::F32)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::U8 | ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64
        )
    }

    pub fn is_signed(self) -> bool {
        matches!(self, ScalarType::I8 | ScalarType::I32 | ScalarType::I64)
    }

    /// Width in bits (bool counts as 8: it is stored as one byte).
    pub fn bits(self) -> u32 {
        match self {
            ScalarType::Bool | ScalarType::I8 | ScalarType::U8 => 8,
            ScalarType::F16 | ScalarType::BF16 => 16,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 32,
            ScalarType::I64 | ScalarType::U64 => 64,
        }
    }

    pub fn size_bytes(self) -> usize {
        (self.bits() / 8) as usize
    }

    /// The name used in the text form and in the Rust front end.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I8 => "i8",
            ScalarType::U8 => "u8",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::U64 => "usize",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
            ScalarType::F32 => "f32",
        }
    }

    /// Parses a type name; `u64` and `usize` are the same type.
    pub fn from_name(name: &str) -> Option<ScalarType> {
        Some(match name {
            "bool" => ScalarType::Bool,
            "i8" => ScalarType::I8,
            "u8" => ScalarType::U8,
            "i32" => ScalarType::I32,
            "u32" => ScalarType::U32,
            "i64" => ScalarType::I64,
            "u64" | "usize" => ScalarType::U64,
            "f16" => ScalarType::F16,
            "bf16" => ScalarType::BF16,
            "f32" => ScalarType::F32,
            _ => return None,
        })
    }

    /// Keeps the low `bits()` bits of `v` (sign-extending for signed types) so that
    /// every constant of this type has one canonical 64-bit pattern.
    pub fn canonical_bits(self, v: u64) -> u64 {
        match self {
            ScalarType::Bool => (v != 0) as u64,
            ScalarType::I8 => v as u8 as i8 as i64 as u64,
            ScalarType::U8 => v as u8 as u64,
            ScalarType::I32 => v as u32 as i32 as i64 as u64,
            ScalarType::U32 | ScalarType::F32 => v as u32 as u64,
            ScalarType::F16 | ScalarType::BF16 => v as u16 as u64,
            ScalarType::I64 | ScalarType::U64 => v,
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A constant: a type and its bit pattern, canonicalized by [`ScalarType::canonical_bits`].
/// Floats are kept as bits so that `-0.0`, NaN payloads and subnormals survive every round trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Const {
    pub ty: ScalarType,
    pub bits: u64,
}

impl Const {
    pub fn new(ty: ScalarType, bits: u64) -> Const {
        Const { ty, bits: ty.canonical_bits(bits) }
    }
    pub fn f32(v: f32) -> Const {
        Const::new(ScalarType::F32, v.to_bits() as u64)
    }
    pub fn index(v: u64) -> Const {
        Const::new(ScalarType::INDEX, v)
    }
    pub fn bool(v: bool) -> Const {
        Const::new(ScalarType::Bool, v as u64)
    }
    /// The zero of a type (`+0.0` for floats): the value an empty sum produces.
    pub fn zero(ty: ScalarType) -> Const {
        Const::new(ty, 0)
    }
    /// Signed integers read back as i64, everything else as its raw bits.
    pub fn as_i64(self) -> i64 {
        self.bits as i64
    }
    pub fn as_f32(self) -> Option<f32> {
        (self.ty == ScalarType::F32).then(|| f32::from_bits(self.bits as u32))
    }
}

impl fmt::Display for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            ScalarType::Bool => write!(f, "{}", self.bits != 0),
            ScalarType::F32 => {
                let v = f32::from_bits(self.bits as u32);
                // Exactly representable finite values print as decimals; the rest as bits.
                if v.is_finite()
                    && !(v == 0.0 && v.is_sign_negative())
                    && format!("{v:?}").parse::<f32>().ok().map(f32::to_bits) == Some(v.to_bits())
                {
                    write!(f, "{v:?}:f32")
                } else {
                    write!(f, "0x{:08x}:f32", self.bits)
                }
            }
            ScalarType::F16 | ScalarType::BF16 => write!(f, "0x{:04x}:{}", self.bits, self.ty),
            t if t.is_signed() => write!(f, "{}:{}", self.bits as i64, t),
            t => write!(f, "{}:{}", self.bits, t),
        }
    }
}
