// Package gguf writes and reads GGUF v3 files, the model format of
// llama.cpp and Ollama, and generates the tiny llama model that vacancyd's
// tests run on a real Ollama server (see Tiny).
//
// The format, as read in ggml-org/llama.cpp's gguf documentation and
// ggml/src/gguf.cpp, and in ollama/ollama's fs/ggml reader (v0.6.5): all
// numbers little-endian;
//
//	magic "GGUF", version uint32 (3), tensor count uint64, key-value count uint64,
//	key-values:   key (string), value type uint32, value,
//	tensor infos: name (string), dimension count uint32, dimensions uint64
//	              each (innermost first), ggml type uint32, data offset uint64,
//	padding to the alignment (general.alignment, default 32), then the
//	tensor data, each tensor starting at an aligned offset.
//
// A string is a uint64 byte length and the bytes (no terminator); an array is
// an element type uint32, a uint64 count and the elements.
package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Magic opens every GGUF file; Version is the version this package writes.
const (
	Magic   = "GGUF"
	Version = 3
)

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// Value types of a key-value pair.
const (
	TypeUint8   uint32 = 0
	TypeInt8    uint32 = 1
	TypeUint16  uint32 = 2
	TypeInt16   uint32 = 3
	TypeUint32  uint32 = 4
	TypeInt32   uint32 = 5
	TypeFloat32 uint32 = 6
	TypeBool    uint32 = 7
	TypeString  uint32 = 8
	TypeArray   uint32 = 9
	TypeUint64  uint32 = 10
	TypeInt64   uint32 = 11
	TypeFloat64 uint32 = 12
)

// GGMLTypeF32 is the ggml tensor type of 32-bit floats, the only one this
// package writes.
const GGMLTypeF32 uint32 = 0

// KV is one metadata pair. Value is one of uint8, int8, uint16, int16,
// uint32, int32, uint64, int64, float32, float64, bool, string, or a slice
// of one of those ([]string, []float32, []int32, ...).
type KV struct {
	Key   string
	Value any
}

// Tensor is an F32 tensor. Shape lists the dimensions innermost first (ggml's
// ne[0], ne[1], ...), so a matrix of Shape {in, out} holds out rows of in
// values each; len(Data) must be the product of Shape.
type Tensor struct {
	Name  string
	Shape []uint64
	Data  []float32
}

// Write writes a GGUF v3 file holding kvs (in order) and tensors (in order,
// F32). The alignment is general.alignment when kvs sets it (a uint32), else
// DefaultAlignment.
func Write(w io.Writer, kvs []KV, tensors []Tensor) error {
	align := uint64(DefaultAlignment)
	seen := map[string]bool{}
	for _, kv := range kvs {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: duplicate key %q", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a%8 != 0 {
				return fmt.Errorf("gguf: general.alignment must be a non-zero uint32 multiple of 8, not %#v", kv.Value)
			}
			align = uint64(a)
		}
	}
	names := map[string]bool{}
	for _, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Shape) == 0 || len(t.Shape) > 4 {
			return fmt.Errorf("gguf: tensor %q has %d dimensions (1 to 4 allowed)", t.Name, len(t.Shape))
		}
		if n := elements(t.Shape); n != uint64(len(t.Data)) {
			return fmt.Errorf("gguf: tensor %q has shape %v (%d values) but %d values", t.Name, t.Shape, n, len(t.Data))
		}
	}

	bw := bufio.NewWriter(w)
	e := &encoder{w: bw}
	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	var offset uint64
	for _, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(GGMLTypeF32)
		e.u64(offset)
		offset = pad(offset+4*uint64(len(t.Data)), align)
	}
	e.zeros(pad(e.n, align) - e.n)
	start := e.n
	for _, t := range tensors {
		for _, f := range t.Data {
			e.u32(math.Float32bits(f))
		}
		e.zeros(pad(e.n-start, align) - (e.n - start))
	}
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// Encode is Write into memory.
func Encode(kvs []KV, tensors []Tensor) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, kvs, tensors); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func elements(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	var k int
	k, e.err = e.w.Write(b)
	e.n += uint64(k)
}

func (e *encoder) u8(v uint8) { e.raw([]byte{v}) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:2], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}
func (e *encoder) zeros(n uint64) {
	for ; n > 0; n-- {
		e.u8(0)
	}
}

