//! The order-equivalence verifier (to be written).
