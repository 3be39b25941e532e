//! The text form of the kernel IR (to be written).
