//! Test infrastructure shared by the crates' test suites: real components, started in temp
//! directories and stopped when the test process ends.

mod postgres;

pub use postgres::TempPostgres;
