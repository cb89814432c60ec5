//! The codes by which a front end's native part tells its language side
//! what a call found and how a value to store is encoded: one number per
//! form, the same on both sides of the boundary.

/// What a read found, or how a value to store is encoded.
///
/// ```
/// use ziggurat_cache::ValueCode;
/// assert_eq!(ValueCode::ALL.map(|c| c as u32), [0, 1, 2, 3, 4, 5]);
/// assert_eq!(ValueCode::Bytes.name(), "BYTES");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueCode {
    /// Nothing usable.
    Nothing = 0,
    /// JSON text.
    JsonText = 1,
    /// Bytes (stored as the pickle of a bytes object).
    Bytes = 2,
    /// A native counter.
    Counter = 3,
    /// A cached miss.
    Negative = 4,
    /// A value's bytes as the language side encoded them.
    Raw = 5,
}

impl ValueCode {
    /// Every code.
    pub const ALL: [ValueCode; 6] = [
        ValueCode::Nothing,
        ValueCode::JsonText,
        ValueCode::Bytes,
        ValueCode::Counter,
        ValueCode::Negative,
        ValueCode::Raw,
    ];

    /// The code's name: NOTHING, JSON_TEXT, BYTES, COUNTER, NEGATIVE, RAW.
    pub fn name(self) -> &'static str {
        match self {
            ValueCode::Nothing => "NOTHING",
            ValueCode::JsonText => "JSON_TEXT",
            ValueCode::Bytes => "BYTES",
            ValueCode::Counter => "COUNTER",
            ValueCode::Negative => "NEGATIVE",
            ValueCode::Raw => "RAW",
        }
    }

    /// The code numbered `n`, if any.
    pub fn of(n: u32) -> Option<ValueCode> {
        ValueCode::ALL.into_iter().find(|c| *c as u32 == n)
    }
}
