//! Support for the end-to-end tests (`tests/it`) and the benchmark binary (`openvaala-bench`),
//! not part of the service: they share it through the library so that neither includes the
//! other's files. Hidden from the documentation; nothing in the service uses it.
#![doc(hidden)]

pub mod postgres;
