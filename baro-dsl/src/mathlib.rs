//! baro math functions from IEEE basic operations (to be written).
