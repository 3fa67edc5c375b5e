package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The header of a hand-built file, byte by byte, as the GGUF documentation
// lays it out: this checks the writer against the format, not against this
// package's own reader.
func TestWriteByteLayout(t *testing.T) {
	b, err := Encode([]KV{{"general.architecture", "llama"}, {"n", uint32(7)}},
		[]Tensor{{Name: "w", Shape: []uint64{2, 1}, Data: []float32{1.5, -2}}})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	le := func(v any) { _ = binary.Write(&want, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); want.WriteString(s) }
	want.WriteString("GGUF")
	le(uint32(3))
	le(uint64(1)) // tensors
	le(uint64(2)) // key-values
	str("general.architecture")
	le(uint32(8)) // string
	str("llama")
	str("n")
	le(uint32(4)) // uint32
	le(uint32(7))
	str("w")
	le(uint32(2)) // dimensions
	le(uint64(2)) // ne[0]
	le(uint64(1)) // ne[1]
	le(uint32(0)) // F32
	le(uint64(0)) // offset
	for want.Len()%32 != 0 {
		want.WriteByte(0)
	}
	le(float32(1.5))
	le(float32(-2))
	for want.Len()%32 != 0 {
		want.WriteByte(0)
	}
	if !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("bytes differ:\n got % x\nwant % x", b, want.Bytes())
	}
}

