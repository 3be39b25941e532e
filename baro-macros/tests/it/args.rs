//! The argument struct `#[kernel]` writes for each kernel converts to exactly the positional
//! list a hand-written launch passes (same buffers, kinds and scalars, in declaration order),
//! `Rows` appends the row count, and a launch through it runs the kernel on the host device.

use baro_dsl::ir::Const;
use baro_dsl::runtime::{Buffer, Device, DeviceArg, DeviceError, KernelArgs, Rows};
use baro_dsl::ScalarType;
use baro_macros::kernel;
use half::bf16;

#[kernel(grid = [1], rows(name = mixed_rows, axis = 0, row_stride(x = n, y = n, t = n)))]
pub fn mixed(x: &[f32], w: &[u32], y: &mut [f32], t: &mut [u32], n: usize, s: bf16, on: bool, eps: f32) {
    for i in par(0..n) {
        y[i] = if on { x[i] * s.to_f32() + eps } else { x[i] };
        t[i] = w[i];
    }
}

/// What an argument is, comparably: kind, the buffer's address, or the scalar.
#[derive(Debug, PartialEq)]
enum Seen {
    Buf(*const Buffer),
    BufMut(*const Buffer),
    Words(*const Buffer),
    Scalar(Const),
}

fn seen(args: &[DeviceArg<'_>]) -> Vec<Seen> {
    args.iter()
        .map(|a| match a {
            DeviceArg::Buf(b) => Seen::Buf(*b),
            DeviceArg::BufMut(b) => Seen::BufMut(&**b),
            DeviceArg::Words(b) => Seen::Words(*b),
            DeviceArg::Scalar(c) => Seen::Scalar(*c),
        })
        .collect()
}

#[test]
fn the_struct_is_the_positional_list_in_declared_order() {
    let d = Device::host().expect("host device");
    let x = d.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let bytes = d.upload(&[7u8; 12]).unwrap();
    let mut y = d.alloc(ScalarType::F32, 3).unwrap();
    let mut t = d.alloc(ScalarType::U32, 3).unwrap();
    let (px, pw, py, pt) = (&x as *const Buffer, &bytes as *const Buffer, &y as *const Buffer, &t as *const Buffer);
    let s = bf16::from_f32(2.0);
    let typed = MixedArgs { x: &x, w: bytes.words(), y: &mut y, t: &mut t, n: 3, s, on: true, eps: 0.5 }.into_args();
    let expected = vec![
        Seen::Buf(px),
        Seen::Words(pw),
        Seen::BufMut(py),
        Seen::BufMut(pt),
        Seen::Scalar(Const::index(3)),
        Seen::Scalar(Const::new(ScalarType::BF16, s.to_bits() as u64)),
        Seen::Scalar(Const::bool(true)),
        Seen::Scalar(Const::f32(0.5)),
    ];
    assert_eq!(seen(&typed), expected);
    // The hand-written list the struct replaces.
    drop(typed);
    let by_hand = vec![
        DeviceArg::buf(&x),
        DeviceArg::words(&bytes),
        DeviceArg::buf_mut(&mut y),
        DeviceArg::buf_mut(&mut t),
        DeviceArg::from(3usize),
        DeviceArg::from(s),
        DeviceArg::from(true),
        DeviceArg::from(0.5f32),
    ];
    assert_eq!(seen(&by_hand), expected);
    assert_eq!(<MixedArgs<'_> as KernelArgs<'_>>::PARAMS, ["x", "w", "y", "t", "n", "s", "on", "eps"]);
    assert_eq!(<MixedArgs<'_> as KernelArgs<'_>>::KERNEL, "mixed");
    let names: Vec<String> = mixed().params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, <MixedArgs<'_> as KernelArgs<'_>>::PARAMS);
}

#[test]
fn rows_appends_the_row_count_and_launches_the_rows_sibling() {
    let d = Device::host().expect("host device");
    let x = d.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let w = d.upload(&[5u32, 6, 7, 8]).unwrap();
    let mut y = d.alloc(ScalarType::F32, 4).unwrap();
    let mut t = d.alloc(ScalarType::U32, 4).unwrap();
    fn two_rows<'a>(x: &'a Buffer, w: &'a Buffer, y: &'a mut Buffer, t: &'a mut Buffer) -> MixedArgs<'a> {
        MixedArgs { x, w, y, t, n: 2, s: bf16::from_f32(2.0), on: true, eps: 0.5 }
    }
    let list = Rows(two_rows(&x, &w, &mut y, &mut t), 2).into_args();
    assert_eq!(list.len(), 9);
    assert_eq!(seen(&list[8..]), [Seen::Scalar(Const::index(2))]);
    drop(list);
    let rows = d.compile(&mixed_rows()).unwrap();
    d.launch_args(d.default_stream(), &rows, Rows(two_rows(&x, &w, &mut y, &mut t), 2)).unwrap();
    d.default_stream().synchronize().unwrap();
    assert_eq!(d.read::<f32>(&y).unwrap(), [2.5, 4.5, 6.5, 8.5]);
    assert_eq!(d.read::<u32>(&t).unwrap(), [5, 6, 5, 6]);
    // The m = 1 struct without its row count does not fit the rows kernel (debug builds check).
    if cfg!(debug_assertions) {
        let err = d.launch_args(d.default_stream(), &rows, two_rows(&x, &w, &mut y, &mut t)).unwrap_err();
        assert!(matches!(err, DeviceError::Mismatch { what: "launch arguments", .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "launch arguments: expected the parameters of `mixed_rows` (x, w, y, t, n, s, on, eps, rows), \
             found the arguments of `mixed` (x, w, y, t, n, s, on, eps)"
        );
    }
}
