// The "external32" data representation (MPI-3.1 13.5.2): every basic type
// at a fixed size, big-endian, integers two's complement, floating point
// IEEE (long double as binary128). MPI_Pack_external / MPI_Unpack_external /
// MPI_Pack_external_size are these functions on the binding's side.
//
// The packed image of `count` elements is the type signature's basic
// objects in type-map order, each in its external32 form, no header, no
// padding (a pair type is its two members: MPI_DOUBLE_INT = 8 + 4 bytes).
// Sizes (external32, native x86-64 in parentheses where different): char,
// signed/unsigned char, byte, packed, C_BOOL, int8/uint8 1; short, int16 2;
// int, unsigned, long (8), unsigned long (8), float, wchar, int32 4; long
// long, double, int64, Aint, Offset, Count 8; long double 16 (x87 80-bit in
// 16 bytes -> IEEE binary128); complex types twice their real part.
// Values of long / unsigned long outside 32 bits keep their low 32 bits on
// packing; unpacking sign- (zero-) extends. Converting a long double to
// binary128 is exact; back to x87 truncates the fraction to 64 bits.
//
// Errors: DatatypeError as for Datatype::pack/unpack (uncommitted type,
// negative count, buffer_too_small when outsize/insize is exceeded).
#pragma once

#include <cstddef>

#include "mpi_layer/datatype/datatype.hpp"

namespace nmad::mpi::external32 {

// Bytes of one basic object in external32 (pair types: both members).
std::size_t basic_size(BasicType b);
// MPI_Pack_external_size: bytes of `count` elements (any type).
Count size(const Datatype& t, Count count);
// MPI_Pack_external: appends `count` elements of inbuf at outbuf + position.
void pack(const Datatype& t, const void* inbuf, Count count, void* outbuf, Count outsize, Count& position);
// MPI_Unpack_external: reads `count` elements from inbuf + position.
void unpack(const Datatype& t, const void* inbuf, Count insize, Count& position, void* outbuf, Count count);

// The type map of t as it lies in a file whose data representation is
// external32 (MPI-3.1 13.5.2, "for those functions that accept
// displacements in bytes, the displacements must be specified in terms of
// their values in the file ... no scaling will be done"): the same
// constructors over the same arguments, each basic object replaced by a
// block of its external32 size, so counts, strides and displacements given
// in elements scale with the external32 extents while byte displacements,
// resized bounds and explicit extents stay as given. Struct extents get no
// alignment padding (external32 has none). Uncommitted; size() equals
// size(t, 1). Throws DatatypeError for a type the constructors reject.
Datatype file_layout(const Datatype& t);
}  // namespace nmad::mpi::external32
