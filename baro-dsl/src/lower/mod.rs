//! LLVM lowering (to be written).
