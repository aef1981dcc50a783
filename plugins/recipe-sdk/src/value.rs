//! Plain data a recipe reads and writes: values, columns, tables and the output of a run. It
//! mirrors the `types` interface of wit/recipe.wit; `wit_glue!` converts at the edge.

/// One SQLite value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// What a column holds; `Value::Null` is allowed in every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Int,
    Real,
    Text,
}

/// A column of an output table: its header, kind and unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub kind: ColumnKind,
    pub unit: Option<String>,
}

impl Column {
    pub fn new(name: impl Into<String>, kind: ColumnKind, unit: Option<&str>) -> Self {
        Self {
            name: name.into(),
            kind,
            unit: unit.map(str::to_owned),
        }
    }
}

/// A result table. Invariant: every row has exactly `columns.len()` values.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
}

/// A picture of the results, as a standalone SVG document.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: String,
    pub svg: String,
}

/// What one run of a recipe produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    pub figures: Vec<Figure>,
}

impl Output {
    /// Adds a note for the reader (what is missing, what was left out).
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}
