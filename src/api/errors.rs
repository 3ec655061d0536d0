//! The error codes of the API.