// value writes a value's type and the value.
func (e *encoder) value(v any) error {
	switch t := v.(type) {
	case []string:
		e.u32(TypeArray)
		e.u32(TypeString)
		e.u64(uint64(len(t)))
		for _, s := range t {
			e.str(s)
		}
		return nil
	case []uint8:
		return writeArray(e, TypeUint8, t)
	case []int8:
		return writeArray(e, TypeInt8, t)
	case []uint16:
		return writeArray(e, TypeUint16, t)
	case []int16:
		return writeArray(e, TypeInt16, t)
	case []uint32:
		return writeArray(e, TypeUint32, t)
	case []int32:
		return writeArray(e, TypeInt32, t)
	case []uint64:
		return writeArray(e, TypeUint64, t)
	case []int64:
		return writeArray(e, TypeInt64, t)
	case []float32:
		return writeArray(e, TypeFloat32, t)
	case []float64:
		return writeArray(e, TypeFloat64, t)
	case []bool:
		return writeArray(e, TypeBool, t)
	}
	typ, ok := scalarType(v)
	if !ok {
		return fmt.Errorf("unsupported value type %T", v)
	}
	e.u32(typ)
	e.scalar(v)
	return nil
}

func writeArray[T any](e *encoder, typ uint32, vs []T) error {
	e.u32(TypeArray)
	e.u32(typ)
	e.u64(uint64(len(vs)))
	for _, v := range vs {
		e.scalar(v)
	}
	return nil
}

func scalarType(v any) (uint32, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float32:
		return TypeFloat32, true
	case float64:
		return TypeFloat64, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	}
	return 0, false
}

func (e *encoder) scalar(v any) {
	switch t := v.(type) {
	case uint8:
		e.u8(t)
	case int8:
		e.u8(uint8(t))
	case uint16:
		e.u16(t)
	case int16:
		e.u16(uint16(t))
	case uint32:
		e.u32(t)
	case int32:
		e.u32(uint32(t))
	case uint64:
		e.u64(t)
	case int64:
		e.u64(uint64(t))
	case float32:
		e.u32(math.Float32bits(t))
	case float64:
		e.u64(math.Float64bits(t))
	case bool:
		if t {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(t)
	}
}

// File is a parsed GGUF file.
type File struct {
	Version   uint32
	KV        []KV // in file order; arrays decode to slices as Write takes them
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the tensor data begins in the file.
	DataOffset uint64
	data       []byte
}

// TensorInfo describes one tensor of a parsed file.
type TensorInfo struct {
	Name   string
	Shape  []uint64
	Type   uint32
	Offset uint64 // relative to DataOffset
}

// Get returns the value of key.
func (f *File) Get(key string) (any, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Tensor returns the named tensor's info.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// F32 returns the values of an F32 tensor.
func (f *File) F32(name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	if t.Type != GGMLTypeF32 {
		return nil, fmt.Errorf("gguf: tensor %q has type %d, not F32", name, t.Type)
	}
	n := elements(t.Shape)
	start := f.DataOffset + t.Offset
	if start+4*n > uint64(len(f.data)) || start+4*n < start {
		return nil, fmt.Errorf("gguf: tensor %q runs past the end of the file", name)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.data[start+4*uint64(i):]))
	}
	return out, nil
}

// ErrFormat is wrapped by every error Parse returns for malformed input.
var ErrFormat = errors.New("gguf: malformed file")

