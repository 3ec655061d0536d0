//! The events of the two SSE streams.