func TestRoundTripEveryType(t *testing.T) {
	kvs := []KV{
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"u64", uint64(1) << 60}, {"i64", int64(-1) << 60},
		{"f32", float32(1e-5)}, {"f64", math.Pi}, {"t", true}, {"f", false}, {"s", "héllo ▁"}, {"empty", ""},
		{"as", []string{"<unk>", "", "a"}}, {"af32", []float32{0, -1.25}}, {"ai32", []int32{1, -2, 3}},
		{"au8", []uint8{1, 2}}, {"ab", []bool{true, false}}, {"au64", []uint64{}}, {"af64", []float64{2.5}},
		{"general.alignment", uint32(64)},
	}
	tensors := []Tensor{
		{Name: "a", Shape: []uint64{3}, Data: []float32{1, 2, 3}},
		{Name: "b", Shape: []uint64{2, 2, 1}, Data: []float32{-1, 0.5, float32(math.Inf(1)), 7}},
	}
	b, err := Encode(kvs, tensors)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Fatalf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if !reflect.DeepEqual(f.KV, kvs) {
		t.Fatalf("key-values differ:\n got %#v\nwant %#v", f.KV, kvs)
	}
	for _, want := range tensors {
		info, ok := f.Tensor(want.Name)
		if !ok || !slices.Equal(info.Shape, want.Shape) || info.Type != GGMLTypeF32 || info.Offset%64 != 0 {
			t.Fatalf("tensor %s: %+v", want.Name, info)
		}
		got, err := f.F32(want.Name)
		if err != nil || !slices.Equal(got, want.Data) {
			t.Fatalf("tensor %s data %v (%v), want %v", want.Name, got, err, want.Data)
		}
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		kvs     []KV
		tensors []Tensor
		want    string
	}{
		"duplicate key":      {kvs: []KV{{"a", uint32(1)}, {"a", uint32(2)}}, want: "duplicate key"},
		"unsupported value":  {kvs: []KV{{"a", 3}}, want: "unsupported value type int"},
		"bad alignment":      {kvs: []KV{{"general.alignment", uint32(12)}}, want: "general.alignment"},
		"alignment not u32":  {kvs: []KV{{"general.alignment", uint64(32)}}, want: "general.alignment"},
		"shape and data":     {tensors: []Tensor{{Name: "t", Shape: []uint64{2, 2}, Data: []float32{1}}}, want: "4 values"},
		"no dimensions":      {tensors: []Tensor{{Name: "t", Data: []float32{1}}}, want: "0 dimensions"},
		"duplicate tensor":   {tensors: []Tensor{{Name: "t", Shape: []uint64{1}, Data: []float32{1}}, {Name: "t", Shape: []uint64{1}, Data: []float32{1}}}, want: "duplicate tensor"},
		"too many dimension": {tensors: []Tensor{{Name: "t", Shape: []uint64{1, 1, 1, 1, 1}, Data: []float32{1}}}, want: "5 dimensions"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Encode(c.kvs, c.tensors)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestParseRefusesMalformedFiles(t *testing.T) {
	good := Tiny()
	if _, err := Parse(good); err != nil {
		t.Fatal(err)
	}
	// Every truncation of the metadata is refused, never a panic.
	f, _ := Parse(good)
	for n := 0; n < int(f.DataOffset); n += 97 {
		if _, err := Parse(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	// Tensor data cut short.
	if _, err := Parse(good[:len(good)-64]); !errors.Is(err, ErrFormat) {
		t.Fatalf("cut tensor data: err = %v", err)
	}
	bad := bytes.Clone(good)
	copy(bad, "GGUX")
	if _, err := Parse(bad); !errors.Is(err, ErrFormat) {
		t.Fatalf("bad magic: err = %v", err)
	}
	bad = bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[4:], 9)
	if _, err := Parse(bad); !errors.Is(err, ErrFormat) {
		t.Fatalf("version 9: err = %v", err)
	}
	// A tensor offset that is not aligned.
	b, _ := Encode(nil, []Tensor{{Name: "t", Shape: []uint64{1}, Data: []float32{1}}})
	i := bytes.Index(b, []byte("t")) + 1 + 4 + 8 + 4 // name, n_dims, ne[0], type
	binary.LittleEndian.PutUint64(b[i:], 4)
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "not aligned") {
		t.Fatalf("unaligned tensor: err = %v", err)
	}
}

// The tiny model carries every key llama.cpp's llama loader and Ollama's
// reader need, with the types they read them as, and the tensors
// llama-model.cpp creates for LLM_ARCH_LLAMA with the shapes it expects.
func TestTinyModel(t *testing.T) {
	b := Tiny()
	if len(b) >= 512<<10 {
		t.Fatalf("the tiny model is %d bytes, want under half a megabyte", len(b))
	}
	if !bytes.Equal(b, Tiny()) {
		t.Fatal("Tiny is not deterministic")
	}
	other, err := TinyConfig{Seed: 42}.Build()
	if err != nil || bytes.Equal(other, b) {
		t.Fatalf("another seed gives the same file (%v)", err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultTiny
	tokens, scores, types := Vocabulary()
	want := map[string]any{
		"general.architecture":                   "llama",
		"general.file_type":                      uint32(0),
		"general.alignment":                      uint32(32),
		"llama.context_length":                   uint32(c.Context),
		"llama.embedding_length":                 uint32(64),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(c.FeedForward),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(2),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(16), // n_rot must equal the head size for llama
		"llama.vocab_size":                       uint32(len(tokens)),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.tokens":                  tokens,
		"tokenizer.ggml.scores":                  scores,
		"tokenizer.ggml.token_type":              types,
		"tokenizer.ggml.unknown_token_id":        uint32(0),
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(2),
	}
	for k, v := range want {
		got, ok := f.Get(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}

	// SentencePiece layout: <unk> <s> </s>, then <0x00>..<0xFF>, then pieces.
	if tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" || types[0] != 2 || types[1] != 3 || types[2] != 3 {
		t.Fatalf("control tokens %q types %v", tokens[:3], types[:3])
	}
	for b := range 256 {
		id := FirstByteToken + b
		if want := "<0x" + strings.ToUpper(hex2(b)) + ">"; tokens[id] != want || types[id] != 6 {
			t.Fatalf("token %d = %q type %d, want byte token %s", id, tokens[id], types[id], want)
		}
	}
	if tokens[FirstPlainToken] != "▁" || len(tokens) != FirstPlainToken+len(PlainPieces) {
		t.Fatalf("plain pieces start %q, %d tokens", tokens[FirstPlainToken], len(tokens))
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatalf("token %q twice (llama.cpp asserts every token is unique)", tok)
		}
		seen[tok] = true
	}

	vocab, w, kv, ff := uint64(len(tokens)), uint64(64), uint64(32), uint64(c.FeedForward)
	shapes := map[string][]uint64{
		"token_embd.weight":  {w, vocab},
		"output_norm.weight": {w},
		"output.weight":      {w, vocab},
	}
	for i := range 2 {
		p := "blk." + string(rune('0'+i)) + "."
		shapes[p+"attn_norm.weight"] = []uint64{w}
		shapes[p+"attn_q.weight"] = []uint64{w, w}
		shapes[p+"attn_k.weight"] = []uint64{w, kv}
		shapes[p+"attn_v.weight"] = []uint64{w, kv}
		shapes[p+"attn_output.weight"] = []uint64{w, w}
		shapes[p+"ffn_norm.weight"] = []uint64{w}
		shapes[p+"ffn_gate.weight"] = []uint64{w, ff}
		shapes[p+"ffn_up.weight"] = []uint64{w, ff}
		shapes[p+"ffn_down.weight"] = []uint64{ff, w}
	}
	if len(f.Tensors) != len(shapes) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(shapes))
	}
	for name, shape := range shapes {
		info, ok := f.Tensor(name)
		if !ok || !slices.Equal(info.Shape, shape) || info.Type != GGMLTypeF32 {
			t.Errorf("tensor %s = %+v, want F32 %v", name, info, shape)
			continue
		}
		data, err := f.F32(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("tensor %s holds %v", name, v)
			}
		}
	}
	if f.DataOffset%32 != 0 {
		t.Fatalf("tensor data starts at %d, not aligned", f.DataOffset)
	}

	// The steering that keeps generation going: every embedding carries the
	// constant in dimension 0, and the output matrix turns it into a bonus
	// for plain pieces, a penalty for control tokens, nothing for bytes.
	embd, _ := f.F32("token_embd.weight")
	out, _ := f.F32("output.weight")
	for tok := range int(vocab) {
		if embd[tok*64] != 4 {
			t.Fatalf("embedding %d dimension 0 = %v", tok, embd[tok*64])
		}
		want := float32(0)
		switch {
		case tok < FirstByteToken:
			want = -2
		case tok >= FirstPlainToken:
			want = 2
		}
		if out[tok*64] != want {
			t.Fatalf("output row %d dimension 0 = %v, want %v", tok, out[tok*64], want)
		}
	}
}

func TestTinyConfigRefusesImpossibleShapes(t *testing.T) {
	for _, c := range []TinyConfig{
		{Heads: 5},              // 64 is not divisible by 5
		{Heads: 4, KVHeads: 3},  // 3 does not divide 4
		{Width: 48, Heads: 16},  // head size 3 is odd (RoPE pairs)
		{Layers: -1},            // no layers
		{Context: 8, Layers: 1}, // too short
	} {
		if _, err := c.Build(); err == nil {
			t.Errorf("%+v built", c)
		}
	}
}

func hex2(b int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}