// Parse reads a whole GGUF v2 or v3 file held in memory. It checks what the
// loaders check: magic, version, known types, tensor offsets aligned, in
// bounds and not overlapping.
func Parse(b []byte) (*File, error) {
	d := &decoder{b: b}
	if string(d.take(4)) != Magic {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	f := &File{Version: d.u32(), data: b, Alignment: DefaultAlignment}
	if d.err == nil && f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("%w: version %d", ErrFormat, f.Version)
	}
	nt, nkv := d.u64(), d.u64()
	if d.err != nil {
		return nil, d.err
	}
	if nkv > uint64(len(b)) || nt > uint64(len(b)) {
		return nil, fmt.Errorf("%w: counts %d/%d exceed the file", ErrFormat, nt, nkv)
	}
	for range nkv {
		k := d.str()
		v := d.value(d.u32())
		if d.err != nil {
			return nil, fmt.Errorf("key %q: %w", k, d.err)
		}
		if _, dup := f.Get(k); dup {
			return nil, fmt.Errorf("%w: duplicate key %q", ErrFormat, k)
		}
		f.KV = append(f.KV, KV{Key: k, Value: v})
		if k == "general.alignment" {
			a, ok := v.(uint32)
			if !ok || a == 0 {
				return nil, fmt.Errorf("%w: general.alignment %#v", ErrFormat, v)
			}
			f.Alignment = uint64(a)
		}
	}
	for range nt {
		var t TensorInfo
		t.Name = d.str()
		nd := d.u32()
		if d.err == nil && (nd == 0 || nd > 4) {
			return nil, fmt.Errorf("%w: tensor %q has %d dimensions", ErrFormat, t.Name, nd)
		}
		for range nd {
			t.Shape = append(t.Shape, d.u64())
		}
		t.Type, t.Offset = d.u32(), d.u64()
		if d.err != nil {
			return nil, d.err
		}
		if _, dup := f.Tensor(t.Name); dup {
			return nil, fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
		}
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = pad(uint64(d.off), f.Alignment)
	if f.DataOffset > uint64(len(b)) {
		return nil, fmt.Errorf("%w: no tensor data", ErrFormat)
	}
	var prevEnd uint64
	for _, t := range f.Tensors {
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %q at offset %d is not aligned to %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		if t.Offset < prevEnd {
			return nil, fmt.Errorf("%w: tensor %q overlaps the one before it", ErrFormat, t.Name)
		}
		size := uint64(0)
		if t.Type == GGMLTypeF32 {
			size = 4 * elements(t.Shape)
		}
		prevEnd = t.Offset + size
		if f.DataOffset+prevEnd > uint64(len(b)) {
			return nil, fmt.Errorf("%w: tensor %q runs past the end of the file", ErrFormat, t.Name)
		}
	}
	return f, nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("%w: truncated at byte %d", ErrFormat, d.off)
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
func (d *decoder) str() string { return string(d.take(d.u64())) }

func (d *decoder) scalar(typ uint32) any {
	switch typ {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	case TypeBool:
		switch v := d.u8(); v {
		case 0, 1:
			return v == 1
		default:
			if d.err == nil {
				d.err = fmt.Errorf("%w: bool value %d", ErrFormat, v)
			}
			return false
		}
	case TypeString:
		return d.str()
	}
	if d.err == nil {
		d.err = fmt.Errorf("%w: unknown value type %d", ErrFormat, typ)
	}
	return nil
}

func (d *decoder) value(typ uint32) any {
	if typ != TypeArray {
		return d.scalar(typ)
	}
	et, n := d.u32(), d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("%w: array of %d elements exceeds the file", ErrFormat, n)
		return nil
	}
	switch et {
	case TypeString:
		return readArray(d, n, func() string { return d.str() })
	case TypeUint8:
		return readArray(d, n, d.u8)
	case TypeInt8:
		return readArray(d, n, func() int8 { return int8(d.u8()) })
	case TypeUint16:
		return readArray(d, n, d.u16)
	case TypeInt16:
		return readArray(d, n, func() int16 { return int16(d.u16()) })
	case TypeUint32:
		return readArray(d, n, d.u32)
	case TypeInt32:
		return readArray(d, n, func() int32 { return int32(d.u32()) })
	case TypeUint64:
		return readArray(d, n, d.u64)
	case TypeInt64:
		return readArray(d, n, func() int64 { return int64(d.u64()) })
	case TypeFloat32:
		return readArray(d, n, func() float32 { return math.Float32frombits(d.u32()) })
	case TypeFloat64:
		return readArray(d, n, func() float64 { return math.Float64frombits(d.u64()) })
	case TypeBool:
		return readArray(d, n, func() bool { return d.scalar(TypeBool).(bool) })
	}
	d.err = fmt.Errorf("%w: unsupported array element type %d", ErrFormat, et)
	return nil
}

func readArray[T any](d *decoder, n uint64, next func() T) []T {
	out := make([]T, 0, min(n, 1<<16))
	for range n {
		v := next()
		if d.err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}
